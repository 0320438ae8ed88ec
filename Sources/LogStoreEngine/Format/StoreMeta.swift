import Foundation

/// The 64-byte `store.meta` file: written once, atomically, when a store is created.
///
/// ```
/// 0  [8]  magic "LOGSTMET"
/// 8  u32  formatVersion
/// 12 u32  byteCount (64)
/// 16 [16] store UUID
/// 32 i64  creation time, microseconds since the Unix epoch
/// 40 [20] reserved, zero
/// 60 u32  CRC32C of bytes 0..<60
/// ```
public struct StoreMeta: Sendable, Equatable {
    public var formatVersion: UInt32
    public var storeID: UUID
    public var creationTimeMicroseconds: Int64

    public init(formatVersion: UInt32 = FormatConstants.formatVersion, storeID: UUID,
                creationTimeMicroseconds: Int64) {
        self.formatVersion = formatVersion
        self.storeID = storeID
        self.creationTimeMicroseconds = creationTimeMicroseconds
    }

    public var creationDate: Date {
        Date(timeIntervalSince1970: Double(creationTimeMicroseconds) / 1_000_000)
    }

    public func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: FormatConstants.storeMetaByteCount)
        writer.write(bytes: FormatConstants.storeMetaMagic)
        writer.write(formatVersion)
        writer.write(UInt32(FormatConstants.storeMetaByteCount))
        writer.write(bytes: storeID.bytes)
        writer.write(creationTimeMicroseconds)
        writer.writeZeros(20)
        writer.write(CRC32C.checksum(writer.bytes))
        return writer.bytes
    }

    public static func decode(_ bytes: [UInt8]) -> Result<StoreMeta, HeaderProblem> {
        // A store.meta of another size cannot be version 1: name a newer version if it says so.
        if bytes.count != FormatConstants.storeMetaByteCount, bytes.count >= 12,
           Array(bytes[0..<8]) == FormatConstants.storeMetaMagic, let problem = versionProblem(bytes) {
            return .failure(problem)
        }
        guard bytes.count == FormatConstants.storeMetaByteCount else {
            return .failure(.damaged("store.meta is \(bytes.count) bytes, expected "
                + "\(FormatConstants.storeMetaByteCount)"))
        }
        guard Array(bytes[0..<8]) == FormatConstants.storeMetaMagic else {
            return .failure(.damaged("no store.meta magic (LOGSTMET)"))
        }
        return bytes.withUnsafeBytes { buffer in
            var reader = ByteReader(buffer, position: 8)
            let version: UInt32 = try! reader.read()
            let byteCount: UInt32 = try! reader.read()
            let storeID = UUID(bytes: try! reader.readBytes(16))
            let created: Int64 = try! reader.read()
            try! reader.skip(20)
            let storedCRC: UInt32 = try! reader.read()
            let computed = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: buffer[0..<60]))
            guard storedCRC == computed else {
                return .failure(.damaged("store.meta checksum mismatch (stored \(hex(storedCRC)), "
                    + "computed \(hex(computed)))"))
            }
            if let problem = versionProblem(Array(bytes[0..<12])) { return .failure(problem) }
            guard byteCount == UInt32(FormatConstants.storeMetaByteCount) else {
                return .failure(.damaged("store.meta size field \(byteCount), expected 64"))
            }
            return .success(StoreMeta(formatVersion: version, storeID: storeID, creationTimeMicroseconds: created))
        }
    }
}
