import Foundation

/// The identity of one model instance in one store: store, entity and primary key.
///
/// Inserted models carry a **temporary** identifier (no store) until their first save; the store
/// then mints a **permanent** one — a random UUID primary key, never a counter (DECISIONS.md D5) —
/// and returns the mapping in ``DataStoreSaveChangesResult/remappedIdentifiers``.
///
/// ```swift
/// let id = try PersistentIdentifier.identifier(for: store.identifier, entityName: "Trip", primaryKey: UUID())
/// ```
public struct PersistentIdentifier: Hashable, Comparable, Codable, Sendable, CustomStringConvertible {
    /// The store that minted the identifier; `nil` while it is temporary.
    public let storeIdentifier: String?
    /// The entity of the identified model.
    public let entityName: String
    /// The primary key within the entity.
    public let primaryKey: UUID

    /// A permanent identifier with a UUID key (what LogStore and ArchiveStore mint).
    static func permanent(for storeIdentifier: String, entityName: String, primaryKey: UUID) -> PersistentIdentifier {
        PersistentIdentifier(storeIdentifier: storeIdentifier, entityName: entityName, primaryKey: primaryKey)
    }

    /// A permanent identifier (SwiftData's `identifier(for:entityName:primaryKey:)`), for custom
    /// stores minting the identifiers of their inserts. LogStore's identifiers hold UUID keys: a `UUID`, or a string that is one, is accepted;
    /// any other key throws ``ModelError/unsupportedPrimaryKey(type:value:)``.
    public static func identifier<Key: Comparable & CustomStringConvertible & Codable & Hashable & Sendable>(
        for storeIdentifier: String, entityName: String, primaryKey: Key
    ) throws -> PersistentIdentifier {
        if let uuid = primaryKey as? UUID ?? UUID(uuidString: primaryKey.description) {
            return permanent(for: storeIdentifier, entityName: entityName, primaryKey: uuid)
        }
        throw ModelError.unsupportedPrimaryKey(type: "\(Key.self)", value: primaryKey.description)
    }

    /// A new temporary identifier for a model about to be inserted.
    public static func temporary(entityName: String) -> PersistentIdentifier {
        PersistentIdentifier(storeIdentifier: nil, entityName: entityName, primaryKey: RandomUUID.make())
    }

    init(storeIdentifier: String?, entityName: String, primaryKey: UUID) {
        self.storeIdentifier = storeIdentifier
        self.entityName = entityName
        self.primaryKey = primaryKey
    }

    /// Hashes the primary key only: it is a UUID (random for every identifier LogStore and
    /// ArchiveStore mint), and hashing the store identifier's 36 characters and the entity name
    /// too made every dictionary of identifiers — a save uses a dozen — cost several times as
    /// much (P4-ctx profile). Equality still compares all three.
    public func hash(into hasher: inout Hasher) {
        primaryKey.combineWords(into: &hasher)
    }

    /// Whether the identifier awaits its first save.
    public var isTemporary: Bool { storeIdentifier == nil }

    /// Orders by entity, then primary key, then store (temporary first): stable, not meaningful.
    public static func < (lhs: PersistentIdentifier, rhs: PersistentIdentifier) -> Bool {
        if lhs.entityName != rhs.entityName { return lhs.entityName < rhs.entityName }
        if lhs.primaryKey != rhs.primaryKey { return lhs.primaryKey.uuidString < rhs.primaryKey.uuidString }
        return (lhs.storeIdentifier ?? "") < (rhs.storeIdentifier ?? "")
    }

    /// `Entity/UUID`, with ` (temporary)` for a temporary identifier.
    public var description: String {
        "\(entityName)/\(primaryKey.uuidString)" + (isTemporary ? " (temporary)" : "")
    }
}

extension UUID {
    /// The 16 bytes as two words (in memory order).
    @inline(__always)
    var words: (UInt64, UInt64) {
        withUnsafeBytes(of: uuid) {
            ($0.loadUnaligned(as: UInt64.self), $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        }
    }

    /// Feeds all 128 bits to `hasher` as two words. `UUID`'s own `hash(into:)` feeds them as a
    /// byte buffer, Hasher's slower path, in lookups made for every change a save resolves and a
    /// replay folds (P4-ctx and P5 profiles).
    @inline(__always)
    func combineWords(into hasher: inout Hasher) {
        let (high, low) = words
        hasher.combine(high)
        hasher.combine(low)
    }
}
