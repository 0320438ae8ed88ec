import Foundation
import LogStoreEngine

/// The models of a store as its log folds to, read without the model types and without the
/// writer's lock (what `logstore replay` prints).
///
/// ```swift
/// let state = try LogStore.replay(directory: "/var/lib/trips")
/// for entity in state.entities {
///     print(entity.name, entity.rows.count)
/// }
/// ```
public struct StoreState: Sendable, Hashable {
    /// One entity of the stored schema and its models.
    public struct Entity: Sendable, Hashable {
        /// The entity's name.
        public var name: String
        /// Attribute and relationship names in the stored schema's order (declaration order;
        /// properties added by later schema versions come last).
        public var attributeNames: [String]
        /// The models, in insertion order, with their values as stored. A model saved before an
        /// attribute was added has no value for it.
        public var rows: [DefaultSnapshot]
    }

    /// The directory the store was read from.
    public var directory: String
    /// The store's UUID: the store identifier of every ``PersistentIdentifier`` in ``entities``.
    public var storeIdentifier: UUID
    /// The version of the last schema record folded, or `nil` when the log (up to the replayed
    /// offset) holds none: then it is not a model store, or its first open has not finished.
    public var schemaVersion: UInt32?
    /// The entities of the stored schema, in the order they were added to it.
    public var entities: [Entity]
    /// How many transaction records were folded.
    public var transactionCount: Int
    /// The token of the last transaction folded, or `nil` when there is none.
    public var lastToken: DefaultHistoryToken?
    /// Non-zero bytes after the last good record, which the replay stopped at (see
    /// `RecoveryReport.unreadTail`); `logstore verify` tells whether they are a torn tail or damage.
    public var unreadTail: RecoveryReport.DroppedRecord?
    /// The checkpoint a time-travel replay started from (``transactionCount`` then counts only
    /// the transactions after it), or `nil` when it folded from the log's start.
    public var checkpointOffset: UInt64? = nil
    /// The schema the log's schema records store (entities, attribute types, relationships;
    /// unique constraints and delete rules live in code, not in the log), or `nil` without one.
    /// `logstore export` writes it so `logstore import` can create the same entities.
    public var schema: Schema? = nil
    /// The history consumers registered as of the replayed offset, by name.
    public var consumers: [ConsumerBookmark] = []

    /// The entity with this name, if the stored schema has it.
    public func entity(named name: String) -> Entity? {
        entities.first { $0.name == name }
    }
}
