import Foundation

/// The 64-byte header at the start of every segment file (see `docs/FORMAT.md`, "Segment").
///
/// ```
/// 0  [8]  magic "LOGSTSEG"
/// 8  u32  formatVersion
/// 12 u32  headerByteCount (64)
/// 16 [16] store UUID
/// 32 u64  baseOffset      logical offset of the first record
/// 40 [20] reserved, zero
/// 60 u32  headerCRC       CRC32C of bytes 0..<60
/// ```
public struct SegmentHeader: Sendable, Equatable {
    public var formatVersion: UInt32
    public var storeID: UUID
    public var baseOffset: UInt64

    public init(formatVersion: UInt32 = FormatConstants.formatVersion, storeID: UUID, baseOffset: UInt64) {
        self.formatVersion = formatVersion
        self.storeID = storeID
        self.baseOffset = baseOffset
    }

    static let kind = FixedHeader.Kind(
        name: "segment header", missingMagic: "no segment magic (LOGSTSEG)",
        sizeFieldName: "segment header size", shortName: "segment header")

    public func encoded() -> [UInt8] {
        FixedHeader(
            magic: FormatConstants.segmentMagic, formatVersion: formatVersion, storeID: storeID,
            value: baseOffset
        ).encoded()
    }

    /// The version field of a header that failed its checks, when it names a version this code
    /// reads (1 through the current one): the likeliest layout of the segment's records.
    public static func probableVersion(ofDamaged bytes: [UInt8]) -> UInt32? {
        guard bytes.count >= 12 else { return nil }
        let version = UInt32(bytes[8]) | UInt32(bytes[9]) << 8 | UInt32(bytes[10]) << 16 | UInt32(bytes[11]) << 24
        return (1...FormatConstants.formatVersion).contains(version) ? version : nil
    }

    /// Decodes a segment header, or says what is wrong with it.
    public static func decode(_ bytes: [UInt8]) -> Result<SegmentHeader, HeaderProblem> {
        FixedHeader.decode(bytes, magic: FormatConstants.segmentMagic, kind: kind).map {
            SegmentHeader(formatVersion: $0.formatVersion, storeID: $0.storeID, baseOffset: $0.value)
        }
    }
}

extension UUID {
    /// The 16 bytes of the UUID in RFC 4122 order.
    public var bytes: [UInt8] {
        withBytes { Array($0) }
    }

    /// Calls `body` with the 16 bytes in RFC 4122 order where they lie (no array made).
    public func withBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try withUnsafeBytes(of: uuid, body)
    }

    /// A UUID from 16 bytes in RFC 4122 order.
    public init(bytes: [UInt8]) {
        precondition(bytes.count == 16)
        var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &value) { $0.copyBytes(from: bytes) }
        self.init(uuid: value)
    }
}
