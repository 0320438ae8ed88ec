/// When an append returns, relative to the `fdatasync` that makes it durable.
public enum Durability: Sendable, Hashable {
    /// An append returns after an `fdatasync` covers it (the default). Concurrent appends share
    /// one `fdatasync`. Readers see only durable records.
    case synchronous
    /// An append returns after its bytes are written; the syncer runs `fdatasync` at least every
    /// `syncIntervalMax`. A crash may lose the last interval's appends.
    case batched(syncIntervalMax: Duration)
    /// An append returns after its bytes are written; `fdatasync` runs only when the unsynced
    /// bound, a segment roll, ``Log/sync()`` or ``Log/close()`` asks for it.
    case none

    /// `.batched` with a 100 ms interval.
    public static let batched = Durability.batched(syncIntervalMax: .milliseconds(100))
}

/// How a ``Log`` is opened.
public struct LogOptions: Sendable {
    /// The durability of ``Log/append(_:type:)``. Default: ``Durability/synchronous``.
    public var durability: Durability = .synchronous
    /// A segment rolls before a record would take it past this many bytes (header included).
    /// Default 64 MiB.
    public var segmentByteCountMax: UInt64 = 64 * 1024 * 1024
    /// Compress payloads with LZ4 when that makes them smaller. Default `true`.
    public var compresses = true
    /// Payloads shorter than this are stored raw without trying LZ4 (single small records rarely
    /// shrink: measured ratio 0.997 on 200-byte records). Default 128 bytes.
    public var compressionThresholdByteCount = 128
    /// Segment dictionaries (FORMAT.md §6.8): a segment this writer starts begins with a
    /// dictionary of up to this many bytes — the payloads it appended last — and its records are
    /// compressed against it (a 140-byte model save measured 138 → 54 bytes), from 16 bytes up.
    /// A store's first segment has none: once that many bytes of payloads are written into a
    /// segment without a dictionary, the writer rolls early to start one. Capped at 64 KiB (LZ4's
    /// window) and at an eighth of ``segmentByteCountMax``; below 1 KiB (or 0), no dictionaries.
    /// Needs ``compresses``. Default 32 KiB.
    public var dictionaryByteCountMax = 32 * 1024
    /// How far ahead of the write position the syncer keeps zeros written (and so blocks
    /// allocated), so that `fdatasync` need not commit file-size changes. Default 2 MiB; 0 turns
    /// preallocation off.
    public var preallocationAheadByteCount: UInt64 = 2 * 1024 * 1024
    /// Zeros written per preallocation step (writers that would reach the chunk wait for it, so
    /// it is kept small). Default 256 KiB.
    public var preallocationChunkByteCount: UInt64 = 256 * 1024
    /// Several processes may open the store for writing at once (DECISIONS.md D11 stage 2): `LOCK`
    /// is held shared, each save takes the store's `TURN` (catching up with what the others
    /// wrote) and each `fdatasync` its `SYNC`. Every writing process must open it with this set;
    /// one without it holds `LOCK` exclusively, as before. Default `false`. Needs POSIX `flock`
    /// (not the simulated file system). Durable-end marks, history deletion and automatic
    /// checkpoints are off in such a store for now.
    public var allowsOtherWriters = false
    /// Create the store when the directory has none. Default `true`.
    public var createsIfMissing = true
    /// Repair on open: truncate at the first bad record anywhere, delete what follows, and report
    /// it, instead of refusing to open a corrupt store. Default `false`.
    public var repairs = false
    /// After this long without a new record, once everything written is durable, the log appends
    /// (and syncs) a durable-end mark stating so (FORMAT.md §6.6), so that damage to the last
    /// acknowledged records is told from a torn write (D12). `nil`: only at close. Default 1 s.
    public var durableEndMarkDelay: Duration? = .seconds(1)
    /// The file system; tests pass a simulated one.
    public var fileSystem: any FileSystem = PosixFileSystem()

    public init() {}

    /// The size of the dictionaries a writer makes (``dictionaryByteCountMax`` within its caps),
    /// or 0 when it makes none.
    var dictionaryByteCount: Int {
        guard compresses else { return 0 }
        let size = min(dictionaryByteCountMax, FormatConstants.dictionaryByteCountMax, Int(segmentByteCountMax / 8))
        return size >= Self.dictionaryByteCountMin ? size : 0
    }

    /// Smaller dictionaries are not made: they would barely pay for their record.
    static let dictionaryByteCountMin = 1024

    /// With a dictionary, payloads from this size up are compressed (a 30-byte update record
    /// shrinks against one; alone it never does).
    static let dictionaryCompressionThresholdByteCount = 16

    /// Smallest and largest accepted ``segmentByteCountMax``: a segment holds its header and at
    /// least a small record; sparse index entries are 32-bit offsets within a segment.
    public static let segmentByteCountRange: ClosedRange<UInt64> = 128...(2 * 1024 * 1024 * 1024)

    /// Throws ``LogError/Code/invalidOptions`` when a value is out of range.
    public func validate() throws(LogError) {
        guard Self.segmentByteCountRange.contains(segmentByteCountMax) else {
            throw LogError(
                .invalidOptions,
                "segmentByteCountMax \(segmentByteCountMax) is outside "
                    + "\(Self.segmentByteCountRange.lowerBound)...\(Self.segmentByteCountRange.upperBound) bytes.")
        }
        guard preallocationAheadByteCount == 0 || preallocationChunkByteCount > 0 else {
            throw LogError(
                .invalidOptions,
                "preallocationChunkByteCount must be positive when preallocating "
                    + "(set preallocationAheadByteCount to 0 to turn preallocation off).")
        }
    }
}
