import Foundation

/// A position in a store's history (SwiftData's `HistoryToken`): Codable (apps keep it), ordered
/// along the history, bound to one store. ``DefaultHistoryToken`` is LogStore's; a custom store
/// that provides history brings its own.
public protocol HistoryToken: Codable, Comparable, Hashable, Identifiable, Sendable {
    /// The type of ``tokenValue``.
    associatedtype TokenValue: Hashable & Sendable
    /// The type of ``storeIdentifier``.
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
    /// The UUID of the store whose history it belongs to (its `store.meta`).
    public var storeIdentifier: UUID
    /// The log offset of the transaction record it names.
    public var offset: UInt64
    /// The payload CRC32C of that record: a different record at the same offset (after a crash
    /// lost the original) has another check, and the token is refused as invalid.
    public var check: UInt32

    /// A token with these parts (tokens normally come from ``LogStore/currentToken``, a save's
    /// ``DataStoreSaveChangesResult/token`` or a transaction's ``DefaultHistoryTransaction/token``).
    public init(storeIdentifier: UUID, offset: UInt64, check: UInt32) {
        self.storeIdentifier = storeIdentifier
        self.offset = offset
        self.check = check
    }

    /// History order: by log offset (meaningful for tokens of one store).
    public static func < (lhs: DefaultHistoryToken, rhs: DefaultHistoryToken) -> Bool { lhs.offset < rhs.offset }

    private enum CodingKeys: String, CodingKey {
        case version = "v"
        case store, offset, check
    }

    /// Encodes the JSON form, with the offset as a decimal string (no precision is lost in
    /// JavaScript).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(1, forKey: .version)
        try container.encode(storeIdentifier.uuidString, forKey: .store)
        try container.encode(String(offset), forKey: .offset)
        try container.encode(check, forKey: .check)
    }

    /// Decodes the JSON form; another version, a store that is not a UUID or an offset that is not
    /// a decimal string throws `DecodingError.dataCorrupted`.
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

    /// `token@<offset>`.
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
