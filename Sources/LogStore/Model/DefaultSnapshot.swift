/// The values of one model at one moment, keyed by property name — what stores exchange with
/// contexts. Codable (JSON in the archive store) and Sendable.
public protocol DataStoreSnapshot: Codable, Sendable {
    /// The identifier of the model whose values these are.
    var persistentIdentifier: PersistentIdentifier { get }
    /// The same values under another identifier, with every reference to a key of
    /// `remappedIdentifiers` rewritten to its value: what a store does when it mints permanent
    /// identifiers for a save's inserts (SwiftData's `copy(persistentIdentifier:remappedIdentifiers:)`).
    func copy(
        persistentIdentifier: PersistentIdentifier,
        remappedIdentifiers: [PersistentIdentifier: PersistentIdentifier]?
    ) -> Self
}

extension DataStoreSnapshot {
    /// The WWDC24 session's spelling: the same values under another identifier, references left
    /// as they are (so references to models inserted in the same save stay temporary; use
    /// ``copy(persistentIdentifier:remappedIdentifiers:)`` to rewrite them).
    public func copy(persistentIdentifier: PersistentIdentifier) -> Self {
        copy(persistentIdentifier: persistentIdentifier, remappedIdentifiers: nil)
    }
}

/// LogStore's snapshot: an identifier and a value per property name.
public struct DefaultSnapshot: DataStoreSnapshot, Hashable {
    /// The model's identifier.
    public var persistentIdentifier: PersistentIdentifier
    /// The model's values by property name; a relationship's are references.
    public var values: [String: AttributeValue]

    /// A snapshot of the model `persistentIdentifier` with these values.
    public init(persistentIdentifier: PersistentIdentifier, values: [String: AttributeValue]) {
        self.persistentIdentifier = persistentIdentifier
        self.values = values
    }

    /// The value of a property, by name (`nil` when the snapshot has none).
    public subscript(name: String) -> AttributeValue? { values[name] }

    /// The same values under `persistentIdentifier`, with every reference to a key of
    /// `remappedIdentifiers` rewritten to its value.
    public func copy(
        persistentIdentifier: PersistentIdentifier,
        remappedIdentifiers: [PersistentIdentifier: PersistentIdentifier]?
    ) -> DefaultSnapshot {
        guard let remappedIdentifiers, !remappedIdentifiers.isEmpty else {
            return DefaultSnapshot(persistentIdentifier: persistentIdentifier, values: values)
        }
        return DefaultSnapshot(
            persistentIdentifier: persistentIdentifier,
            values: values.mapValues { $0.mapReferences { remappedIdentifiers[$0] ?? $0 } })
    }
}
