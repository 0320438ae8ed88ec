import Foundation

/// The current state of a store: the fold of every transaction's changes, in log order.
///
/// Rows keep the order they were inserted in (`sequence`), so fetches without a sort return
/// models in insertion order. Each entity keeps its rows in an ``EntityRows``: an append-only
/// array of slots in insertion order plus a primary-key index, so iterating in order costs no
/// sort (a limit-1 fetch reads one slot). Values are copy-on-write, so two states sharing rows
/// (the written and the published one) share their storage.
struct FoldState: Sendable {
    struct Row: Sendable, Hashable {
        var sequence: UInt64
        var values: [String: AttributeValue]
    }

    /// entity name → rows in insertion order.
    private(set) var entities: [String: EntityRows] = [:]
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

    /// The rows of an entity in insertion order (no sort: the slots are kept in that order).
    func rows(of entityName: String) -> EntityRows {
        entities[entityName] ?? EntityRows()
    }

    /// Applies one recorded change. Replay never validates: a change to a missing model (which a
    /// correct writer never records) is applied as well as it can be and does not stop replay.
    mutating func apply(_ change: ResolvedChange) {
        switch change {
        case .insert(let identifier, let values):
            entities[identifier.entityName, default: EntityRows()].append(
                identifier.primaryKey,
                Row(sequence: nextSequence, values: values))
            nextSequence += 1
        case .update(let identifier, let values):
            entities[identifier.entityName]?.update(identifier.primaryKey) { row in
                for (name, value) in values { row.values[name] = value }
            }
        case .delete(let identifier, _):
            entities[identifier.entityName]?.remove(identifier.primaryKey)
        }
    }

    var sequenceEnd: UInt64 { nextSequence }

    /// Applies a migration's steps (a schema record's, docs/FORMAT.md §7.1) to every stored
    /// model: renamed values move to the new name, removed ones go, fills give models without a
    /// value the default. Rows keep their order and sequence numbers.
    mutating func apply(_ steps: [SchemaMigration.Step]) {
        for step in steps {
            switch step {
            case .removeEntity(let entity, _):
                entities[entity] = nil
            case .removeAttribute(let entity, _, _, let name):
                entities[entity]?.updateEach { $0.values[name] = nil }
            case .renameAttribute(let entity, _, _, let from, let to):
                entities[entity]?.updateEach { row in
                    if let value = row.values.removeValue(forKey: from) { row.values[to] = value }
                }
            case .fill(let entity, _, _, let name, let value):
                entities[entity]?.updateEach { row in
                    if row.values[name]?.isNull ?? true { row.values[name] = value }
                }
            }
        }
    }

    /// A state loaded from a checkpoint: its rows and its sequence counter, which may be past
    /// every row's sequence (rows inserted last may have been deleted since).
    init(restoring entities: [String: [UUID: Row]], sequenceEnd: UInt64) {
        for (name, rows) in entities {
            var ordered = EntityRows()
            ordered.reserveCapacity(rows.count)
            for (primaryKey, row) in rows.sorted(by: { $0.value.sequence < $1.value.sequence }) {
                ordered.append(primaryKey, row)
            }
            self.entities[name] = ordered
        }
        self.nextSequence = sequenceEnd
    }
}

/// The rows of one entity in insertion order: slots (a deleted row leaves a hole, compacted once
/// holes outnumber rows) and an index from primary key to slot. Appending, looking up, updating
/// and deleting are O(1) (amortised); iterating in order is a walk over the slots.
struct EntityRows: Sendable, Sequence, Equatable {
    struct Slot: Sendable, Hashable {
        var primaryKey: UUID
        var row: FoldState.Row
    }

    private var slots: [Slot?] = []
    private var index: [UUID: Int] = [:]

    init() {}

    var count: Int { index.count }
    var isEmpty: Bool { index.isEmpty }

    mutating func reserveCapacity(_ capacity: Int) {
        slots.reserveCapacity(capacity)
        index.reserveCapacity(capacity)
    }

    subscript(primaryKey: UUID) -> FoldState.Row? {
        index[primaryKey].flatMap { slots[$0]?.row }
    }

    /// Adds a row at the end (a row with the same key is removed first, so it moves to the end).
    mutating func append(_ primaryKey: UUID, _ row: FoldState.Row) {
        remove(primaryKey)
        index[primaryKey] = slots.count
        slots.append(Slot(primaryKey: primaryKey, row: row))
    }

    mutating func update(_ primaryKey: UUID, _ body: (inout FoldState.Row) -> Void) {
        guard let position = index[primaryKey] else { return }
        body(&slots[position]!.row)
    }

    mutating func remove(_ primaryKey: UUID) {
        guard let position = index.removeValue(forKey: primaryKey) else { return }
        slots[position] = nil
        let holes = slots.count - index.count
        if holes > 1024 && holes > index.count { compact() }
    }

    /// Changes every row in place (keys and order stay).
    mutating func updateEach(_ body: (inout FoldState.Row) -> Void) {
        for position in slots.indices where slots[position] != nil { body(&slots[position]!.row) }
    }

    private mutating func compact() {
        slots.removeAll { $0 == nil }
        for (position, slot) in slots.enumerated() { index[slot!.primaryKey] = position }
    }

    struct Iterator: IteratorProtocol {
        var base: IndexingIterator<[Slot?]>
        mutating func next() -> (UUID, FoldState.Row)? {
            while let slot = base.next() {
                if let slot { return (slot.primaryKey, slot.row) }
            }
            return nil
        }
    }

    func makeIterator() -> Iterator { Iterator(base: slots.makeIterator()) }

    var underestimatedCount: Int { count }

    /// Same rows in the same order (holes do not count).
    static func == (lhs: EntityRows, rhs: EntityRows) -> Bool {
        lhs.count == rhs.count && lhs.elementsEqual(rhs) { $0.0 == $1.0 && $0.1 == $1.1 }
    }
}
