import Foundation

/// The one 64-byte header layout that starts every file of a store — segment, `store.meta`,
/// checkpoint (docs/FORMAT.md §5): a magic naming the kind of file, the format version, the store
/// UUID, one kind-specific `u64`, and a CRC over the rest.
///
/// ```
/// 0  [8]  magic            "LOGSTSEG", "LOGSTMET", "LOGSTCKP"
/// 8  u32  formatVersion
/// 12 u32  headerByteCount  (64)
/// 16 [16] store UUID
/// 32 u64  value            segment: base offset; store.meta: creation time (µs, i64);
///                          checkpoint: its offset X
/// 40 [20] reserved, zero
/// 60 u32  headerCRC        CRC32C of bytes 0..<60
/// ```
///
/// ``SegmentHeader``, ``StoreMeta`` and ``RecordFileHeader`` are this codec with their kind's
/// magic and names; every check (length, magic, CRC, version, size field) is made here, once.
public struct FixedHeader: Sendable, Equatable {
    /// The header's byte count (also its `headerByteCount` field).
    public static let byteCount = 64

    public var magic: [UInt8]
    public var formatVersion: UInt32
    public var storeID: UUID
    /// The kind-specific field at byte 32.
    public var value: UInt64

    public init(magic: [UInt8], formatVersion: UInt32 = FormatConstants.formatVersion, storeID: UUID, value: UInt64) {
        precondition(magic.count == 8, "a header magic is 8 bytes")
        self.magic = magic
        self.formatVersion = formatVersion
        self.storeID = storeID
        self.value = value
    }

    /// How messages name the kind of header ("segment header", "store.meta", "file header").
    public struct Kind: Sendable {
        /// The header's name at the start of a message, e.g. "segment header".
        public var name: String
        /// What a missing magic is called, e.g. "no segment magic (LOGSTSEG)".
        public var missingMagic: String
        /// The size field's name, e.g. "segment header size".
        public var sizeFieldName: String
        /// What the whole file is called when it is too short, e.g. "segment header".
        public var shortName: String

        public init(name: String, missingMagic: String, sizeFieldName: String, shortName: String) {
            self.name = name
            self.missingMagic = missingMagic
            self.sizeFieldName = sizeFieldName
            self.shortName = shortName
        }
    }

    public func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: Self.byteCount)
        writer.write(bytes: magic)
        writer.write(formatVersion)
        writer.write(UInt32(Self.byteCount))
        writer.write(bytes: storeID.bytes)
        writer.write(value)
        writer.writeZeros(20)
        writer.write(CRC32C.checksum(writer.bytes))
        assert(writer.count == Self.byteCount, "a fixed header is 64 bytes")
        return writer.bytes
    }

    /// Decodes the header at the start of `bytes`, which must begin with `magic`, or says what is
    /// wrong, checked in this order: length, magic, CRC, version, size field. The CRC comes before
    /// the version: every version keeps these 64 bytes and the CRC at byte 60, so a flipped
    /// version bit is damage, and a valid newer header is named as newer.
    public static func decode(_ bytes: [UInt8], magic: [UInt8], kind: Kind) -> Result<FixedHeader, HeaderProblem> {
        guard bytes.count >= byteCount else {
            return .failure(
                .damaged("file is \(bytes.count) bytes, shorter than the \(byteCount)-byte \(kind.shortName)"))
        }
        guard Array(bytes[0..<8]) == magic else { return .failure(.damaged(kind.missingMagic)) }
        let header = Array(bytes[0..<byteCount])
        let storedCRC = Self.uint32(header, at: 60)
        let computed = header.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[0..<60])) }
        guard storedCRC == computed else {
            return .failure(
                .damaged("\(kind.name) checksum mismatch (stored \(hex(storedCRC)), computed \(hex(computed)))"))
        }
        if let problem = versionProblem(header) { return .failure(problem) }
        let headerByteCount = Self.uint32(header, at: 12)
        guard headerByteCount == UInt32(byteCount) else {
            return .failure(.damaged("\(kind.sizeFieldName) \(headerByteCount), expected \(byteCount)"))
        }
        return .success(
            FixedHeader(
                magic: magic, formatVersion: Self.uint32(header, at: 8),
                storeID: UUID(bytes: Array(header[16..<32])), value: Self.uint64(header, at: 32)))
    }

    /// The little-endian `u32` at `position` (the caller has checked the length).
    static func uint32(_ bytes: [UInt8], at position: Int) -> UInt32 {
        precondition(position + 4 <= bytes.count)
        return (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[position + $1]) << (8 * $1) }
    }

    /// The little-endian `u64` at `position` (the caller has checked the length).
    static func uint64(_ bytes: [UInt8], at position: Int) -> UInt64 {
        precondition(position + 8 <= bytes.count)
        return (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[position + $1]) << (8 * $1) }
    }
}

/// The version field at bytes 8..<12 of a header that starts with its magic: newer than this
/// code reads, or 0 (never written), or fine (`nil`).
func versionProblem(_ bytes: [UInt8]) -> HeaderProblem? {
    guard bytes.count >= 12 else { return .damaged("shorter than 12 bytes") }
    let version = FixedHeader.uint32(bytes, at: 8)
    if version > FormatConstants.formatVersion { return .newerVersion(version) }
    if version == 0 { return .damaged("format version 0 does not exist") }
    return nil
}

/// Why a fixed header (segment, `store.meta`, index) was not accepted.
public enum HeaderProblem: Error, Sendable, Equatable {
    /// Written by a newer format version than this code reads.
    case newerVersion(UInt32)
    /// Not a valid header: the text says what failed.
    case damaged(String)
}
