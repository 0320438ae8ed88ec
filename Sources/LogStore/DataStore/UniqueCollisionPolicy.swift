/// What a save does when an insert has the values of a unique constraint that a stored model (or
/// an earlier insert of the same save) already has. A store configuration option
/// (``LogStoreConfiguration/uniqueCollisionPolicy``, ``ArchiveStoreConfiguration/uniqueCollisionPolicy``):
/// it governs how saves are resolved, never how the log is read — a record holds the resolved
/// effects (an upsert is recorded as an update, DECISIONS.md D5), so replay and time travel do
/// not depend on it, and it can change between opens.
///
/// ```swift
/// var configuration = LogStoreConfiguration(directory: "/var/lib/trips")
/// configuration.uniqueCollisionPolicy = .throw
/// ```
public enum UniqueCollisionPolicy: String, Hashable, Sendable, Codable {
    /// SwiftData's behaviour (the default): the insert becomes an update of the existing model,
    /// which keeps its identifier.
    case upsert
    /// The save throws ``LogStoreError/uniqueConstraintViolation(entity:constraint:values:)``,
    /// naming the entity, the constraint's attributes and the colliding values; nothing is written.
    case `throw`
}
