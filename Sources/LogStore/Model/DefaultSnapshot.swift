/// The values of one model at one moment, keyed by property name — what stores exchange with
/// contexts. Codable (JSON in the archive store) and Sendable.
public protocol DataStoreSnapshot: Codable, Sendable {
    var persistentIdentifier: PersistentIdentifier { get }
    /// The same values under another identifier (used when a temporary identifier is remapped).
    func copy(persistentIdentifier: PersistentIdentifier) -> Self
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

    public func copy(persistentIdentifier: PersistentIdentifier) -> DefaultSnapshot {
        DefaultSnapshot(persistentIdentifier: persistentIdentifier, values: values)
    }
}
