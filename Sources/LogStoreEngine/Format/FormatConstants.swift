/// Every number the on-disk format fixes, mirrored from `docs/FORMAT.md` (the normative text).
/// Change one here only together with that document, and bump ``formatVersion`` when bytes change.
public enum FormatConstants {
    /// The on-disk format version written into `store.meta` and every segment and checkpoint
    /// header. Version 2 (D12): record headers state the durable end their writer knew. Version 3
    /// (issue 13): segment dictionaries. Every older version is still read.
    public static let formatVersion: UInt32 = 3
    /// The first version whose segments may hold records compressed against the segment's
    /// dictionary (flag bit 1, FORMAT.md §6.8). Version 3 changed nothing else: an older build
    /// meets a version-3 file and says "newer format version", instead of judging such a record
    /// unsupported — which it reported as corruption, and its repair would have cut at.
    public static let dictionaryVersion: UInt32 = 3

    /// The version to read a segment as when its header is damaged and the version is a guess
    /// (a neighbour's, `store.meta`'s): a guess of 2 or later reads as the current version —
    /// version 3 only admits dictionary records to version 2's layout, so reading a version-2
    /// segment as 3 changes nothing, while reading a version-3 one as 2 would refuse its
    /// dictionary-compressed records (and repair would cut there). Version 1's layout differs.
    public static func readableVersion(guessed version: UInt32) -> UInt32 {
        version >= durableEndStatementVersion ? formatVersion : version
    }
    /// The largest logical offset a file name may carry (2^62: a log never gets there — 4 EiB —
    /// and offset arithmetic on anything larger could overflow). A larger number in a segment,
    /// index or checkpoint name makes the file not one of the store's (FORMAT.md §2).
    public static let offsetMax: UInt64 = 1 << 62
    /// The revision of docs/FORMAT.md this build writes (12: a checkpoint's row counts record,
    /// §9.2; 10 and 11 changed how writers of a shared store use the coordination file, 9 the
    /// transaction payload, §6.9). Within a format version a revision adds only what older
    /// builds refuse with a message or skip.
    public static let documentRevision = 12

    /// The first version whose record headers carry the durable-end statement (and a 16-bit
    /// dictionary id in place of version 1's reserved bytes).
    public static let durableEndStatementVersion: UInt32 = 2

    /// The sparse index file's own version: independent of the log's format (its layout did not
    /// change with version 2), so upgrading a store does not throw its index files away.
    public static let indexFormatVersion: UInt32 = 1

    /// Largest uncompressed (and therefore stored) payload of one record: 16 MiB.
    public static let recordByteCountMax = 16 * 1024 * 1024

    /// Bytes that may be written past the last completed sync, in every durability mode: 4 MiB.
    /// Recovery relies on it: a valid record ending more than this past a bad one proves the bad
    /// one had been synced, so it is corruption rather than a torn tail.
    public static let unsyncedByteCountMax: UInt64 = 4 * 1024 * 1024

    /// Size of a record header in bytes.
    public static let recordHeaderByteCount = 32
    /// Size of a segment header in bytes.
    public static let segmentHeaderByteCount = 64
    /// Size of the `store.meta` file in bytes.
    public static let storeMetaByteCount = 64
    /// Size of an index file header in bytes.
    public static let indexHeaderByteCount = 56

    /// Magic at the start of every segment file: ASCII `LOGSTSEG`.
    public static let segmentMagic: [UInt8] = Array("LOGSTSEG".utf8)
    /// Magic at the start of `store.meta`: ASCII `LOGSTMET`.
    public static let storeMetaMagic: [UInt8] = Array("LOGSTMET".utf8)
    /// Magic at the start of a sparse index file: ASCII `LOGSTIDX`.
    public static let indexMagic: [UInt8] = Array("LOGSTIDX".utf8)

    /// Number of decimal digits in segment, index and checkpoint file names.
    public static let fileNameDigitCount = 20
    public static let storeMetaFileName = "store.meta"
    public static let lockFileName = "LOCK"
    /// The file through which the writing process tells readers in other processes where the
    /// visible end is (FORMAT.md §10.1, DECISIONS.md D11).
    public static let coordinationFileName = "coordination"
    /// Lock files of a store shared by several writing processes (DECISIONS.md D11 stage 2): the
    /// turn (catch up and write one batch) and the one `fdatasync` at a time. Created in place,
    /// never unlinked, like `LOCK`.
    public static let turnLockFileName = "TURN"
    public static let syncLockFileName = "SYNC"
    /// The maintenance lock of a store shared by several writing processes: one process at a
    /// time writes a checkpoint (D11; taken before `TURN`). Created in place, never unlinked.
    public static let maintenanceLockFileName = "MAINTENANCE"
    /// Where processes of a store shared by several writers sleep until a lock they wait for is
    /// released (FORMAT.md §10.2): mapped shared, futex words only, never synced. Created in
    /// place, never unlinked.
    public static let wakeFileName = "WAKE"
    /// The size `WAKE` is grown to and mapped at: one page.
    public static let wakeFileByteCount = 4096
    /// Bytes per lock in `WAKE` (`MAINTENANCE` at 0, `TURN` at 64, `SYNC` at 128): a release
    /// counter and a sleepers' count, alone on a cache line.
    public static let wakeChannelByteCount = 64
    /// The files a store keeps beside its records that are neither records nor checkpoints: the
    /// metadata, the lock files, the coordination file and `WAKE`.
    public static let controlFileNames: Set<String> = [
        storeMetaFileName, lockFileName, coordinationFileName, turnLockFileName, syncLockFileName,
        maintenanceLockFileName, wakeFileName,
    ]
    public static let segmentFileExtension = ".log"
    public static let indexFileExtension = ".index"
    public static let temporaryFileExtension = ".tmp"
    public static let checkpointFilePrefix = "checkpoint-"
    public static let checkpointFileExtension = ".ckpt"

    /// The sparse index holds one entry per this many bytes of log (at the first record starting
    /// at or after each multiple).
    public static let indexIntervalByteCount: UInt64 = 4096

    /// Record flag: the payload is an LZ4 block (liblz4 block format, no frame).
    public static let flagCompressedLZ4: UInt8 = 0x01
    /// Record flag (format version 3): the payload is an LZ4 block compressed with
    /// dictionary `dictionaryID`, which must be ``segmentDictionaryID``: the dictionary record
    /// that is the segment's first record (FORMAT.md §6.8). Always set together with bit 0.
    public static let flagDictionary: UInt8 = 0x02
    /// The only dictionary id a record may name: its segment's dictionary (its first record).
    public static let segmentDictionaryID: UInt32 = 1
    /// A dictionary holds at most this many bytes (LZ4's window: older bytes could not be matched).
    public static let dictionaryByteCountMax = 64 * 1024
    /// Every flag bit this version understands.
    public static let knownFlags: UInt8 = flagCompressedLZ4 | flagDictionary
}

/// The type byte of a record. Type 0 is never a record (zeros are not data). Types with the
/// high bit (0x80) set may be skipped by a reader that does not know them; any other unknown type
/// is refused.
public struct RecordType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Opaque application bytes (what the Log layer stores for its own users and tests).
    public static let data = RecordType(rawValue: 0x01)
    /// A transaction of the model store: the resolved effects of one save.
    public static let transaction = RecordType(rawValue: 0x02)
    /// A schema intern table record of the model store.
    public static let schema = RecordType(rawValue: 0x03)
    /// Checkpoint file: header record.
    public static let checkpointHeader = RecordType(rawValue: 0x10)
    /// Checkpoint file: one chunk of entity state.
    public static let checkpointChunk = RecordType(rawValue: 0x11)
    /// Checkpoint file: trailer with counts.
    public static let checkpointTrailer = RecordType(rawValue: 0x12)
    /// An LZ4 dictionary (FORMAT.md §6.8): as the first record of a segment, the dictionary that
    /// the segment's records with flag bit 1 are compressed against. Record iterators skip it.
    public static let dictionary = RecordType(rawValue: 0x81)
    /// A consumer bookmark (history retention).
    public static let bookmark = RecordType(rawValue: 0x82)
    /// A durable-end mark (format version 2): an empty record whose header states that
    /// everything before it is durable. Written by the log itself when idle and at close; record
    /// iterators skip it.
    public static let durableEndMark = RecordType(rawValue: 0x83)
    /// Checkpoint file: the rows of each entity, after the header (document revision 12), so a
    /// reader makes each entity's arrays and index once at their size. Skippable: an older
    /// reader ignores it.
    public static let checkpointRowCounts = RecordType(rawValue: 0x84)

    /// Whether an older reader may skip this type when it does not know it.
    public var isSkippable: Bool { rawValue & 0x80 != 0 }

    /// Whether this format version defines the type (``known`` without hashing: every record
    /// read asks, and the set's hashing was an eighth of an open's recovery scan).
    public var isKnown: Bool {
        switch self {
        case .data, .transaction, .schema, .checkpointHeader, .checkpointChunk, .checkpointTrailer,
            .dictionary, .bookmark, .durableEndMark, .checkpointRowCounts:
            true
        default: false
        }
    }

    /// Every type this format version defines.
    public static let known: Set<RecordType> = [
        .data, .transaction, .schema, .checkpointHeader, .checkpointChunk, .checkpointTrailer,
        .dictionary, .bookmark, .durableEndMark, .checkpointRowCounts,
    ]

    public var description: String {
        switch self {
        case .data: "data"
        case .transaction: "transaction"
        case .schema: "schema"
        case .checkpointHeader: "checkpoint-header"
        case .checkpointChunk: "checkpoint-chunk"
        case .checkpointTrailer: "checkpoint-trailer"
        case .dictionary: "dictionary"
        case .bookmark: "bookmark"
        case .durableEndMark: "durable-end-mark"
        case .checkpointRowCounts: "checkpoint-row-counts"
        default: "type-0x" + String(rawValue, radix: 16)
        }
    }
}
