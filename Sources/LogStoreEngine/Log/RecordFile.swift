import Foundation

// A *record file* is a file of framed records outside the log: a 64-byte file header with the
// segment header's layout (its own magic), then records in the log's own framing (32-byte record
// headers, both CRCs, the 16 MiB limit, LZ4 when smaller) packed from file position 64, as if the
// file were a segment with base offset 0 — so record offsets are `file position − 64` — and
// nothing after the last record. Checkpoint files (`checkpoint-<20 digits>.ckpt`, DECISIONS D4,
// docs/FORMAT.md §9) are record files with the magic `LOGSTCKP`; the model layer defines their
// payloads. A record file is written whole as temp file + writes + fsync + rename + directory
// fsync, so unlike the last segment it never has a torn tail: any bad byte is corruption.

extension FormatConstants {
    /// Magic at the start of a checkpoint file: ASCII `LOGSTCKP`.
    public static let checkpointMagic: [UInt8] = Array("LOGSTCKP".utf8)
}

/// The names of checkpoint files: `checkpoint-<20-digit offset>.ckpt`.
public enum CheckpointFileName {
    /// `checkpoint-00000000000000001234.ckpt` for offset 1234.
    public static func name(offset: UInt64) -> String {
        FormatConstants.checkpointFilePrefix + LogFileNames.padded(offset) + FormatConstants.checkpointFileExtension
    }

    /// The offset a checkpoint file name encodes, or `nil` when `name` is not exactly a checkpoint
    /// name (temporary files included).
    public static func offset(_ name: String) -> UInt64? {
        LogFileNames.checkpointOffset(name)
    }

    /// `directory/name`, joined as the engine joins paths.
    public static func path(directory: String, name: String) -> String {
        LogFileNames.join(directory, name)
    }
}

/// The 64-byte header of a record file: the segment header's layout (docs/FORMAT.md §5.1) with the
/// file kind's own magic, and a kind-specific `u64` where a segment has its base offset (for a
/// checkpoint: its offset X, equal to the number in the file name).
///
/// ```
/// 0  [8]  magic            e.g. "LOGSTCKP"
/// 8  u32  formatVersion
/// 12 u32  headerByteCount  (64)
/// 16 [16] store UUID
/// 32 u64  value            checkpoint: the offset X
/// 40 [20] reserved, zero
/// 60 u32  headerCRC        CRC32C of bytes 0..<60
/// ```
public struct RecordFileHeader: Sendable, Equatable {
    public var magic: [UInt8]
    public var formatVersion: UInt32
    public var storeID: UUID
    public var value: UInt64

    public init(magic: [UInt8], formatVersion: UInt32 = FormatConstants.formatVersion, storeID: UUID, value: UInt64) {
        precondition(magic.count == 8, "a record file magic is 8 bytes")
        self.magic = magic
        self.formatVersion = formatVersion
        self.storeID = storeID
        self.value = value
    }

    public func encoded() -> [UInt8] {
        FixedHeader(magic: magic, formatVersion: formatVersion, storeID: storeID, value: value).encoded()
    }

    /// Decodes a record file header that must start with `magic`, or says what is wrong. Checked
    /// in the segment header's order: length, magic, CRC, version, header size.
    public static func decode(_ bytes: [UInt8], magic: [UInt8]) -> Result<RecordFileHeader, HeaderProblem> {
        let kind = FixedHeader.Kind(
            name: "file header", missingMagic: "no \(String(decoding: magic, as: UTF8.self)) magic",
            sizeFieldName: "file header size", shortName: "file header")
        return FixedHeader.decode(bytes, magic: magic, kind: kind).map {
            RecordFileHeader(magic: magic, formatVersion: $0.formatVersion, storeID: $0.storeID, value: $0.value)
        }
    }
}

/// Writes a record file atomically: records go to `<name>.tmp` as they are appended (one
/// `pwrite` each, so the file need not be held in memory); ``commit()`` `fsync`s it, renames it to
/// `name` and `fsync`s the directory. Until then nothing is visible under `name`; a crash leaves
/// at most the temporary file, which the next open for writing removes. Dropping an uncommitted
/// writer (or ``abandon()``) removes the temporary file.
///
/// ```swift
/// let writer = try RecordFileWriter(directory: dir, name: CheckpointFileName.name(offset: x),
///                                   header: RecordFileHeader(magic: FormatConstants.checkpointMagic,
///                                                            storeID: id, value: x),
///                                   fileSystem: fs)
/// try writer.append(headerPayload, type: .checkpointHeader)
/// try writer.commit()
/// ```
public final class RecordFileWriter {
    public let directory: String
    public let name: String
    private let compresses: Bool
    /// The file being written; `nil` once committed or abandoned.
    private var file: AtomicFile?
    /// File position of the next record.
    private var position = UInt64(FormatConstants.segmentHeaderByteCount)

    /// Creates `<name>.tmp` (replacing a leftover one) and writes the file header.
    public init(
        directory: String, name: String, header: RecordFileHeader, compresses: Bool = true,
        fileSystem: any FileSystem
    ) throws(LogError) {
        self.directory = directory
        self.name = name
        self.compresses = compresses
        do throws(FileSystemError) {
            let file = try AtomicFile(path: LogFileNames.join(directory, name), fileSystem: fileSystem)
            self.file = file
            try file.handle.write(header.encoded(), at: 0)
        } catch {
            abandon()
            throw LogError.io(error, "Writing \(name)")
        }
    }

    deinit { abandon() }

    /// Bytes written so far (file header and records).
    public var byteCount: UInt64 { position }

    /// Frames `payload` as a record of `type` (compressed when that makes it smaller), writes it,
    /// and returns its offset in the file (`file position − 64`). Throws
    /// ``LogError/Code/recordTooLarge`` past ``FormatConstants/recordByteCountMax``.
    @discardableResult
    public func append(_ payload: [UInt8], type: RecordType) throws(LogError) -> UInt64 {
        guard let file else { throw LogError(.closed, "The record file \(name) is already finished.") }
        var record = try PreparedRecord.encoding(payload, type: type, compresses: compresses)
        let offset = position - UInt64(FormatConstants.segmentHeaderByteCount)
        // A checkpoint states no durable end of its own (its name's offset is what it proves).
        record.assign(offset: offset, durableEnd: offset)
        do { try file.handle.write(record.bytes, at: position) } catch {
            abandon()
            throw LogError.io(error, "Writing \(name)")
        }
        position += record.recordByteCount
        return offset
    }

    /// `fsync`, rename to the final name, directory `fsync` (``AtomicFile/commit(durable:keepOpen:)``).
    /// After it returns the file is durable under its name. On failure the temporary file is
    /// removed and the error thrown; if the failure was the directory `fsync`, the file may or may
    /// not survive a crash.
    public func commit() throws(LogError) {
        guard let file else { throw LogError(.closed, "The record file \(name) is already finished.") }
        self.file = nil
        do throws(FileSystemError) { try file.commit() } catch {
            throw LogError.io(error, "Writing \(name)")
        }
    }

    /// Closes and removes the temporary file (nothing if already committed).
    public func abandon() {
        file?.abandon()
        file = nil
    }
}

/// Reads a record file forward, checking everything: the file header (magic, CRC, version, size),
/// every record as a segment's (§6.4 of docs/FORMAT.md: header CRC, own offset, lengths, type
/// and flags, payload CRC, decompression), and that the file ends exactly after the last record.
/// Any problem throws ``LogError/Code/corruption`` naming the file and the byte position (a
/// newer format version throws ``LogError/Code/newerFormatVersion``); read errors are I/O errors.
///
/// ```swift
/// var reader = try RecordFileReader(path: path, magic: FormatConstants.checkpointMagic, fileSystem: fs)
/// while let record = try reader.next() { ... }
/// ```
public struct RecordFileReader {
    public let path: String
    public let header: RecordFileHeader
    /// The file's size in bytes.
    public let byteCount: UInt64
    private let handle: any FileHandle
    private var scanner: SegmentScanner
    private var isAtEnd = false

    public init(path: String, magic: [UInt8], fileSystem: any FileSystem) throws(LogError) {
        self.path = path
        let handle: any FileHandle
        let headerBytes: [UInt8]
        do throws(FileSystemError) {
            handle = try fileSystem.openFile(path, mode: .readOnly)
            byteCount = try handle.size()
            headerBytes = try handle.read(byteCount: FormatConstants.segmentHeaderByteCount, at: 0)
        } catch {
            throw LogError.io(error, "Reading \(path)")
        }
        self.handle = handle
        switch RecordFileHeader.decode(headerBytes, magic: magic) {
        case .success(let header): self.header = header
        case .failure(.newerVersion(let version)):
            handle.close()
            throw LogError(
                .newerFormatVersion,
                "\(path) has format version \(version); this LogStore reads version "
                    + "\(FormatConstants.formatVersion) and older. Use a newer LogStore.", file: path)
        case .failure(.damaged(let what)):
            handle.close()
            throw LogError.corruption(path, offset: 0, what)
        }
        scanner = SegmentScanner(handle: handle, baseOffset: 0, formatVersion: header.formatVersion)
    }

    /// The file position of the next record.
    public var position: UInt64 { scanner.position }

    /// The next record (checked and decompressed), or `nil` after the last one.
    public mutating func next() throws(LogError) -> LogRecord? {
        try nextInPlace { LogRecord($0) }
    }

    /// The next record (checked and decompressed) handed to `body` where the reader holds it —
    /// its payload valid only during the call, no array made per record — and what `body` made
    /// of it, or `nil` after the last one.
    package mutating func nextInPlace<Record>(_ body: (LogRecordView) -> Record) throws(LogError) -> Record? {
        guard !isAtEnd else { return nil }
        let position = scanner.position
        switch try scanner.next(decodesPayload: true, body) {
        case .record(let record):
            return record
        case .end:
            // Written whole and synced before its rename: nothing may follow the last record.
            guard position == byteCount else {
                throw LogError.corruption(
                    path, offset: position,
                    "no record at byte \(position), but the file goes on "
                        + "to byte \(byteCount)")
            }
            isAtEnd = true
            handle.close()
            return nil
        case .bad(let reason, _), .unsupported(let reason):
            throw LogError.corruption(path, offset: position, "record at byte \(position): \(reason)")
        }
    }

    /// Closes the file (also done at the end, and when the reader is dropped with its handle).
    public func close() { handle.close() }
}
