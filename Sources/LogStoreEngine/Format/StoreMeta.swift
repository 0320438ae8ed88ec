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

    public init(
        formatVersion: UInt32 = FormatConstants.formatVersion, storeID: UUID,
        creationTimeMicroseconds: Int64
    ) {
        self.formatVersion = formatVersion
        self.storeID = storeID
        self.creationTimeMicroseconds = creationTimeMicroseconds
    }

    public var creationDate: Date {
        Date(timeIntervalSince1970: Double(creationTimeMicroseconds) / 1_000_000)
    }

    static let kind = FixedHeader.Kind(
        name: "store.meta", missingMagic: "no store.meta magic (LOGSTMET)",
        sizeFieldName: "store.meta size field", shortName: "store.meta")

    public func encoded() -> [UInt8] {
        FixedHeader(
            magic: FormatConstants.storeMetaMagic, formatVersion: formatVersion, storeID: storeID,
            value: UInt64(bitPattern: creationTimeMicroseconds)
        ).encoded()
    }

    public static func decode(_ bytes: [UInt8]) -> Result<StoreMeta, HeaderProblem> {
        // A store.meta of another size cannot be version 1: name a newer version if it says so.
        if bytes.count != FormatConstants.storeMetaByteCount, bytes.count >= 12,
            Array(bytes[0..<8]) == FormatConstants.storeMetaMagic, let problem = versionProblem(bytes)
        {
            return .failure(problem)
        }
        guard bytes.count == FormatConstants.storeMetaByteCount else {
            return .failure(
                .damaged(
                    "store.meta is \(bytes.count) bytes, expected "
                        + "\(FormatConstants.storeMetaByteCount)"))
        }
        return FixedHeader.decode(bytes, magic: FormatConstants.storeMetaMagic, kind: kind).map {
            StoreMeta(
                formatVersion: $0.formatVersion, storeID: $0.storeID,
                creationTimeMicroseconds: Int64(bitPattern: $0.value))
        }
    }
}
