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
        var values: RowValues
    }

    /// Each entity's rows in insertion order, at the position ``tableIndex`` gives its name: a
    /// change mutates its entity's rows in place in an array, where a dictionary of rows by name
    /// made every folded change a keyed modify that copied the optional rows out and back (~20 %
    /// of a replay's fold, P5 profile).
    private var tables: [EntityRows] = []
    /// The entity names of ``tables``, in the same order.
    private var tableNames: [String] = []
    /// entity name → position in ``tables``.
    private var tableIndex: [String: Int] = [:]
    /// The position of the entity a fold touched last (its changes mostly follow one another):
    /// one compare of names instead of a hash.
    private var lastTable: (name: String, position: Int)?
    private var nextSequence: UInt64 = 0

    init() {}

    /// entity name → rows in insertion order (made on request: checkpoints, migrations, tests).
    var entities: [String: EntityRows] {
        Dictionary(uniqueKeysWithValues: zip(tableNames, tables))
    }

    /// The names of the entities that have rows, or had (an entity's rows stay, maybe empty,
    /// until a migration removes it).
    var entityNames: [String] { tableNames }

    /// The position in ``tables`` of `name`'s rows, or `nil` when it has none.
    @inline(__always)
    private func position(of name: String) -> Int? {
        if let lastTable, lastTable.name == name { return lastTable.position }
        return tableIndex[name]
    }

    /// The position of `name`'s rows, remembered for the next change (folds and saves).
    @inline(__always)
    private mutating func rememberedPosition(of name: String) -> Int? {
        guard let position = position(of: name) else { return nil }
        lastTable = (name, position)
        return position
    }

    /// The position of `name`'s rows, made empty when it has none.
    private mutating func positionMade(for name: String) -> Int {
        if let position = rememberedPosition(of: name) { return position }
        let position = tables.count
        tables.append(EntityRows())
        tableNames.append(name)
        tableIndex[name] = position
        lastTable = (name, position)
        return position
    }

    func row(_ identifier: PersistentIdentifier) -> Row? {
        row(entity: identifier.entityName, primaryKey: identifier.primaryKey)
    }

    /// The row of the model of `entity` with `primaryKey` (no identifier to make).
    func row(entity: String, primaryKey: UUID) -> Row? {
        guard let position = position(of: entity) else { return nil }
        return tables[position][primaryKey]
    }

    func contains(_ identifier: PersistentIdentifier) -> Bool {
        row(identifier) != nil
    }

    func count(of entityName: String) -> Int {
        position(of: entityName).map { tables[$0].count } ?? 0
    }

    var totalCount: Int { tables.reduce(0) { $0 + $1.count } }

    /// The slot of a model's row in its entity's rows (``UniqueIndex`` names owners by it), or
    /// `nil` when it has none. Valid until the entity renumbers its slots (``renumberings(of:)``).
    func slot(of identifier: PersistentIdentifier) -> Int? {
        guard let position = position(of: identifier.entityName) else { return nil }
        return tables[position].slot(of: identifier.primaryKey)
    }

    /// The slot of `entity`'s last row (where an insert puts its row), `nil` when it has none.
    func lastSlot(of entity: String) -> Int? {
        guard let position = position(of: entity) else { return nil }
        return tables[position].lastSlot
    }

    /// The key and row in a slot of `entity`'s rows (`nil`: a hole, or no such slot).
    func entry(entity: String, slot: Int) -> (primaryKey: UUID, row: Row)? {
        guard let position = position(of: entity) else { return nil }
        return tables[position].entry(at: slot)
    }

    /// How many times `entity`'s rows were renumbered (their holes compacted): slots read
    /// before a change that renumbered are stale after it.
    func renumberings(of entity: String) -> UInt64 {
        position(of: entity).map { tables[$0].renumberings } ?? 0
    }

    /// Each entity's key table made the size one made for its count has, where it is more than a
    /// quarter larger (``PositionTable/trim(hashOf:)``: after an open's replay grew them).
    mutating func trimIndexes() {
        for position in tables.indices { tables[position].trimIndex() }
    }

    /// The rows of an entity in insertion order (no sort: the slots are kept in that order).
    func rows(of entityName: String) -> EntityRows {
        position(of: entityName).map { tables[$0] } ?? EntityRows()
    }

    /// Applies one recorded change, returning the model's values after it (`nil` when it has no
    /// row then). Replay never validates: a change to a missing model (which a correct writer
    /// never records) is applied as well as it can be and does not stop replay.
    @discardableResult
    mutating func apply(_ change: ResolvedChange) -> RowValues? {
        apply(change, tellingOld: false).new
    }

    /// ``apply(_:)``, telling the model's values before the change too (`nil`: it had no row):
    /// the unique index's old slots, with one lookup of the key where a lookup then a change
    /// took two.
    mutating func applyTellingOld(_ change: ResolvedChange) -> (old: RowValues?, new: RowValues?) {
        apply(change, tellingOld: true)
    }

    /// An update keeps its old values only when told to: held across the change, they make it
    /// copy the row's slots (a replay's fold does not need them).
    private mutating func apply(_ change: ResolvedChange, tellingOld: Bool) -> (old: RowValues?, new: RowValues?) {
        switch change {
        case .insert(let identifier, let values):
            let (new, old) = insert(entityName: identifier.entityName, primaryKey: identifier.primaryKey) {
                RowValues(values, layout: $0)
            }
            return (old, new)
        case .update(let identifier, let values):
            return update(
                entityName: identifier.entityName, primaryKey: identifier.primaryKey, values: values,
                tellingOld: tellingOld)
        case .delete(let identifier, _):
            return (delete(entityName: identifier.entityName, primaryKey: identifier.primaryKey), nil)
        }
    }

    /// A new model whose row values another state made (the published state takes the working
    /// state's: one copy of a saved model's values, not two).
    mutating func insert(entityName: String, primaryKey: UUID, row values: RowValues) {
        insert(entityName: entityName, primaryKey: primaryKey) { _ in values }
    }

    /// A new model (an existing one with its key is replaced and moves to the end) whose values
    /// are (name, value) pairs — a dictionary, or a record's values — a later value of one name
    /// winning.
    /// Returns its values and those of the row with its key it replaced.
    @discardableResult
    mutating func insert<Values: Sequence<(key: String, value: AttributeValue)>>(
        entityName: String, primaryKey: UUID, values: Values
    ) -> (values: RowValues, replaced: RowValues?) {
        insert(entityName: entityName, primaryKey: primaryKey) { RowValues(values, layout: $0) }
    }

    /// A new model with values made in the entity's layout: a row that needs names the layout
    /// lacks extends it, and the entity's later rows share the extended layout.
    /// Returns its values and those of the row with its key it replaced.
    @discardableResult
    private mutating func insert(entityName: String, primaryKey: UUID, values: (RowLayout) -> RowValues)
        -> (values: RowValues, replaced: RowValues?)
    {
        defer { nextSequence += 1 }
        return tables[positionMade(for: entityName)].appended(primaryKey, sequence: nextSequence, values: values)
    }

    /// Changed values of a model (nothing if it is missing); later values of one name win. A
    /// dictionary, or a change's values as a record holds them (``TransactionRecord/Decoder/Values``).
    /// Returns the model's values after the change (`nil` when it is missing).
    @discardableResult
    mutating func update<Values: Sequence<(key: String, value: AttributeValue)>>(
        entityName: String, primaryKey: UUID, values: Values
    ) -> RowValues? {
        update(entityName: entityName, primaryKey: primaryKey, values: values, tellingOld: false).new
    }

    private mutating func update<Values: Sequence<(key: String, value: AttributeValue)>>(
        entityName: String, primaryKey: UUID, values: Values, tellingOld: Bool
    ) -> (old: RowValues?, new: RowValues?) {
        guard let position = rememberedPosition(of: entityName) else { return (nil, nil) }
        var old: RowValues?
        let new = tables[position].update(primaryKey) { row in
            if tellingOld { old = row.values }
            row.values.assign(values)
        }
        return (old, new)
    }

    /// Removes a model's row, returning its values (`nil`: it had none).
    @discardableResult
    mutating func delete(entityName: String, primaryKey: UUID) -> RowValues? {
        guard let position = rememberedPosition(of: entityName) else { return nil }
        return tables[position].remove(primaryKey)
    }

    var sequenceEnd: UInt64 { nextSequence }

    /// Applies a migration's steps (a schema record's, docs/FORMAT.md §6.7) to every stored
    /// model: renamed values move to the new name, removed ones go, fills give models without a
    /// value the default. Rows keep their order and sequence numbers.
    mutating func apply(_ steps: [SchemaMigration.Step]) {
        for step in steps {
            switch step {
            case .removeEntity(let entity, _):
                removeTable(entity)
            case .removeAttribute(let entity, _, _, let name):
                updateEach(of: entity) { $0.values[name] = nil }
            case .renameAttribute(let entity, _, _, let from, let to):
                updateEach(of: entity) { row in
                    if let value = row.values.removeValue(forKey: from) { row.values[to] = value }
                }
            case .fill(let entity, _, _, let name, let value):
                updateEach(of: entity) { row in
                    if row.values[name]?.isNull ?? true { row.values[name] = value }
                }
            }
        }
    }

    private mutating func updateEach(of entityName: String, _ body: (inout Row) -> Void) {
        guard let position = rememberedPosition(of: entityName) else { return }
        tables[position].updateEach(body)
    }

    /// Removes an entity's rows (a migration's removed entity); the others keep their order.
    private mutating func removeTable(_ entityName: String) {
        guard let position = tableIndex.removeValue(forKey: entityName) else { return }
        tables.remove(at: position)
        tableNames.remove(at: position)
        for (index, name) in tableNames.enumerated().dropFirst(position) { tableIndex[name] = index }
        lastTable = nil
        assert(tables.count == tableNames.count && tableIndex.count == tables.count, "entity tables out of step")
    }

    /// A state loaded from a checkpoint: its rows, each entity's already in sequence (insertion)
    /// order — kept as they are, not sorted — and its sequence counter, which may be past every
    /// row's sequence (rows inserted last may have been deleted since).
    init(restoring entities: [String: EntityRows], sequenceEnd: UInt64) {
        for (name, rows) in entities {
            tables[positionMade(for: name)] = rows.trimmed()
        }
        self.nextSequence = sequenceEnd
    }
}

/// The rows of one entity in insertion order: slots (a deleted row leaves a hole, compacted once
/// holes outnumber rows) and an index from primary key to slot (a ``PositionTable``: 6 bytes a
/// row when made for its count, where a `[key: slot]` dictionary took 50). Appending, looking up, updating and deleting
/// are O(1) (amortised); iterating in order is a walk over the slots.
///
/// A slot is a position in two parallel arrays — key and row (a hole keeps its key and
/// ``RowValues/hole``) — rather than one array of optional slots: a scan
/// (``scan(_:)``) reads each row in place, where unwrapping an optional slot copied it out, a
/// retain and a release of its values per row.
struct EntityRows: Sendable, Sequence, Equatable {
    /// The layout new rows are made in (``RowValues``): the last row's, so rows made while
    /// nothing changes share one.
    private(set) var layout = RowLayout.empty
    private var keys: [UUID] = []
    /// The rows; a removed one's slot holds a hole (``RowValues/hole``) until compaction.
    private var rows: [FoldState.Row] = []
    /// Primary key → slot: the positions of the live slots, filed under their keys' hashes.
    private var index = PositionTable()
    /// How many times ``compact()`` renumbered the slots.
    private(set) var renumberings: UInt64 = 0

    /// A primary key's hash in ``index``: its 16 bytes as two words
    /// (``Foundation/UUID/combineWords(into:)``; a lookup is made for every folded change).
    @inline(__always)
    private static func hash(_ primaryKey: UUID) -> Int {
        var hasher = Hasher()
        primaryKey.combineWords(into: &hasher)
        return hasher.finalize()
    }

    /// The slot of `primaryKey`'s row.
    @inline(__always)
    private func position(of primaryKey: UUID) -> Int? {
        index.find(hash: Self.hash(primaryKey)) { keys[$0] == primaryKey }
    }

    init() {}

    var count: Int { index.count }
    var isEmpty: Bool { index.count == 0 }
    /// The buckets of the primary-key table (tests of how a checkpoint's reader sizes it).
    var indexBucketCount: Int { index.bucketCount }

    mutating func reserveCapacity(_ capacity: Int) {
        keys.reserveCapacity(capacity)
        rows.reserveCapacity(capacity)
        index.reserveCapacity(capacity) { [keys] in Self.hash(keys[$0]) }
    }

    /// Room for a checkpoint's `count` rows and an eighth more, for the inserts a replay folds
    /// after it: the index made for `count` (it holds an eighth more before it doubles,
    /// ``PositionTable/size(toHold:)``), the arrays for `count + count / 8` — address space, not
    /// memory, until used. Reserved for `count` alone, the long soak's 200 inserts after its
    /// checkpoint of a million rows doubled both arrays and left the old ones (38 MB with the
    /// index's) as free heap.
    mutating func reserve(restoring count: Int) {
        keys.reserveCapacity(count + count / 8)
        rows.reserveCapacity(count + count / 8)
        index.reserveCapacity(count) { [keys] in Self.hash(keys[$0]) }
    }

    subscript(primaryKey: UUID) -> FoldState.Row? {
        position(of: primaryKey).map { rows[$0] }
    }

    /// The slot of `primaryKey`'s row (stable until ``renumberings`` changes).
    func slot(of primaryKey: UUID) -> Int? { position(of: primaryKey) }

    /// The key table made the size one made for its count has, when it is more than a quarter
    /// larger (grown by doubling while rows were appended).
    mutating func trimIndex() {
        index.trim { [keys] in Self.hash(keys[$0]) }
    }

    /// The last slot (an appended row's), `nil` when there is none.
    var lastSlot: Int? { rows.isEmpty ? nil : rows.count - 1 }

    /// The key and row in `slot` (`nil`: a hole, or past the end).
    func entry(at slot: Int) -> (primaryKey: UUID, row: FoldState.Row)? {
        guard slot >= 0, slot < rows.count, !rows[slot].values.isHole else { return nil }
        return (keys[slot], rows[slot])
    }

    /// ``scan(_:)`` with each row's slot.
    @inline(__always)
    func scanSlots(_ body: (_ slot: Int, _ primaryKey: UUID, _ row: FoldState.Row) -> Bool) {
        for position in rows.indices where !rows[position].values.isHole {
            guard body(position, keys[position], rows[position]) else { return }
        }
    }

    /// Adds a row at the end (a row with the same key is removed first, so it moves to the end),
    /// its values made in the entity's layout; the row's layout becomes the entity's.
    @discardableResult
    mutating func append(_ primaryKey: UUID, sequence: UInt64, values: (RowLayout) -> RowValues) -> RowValues {
        appended(primaryKey, sequence: sequence, values: values).values
    }

    /// ``append(_:sequence:values:)``, telling the values of the row with the key it replaced.
    mutating func appended(_ primaryKey: UUID, sequence: UInt64, values: (RowLayout) -> RowValues)
        -> (values: RowValues, replaced: RowValues?)
    {
        let values = values(layout)
        precondition(!values.isHole, "a hole appended as a row")
        layout = values.layout
        let position = rows.count
        keys.append(primaryKey)
        rows.append(FoldState.Row(sequence: sequence, values: values))
        // One lookup of the key: a replaced row's slot becomes a hole after the new one is in.
        let replaced = index.file(
            position, hash: Self.hash(primaryKey), replacing: { [keys] in keys[$0] == primaryKey },
            hashOf: { [keys] in Self.hash(keys[$0]) })
        guard let replaced else { return (values, nil) }
        assert(!rows[replaced].values.isHole && keys[replaced] == primaryKey, "the index named a hole or another row")
        let old = rows[replaced].values
        makeHole(at: replaced)
        return (values, old)
    }

    /// These rows in arrays of their size and with an index of the size made for their count
    /// (``PositionTable/trim(hashOf:)``) when they grew by doubling — rows appended one by one
    /// leave up to half of each array's room unused (a checkpoint written before revision 12 is
    /// read without knowing how many rows follow). A quarter unused is kept: a checkpoint that
    /// states its rows leaves an eighth for the replay after it (``reserve(restoring:)``).
    func trimmed() -> EntityRows {
        var trimmed = self
        trimmed.trimIndex()
        if rows.capacity > rows.count + rows.count / 4 {
            // Copied from buffers: arrays of exactly their count.
            trimmed.keys = keys.withUnsafeBufferPointer { Array($0) }
            trimmed.rows = rows.withUnsafeBufferPointer { Array($0) }
        }
        return trimmed
    }

    /// Adds a row as it is (its own layout); ``append(_:sequence:values:)`` shares the entity's.
    /// Returns whether a row with the key was replaced (a checkpoint's reader refuses that).
    @discardableResult
    mutating func append(_ primaryKey: UUID, _ row: FoldState.Row) -> Bool {
        appended(primaryKey, sequence: row.sequence) { _ in row.values }.replaced != nil
    }

    /// Changes the row of `primaryKey` in place, returning its values after (`nil`: no such row).
    @discardableResult
    mutating func update(_ primaryKey: UUID, _ body: (inout FoldState.Row) -> Void) -> RowValues? {
        guard let position = position(of: primaryKey) else { return nil }
        body(&rows[position])
        return rows[position].values
    }

    /// Removes the row of `primaryKey`, returning its values (`nil`: no such row).
    @discardableResult
    mutating func remove(_ primaryKey: UUID) -> RowValues? {
        guard
            let position = index.remove(
                hash: Self.hash(primaryKey), where: { [keys] in keys[$0] == primaryKey },
                hashOf: { [keys] in Self.hash(keys[$0]) })
        else { return nil }
        assert(!rows[position].values.isHole && keys[position] == primaryKey, "the index names a hole or another row")
        let old = rows[position].values
        makeHole(at: position)
        return old
    }

    /// Empties the slot of a row the index no longer names (compacting once holes outnumber rows).
    private mutating func makeHole(at position: Int) {
        rows[position] = FoldState.Row(sequence: 0, values: .hole)
        let holes = rows.count - index.count
        if holes > 1024 && holes > index.count { compact() }
    }

    /// Calls `body` with each row and its key in insertion order, until it returns `false`. The
    /// rows are read where they are: iterating the sequence copies each row out, a retain and a
    /// release of its values per row, which was about a third of a filtered scan (the WWDC24
    /// session's `findTrips`: every Trip row for every change).
    func scan(_ body: (_ primaryKey: UUID, _ row: FoldState.Row) -> Bool) {
        scanSlots { _, primaryKey, row in body(primaryKey, row) }
    }

    /// Changes every row in place (keys and order stay).
    mutating func updateEach(_ body: (inout FoldState.Row) -> Void) {
        for position in rows.indices where !rows[position].values.isHole { body(&rows[position]) }
    }

    private mutating func compact() {
        var kept = 0
        for position in rows.indices where !rows[position].values.isHole {
            if kept != position {
                keys[kept] = keys[position]
                rows[kept] = rows[position]
            }
            kept += 1
        }
        keys.removeSubrange(kept...)
        rows.removeSubrange(kept...)
        assert(kept == index.count, "compaction kept \(kept) rows of \(index.count)")
        renumberings += 1
        // The kept rows moved down: every slot is filed again.
        index.refile(0..<kept) { [keys] in Self.hash(keys[$0]) }
    }

    struct Iterator: IteratorProtocol {
        let rows: EntityRows
        var position = 0
        mutating func next() -> (UUID, FoldState.Row)? {
            while position < rows.rows.count {
                defer { position += 1 }
                if !rows.rows[position].values.isHole { return (rows.keys[position], rows.rows[position]) }
            }
            return nil
        }
    }

    func makeIterator() -> Iterator { Iterator(rows: self) }

    var underestimatedCount: Int { count }

    /// Same rows in the same order (holes do not count).
    static func == (lhs: EntityRows, rhs: EntityRows) -> Bool {
        lhs.count == rhs.count && lhs.elementsEqual(rhs) { $0.0 == $1.0 && $0.1 == $1.1 }
    }
}
