/// The values of one model at one moment, keyed by property name — what stores exchange with
/// contexts. Codable (JSON in the archive store) and Sendable.
public protocol DataStoreSnapshot: Codable, Sendable {
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
    public var persistentIdentifier: PersistentIdentifier
    public var values: [String: AttributeValue]

    public init(persistentIdentifier: PersistentIdentifier, values: [String: AttributeValue]) {
        self.persistentIdentifier = persistentIdentifier
        self.values = values
    }

    public subscript(name: String) -> AttributeValue? { values[name] }

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
