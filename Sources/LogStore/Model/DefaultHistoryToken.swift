import Foundation

/// A position in a store's history (SwiftData's `HistoryToken`): Codable (apps keep it), ordered
/// along the history, bound to one store. ``DefaultHistoryToken`` is LogStore's; a custom store
/// that provides history brings its own.
public protocol HistoryToken: Codable, Comparable, Hashable, Identifiable, Sendable {
    associatedtype TokenValue: Hashable & Sendable
    associatedtype StoreIdentifier: Hashable & Sendable
    /// Where in the history it points (LogStore: a log offset).
    var tokenValue: TokenValue { get }
    /// The store whose history it belongs to.
    var storeIdentifier: StoreIdentifier { get }
}

/// A position in a store's history: the offset of a transaction record in the log, with that
/// record's payload CRC32C to tell a re-used offset apart (DECISIONS.md D6). Codable (apps keep
/// it as JSON), Comparable within one store, Hashable.
///
/// JSON form: `{"v":1,"store":"<UUID>","offset":"<decimal string>","check":<u32>}`.
public struct DefaultHistoryToken: HistoryToken, CustomStringConvertible {
    public var storeIdentifier: UUID
    public var offset: UInt64
    public var check: UInt32

    public init(storeIdentifier: UUID, offset: UInt64, check: UInt32) {
        self.storeIdentifier = storeIdentifier
        self.offset = offset
        self.check = check
    }

    public static func < (lhs: DefaultHistoryToken, rhs: DefaultHistoryToken) -> Bool { lhs.offset < rhs.offset }

    private enum CodingKeys: String, CodingKey {
        case version = "v"
        case store, offset, check
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(1, forKey: .version)
        try container.encode(storeIdentifier.uuidString, forKey: .store)
        try container.encode(String(offset), forKey: .offset)
        try container.encode(check, forKey: .check)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let version = try container.decode(Int.self, forKey: .version)
        guard version == 1 else {
            throw DecodingError.dataCorruptedError(
                forKey: .version, in: container,
                debugDescription: "history token version \(version) is not 1")
        }
        guard let store = UUID(uuidString: try container.decode(String.self, forKey: .store)) else {
            throw DecodingError.dataCorruptedError(forKey: .store, in: container, debugDescription: "not a UUID")
        }
        guard let offset = UInt64(try container.decode(String.self, forKey: .offset)) else {
            throw DecodingError.dataCorruptedError(
                forKey: .offset, in: container, debugDescription: "not a decimal offset")
        }
        self.init(storeIdentifier: store, offset: offset, check: try container.decode(UInt32.self, forKey: .check))
    }

    public var description: String { "token@\(offset)" }

    /// The token's position: the log offset of its transaction record.
    public var tokenValue: UInt64 { offset }

    /// Unique within its store: the offset.
    public var id: UInt64 { offset }

    /// The documented JSON form, keys in the documented order:
    /// `{"v":1,"store":"<UUID>","offset":"<decimal string>","check":<u32>}`.
    public var jsonString: String {
        "{\"v\":1,\"store\":\"\(storeIdentifier.uuidString)\",\"offset\":\"\(offset)\",\"check\":\(check)}"
    }
}
