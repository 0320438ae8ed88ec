import Foundation

/// The current state of a store: the fold of every transaction's changes, in log order.
///
/// Rows keep the order they were inserted in (`sequence`), so fetches without a sort return
/// models in insertion order. Values are copy-on-write, so two states sharing rows (the written
/// and the published one) share their storage.
struct FoldState: Sendable {
    struct Row: Sendable, Hashable {
        var sequence: UInt64
        var values: [String: AttributeValue]
    }

    /// entity name → primary key → row.
    private(set) var entities: [String: [UUID: Row]] = [:]
    private var nextSequence: UInt64 = 0

    init() {}

    func row(_ identifier: PersistentIdentifier) -> Row? {
        entities[identifier.entityName]?[identifier.primaryKey]
    }

    func contains(_ identifier: PersistentIdentifier) -> Bool {
        row(identifier) != nil
    }

    func count(of entityName: String) -> Int {
        entities[entityName]?.count ?? 0
    }

    var totalCount: Int { entities.values.reduce(0) { $0 + $1.count } }

    /// The rows of an entity in insertion order.
    func rows(of entityName: String) -> [(UUID, Row)] {
        (entities[entityName] ?? [:]).sorted { $0.value.sequence < $1.value.sequence }.map { ($0.key, $0.value) }
    }

    /// Applies one recorded change. Replay never validates: a change to a missing model (which a
    /// correct writer never records) is applied as well as it can be and does not stop replay.
    mutating func apply(_ change: ResolvedChange) {
        switch change {
        case let .insert(identifier, values):
            entities[identifier.entityName, default: [:]][identifier.primaryKey] = Row(sequence: nextSequence, values: values)
            nextSequence += 1
        case let .update(identifier, values):
            // In place: copying the row out and back would copy its values on every update.
            for (name, value) in values { entities[identifier.entityName]?[identifier.primaryKey]?.values[name] = value }
        case let .delete(identifier, _):
            entities[identifier.entityName]?[identifier.primaryKey] = nil
        }
    }

    /// Inserts a row with a known sequence (loading a checkpoint).
    mutating func load(_ identifier: PersistentIdentifier, row: Row) {
        entities[identifier.entityName, default: [:]][identifier.primaryKey] = row
        nextSequence = max(nextSequence, row.sequence + 1)
    }

    var sequenceEnd: UInt64 { nextSequence }

    /// A state loaded from a checkpoint: its rows and its sequence counter, which may be past
    /// every row's sequence (rows inserted last may have been deleted since).
    init(restoring entities: [String: [UUID: Row]], sequenceEnd: UInt64) {
        self.entities = entities
        self.nextSequence = sequenceEnd
    }
}
