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

    public func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: FormatConstants.segmentHeaderByteCount)
        writer.write(bytes: FormatConstants.segmentMagic)
        writer.write(formatVersion)
        writer.write(UInt32(FormatConstants.segmentHeaderByteCount))
        writer.write(bytes: storeID.bytes)
        writer.write(baseOffset)
        writer.writeZeros(20)
        writer.write(CRC32C.checksum(writer.bytes))
        return writer.bytes
    }

    /// Decodes a segment header, or says what is wrong with it.
    public static func decode(_ bytes: [UInt8]) -> Result<SegmentHeader, HeaderProblem> {
        guard bytes.count >= FormatConstants.segmentHeaderByteCount else {
            return .failure(.damaged("file is \(bytes.count) bytes, shorter than the "
                + "\(FormatConstants.segmentHeaderByteCount)-byte segment header"))
        }
        guard Array(bytes[0..<8]) == FormatConstants.segmentMagic else {
            return .failure(.damaged("no segment magic (LOGSTSEG)"))
        }
        let header = Array(bytes[0..<FormatConstants.segmentHeaderByteCount])
        return header.withUnsafeBytes { buffer in
            var reader = ByteReader(buffer, position: 8)
            let version: UInt32 = try! reader.read()
            let headerByteCount: UInt32 = try! reader.read()
            let storeID = UUID(bytes: try! reader.readBytes(16))
            let baseOffset: UInt64 = try! reader.read()
            try! reader.skip(20)
            let storedCRC: UInt32 = try! reader.read()
            let computed = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: buffer[0..<60]))
            guard storedCRC == computed else {
                return .failure(.damaged("segment header checksum mismatch (stored \(hex(storedCRC)), "
                    + "computed \(hex(computed)))"))
            }
            // The CRC is checked first: every version keeps these 64 bytes and the CRC at byte 60
            // (docs/FORMAT.md), so a flipped version bit is damage, and a valid newer header is named.
            if let problem = versionProblem(header) { return .failure(problem) }
            guard headerByteCount == UInt32(FormatConstants.segmentHeaderByteCount) else {
                return .failure(.damaged("segment header size \(headerByteCount), expected "
                    + "\(FormatConstants.segmentHeaderByteCount)"))
            }
            return .success(SegmentHeader(formatVersion: version, storeID: storeID, baseOffset: baseOffset))
        }
    }
}

/// The version field at bytes 8..<12 of a header that starts with its magic: newer than this
/// code reads, or 0 (never written), or fine (`nil`).
func versionProblem(_ bytes: [UInt8]) -> HeaderProblem? {
    guard bytes.count >= 12 else { return .damaged("shorter than 12 bytes") }
    let version = UInt32(bytes[8]) | UInt32(bytes[9]) << 8 | UInt32(bytes[10]) << 16 | UInt32(bytes[11]) << 24
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

extension UUID {
    /// The 16 bytes of the UUID in RFC 4122 order.
    public var bytes: [UInt8] {
        withUnsafeBytes(of: uuid) { Array($0) }
    }

    /// A UUID from 16 bytes in RFC 4122 order.
    public init(bytes: [UInt8]) {
        precondition(bytes.count == 16)
        var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &value) { $0.copyBytes(from: bytes) }
        self.init(uuid: value)
    }
}
