/// For each entity and unique constraint, the model holding each combination of values.
/// Combinations with a null value are not indexed (nulls never collide). Keys compare with Swift
/// value semantics, so `"é"` and `"e\u{301}"` collide.
///
/// The index keeps no values: each combination is filed under its constraint and 32 bits of the
/// hash of its values, with the slot of the row of the model holding it in its entity's rows
/// (``FoldState/slot(of:)``), and a lookup compares the candidates' stored values (in the state
/// the index describes) with the key's. It kept a copy of every key's values before — an array
/// per model and constraint, about 200 of the 811 bytes a stored Trip took (P8) — then a
/// `[slot: owners]` dictionary, 84 bytes a model at 1M (2.1 buckets of 40 bytes each), then
/// entries naming owners by primary key (24 bytes); an entry is now 12 bytes in an array and 6
/// in a ``PositionTable`` made for the count (at an open). Changes go through
/// ``apply(_:to:)``, which applies them to the state and keeps the slots in step (refiling an
/// entity whose rows were renumbered).
struct UniqueIndex: Sendable {
    /// A combination of values of one constraint, as a save's models have it.
    struct Key: Hashable, Sendable {
        let values: [AttributeValue]
        /// Which of its entity's constraints (an index into its table's constraints,
        /// ``UniqueIndex/constraint(of:entity:)``): the names are found there when an error needs them.
        let constraintIndex: UInt32
        /// The values' hash, computed once: where the index files the key, and what tells most
        /// keys apart in one compare (comparing value arrays was most of a save's unique check,
        /// P4-ctx profile).
        let digest: Int

        init(constraintIndex: Int, values: [AttributeValue], digest: Int) {
            self.values = values
            self.constraintIndex = UInt32(constraintIndex)
            self.digest = digest
        }

        /// The values' hash: the values only (an entity's keys share a few constraints, and
        /// hashing their names too doubled the cost of every lookup). A row's slot is hashed
        /// the same way from its values where they are (`slot(constraintIndex:_:row:)`).
        @Sendable static func digest(of values: [AttributeValue]) -> Int {
            var digest = Digest(count: values.count)
            for value in values { digest.add(value) }
            return digest.value
        }

        /// A key's digest being made: the number of values, then each value in the
        /// constraint's order (one definition for keys and for rows' slots).
        struct Digest {
            private var hasher = Hasher()

            init(count: Int) { hasher.combine(count) }

            mutating func add(_ value: AttributeValue) { hasher.combine(value) }

            var value: Int { hasher.finalize() }
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(digest)
        }

        static func == (lhs: Key, rhs: Key) -> Bool {
            lhs.digest == rhs.digest && lhs.constraintIndex == rhs.constraintIndex && lhs.values == rhs.values
        }
    }

    /// Where the keys of one constraint with one hash are filed: the constraint and 32 bits of
    /// the key's digest. Keys whose digests share those bits share a slot, as keys sharing a
    /// whole digest did — a crowd (``Owners``), told apart by their values (``owner(entity:key:in:storeIdentifier:)``);
    /// a million keys make about a hundred such pairs.
    private struct Slot: Equatable {
        let constraintIndex: UInt16
        let digest: UInt32

        init(_ key: Key) {
            self.init(constraintIndex: key.constraintIndex, digest: key.digest)
        }

        init(constraintIndex: UInt32, digest: Int) {
            assert(constraintIndex <= UInt16.max, "constraint \(constraintIndex) of one entity")
            self.constraintIndex = UInt16(constraintIndex)
            self.digest = UInt32(truncatingIfNeeded: digest)
        }

        /// The hash the slot is filed under in ``Table``'s position table.
        var hash: Int { Int(digest) }
    }

    /// The models holding the keys of one slot, by their rows' slots in the entity's rows
    /// (``FoldState/slot(of:)``): one, or a crowd — when two different combinations share a
    /// slot's 32 bits of hash, or many models hold one combination (replay never validates; a
    /// migration's fill gives every model one value; NaNs hash alike and are never equal).
    private enum Owners {
        case one(UInt32)
        case crowd(Crowd)
    }

    /// Row slots in the order they were filed (a removed one leaves a vacated place, compacted
    /// when those outnumber the rest) and each one's place: a crowd files and removes in O(1) and is
    /// looked through newest first, so a slot of many equal keys costs what a slot of one does
    /// (a list scanned per change made that O(n²)).
    private struct Crowd {
        private static let vacated = UInt32.max
        private var order: [UInt32] = []
        private var places: [UInt32: Int] = [:]

        var count: Int { places.count }

        mutating func file(_ owner: UInt32) {
            if let place = places[owner] { order[place] = Self.vacated }
            places[owner] = order.count
            order.append(owner)
        }

        mutating func remove(_ owner: UInt32) {
            guard let place = places.removeValue(forKey: owner) else { return }
            order[place] = Self.vacated
            if order.count > 2 * places.count + 8 {
                order = order.filter { $0 != Self.vacated }
                for (place, kept) in order.enumerated() { places[kept] = place }
            }
        }

        var newestFirst: some Sequence<UInt32> { order.reversed().lazy.filter { $0 != Self.vacated } }
    }

    /// A slot filed and the models holding it, in 12 bytes: the one owner's row slot — or, with
    /// ``crowdFlag``, where its crowd is in ``Table``'s crowds — then the digest and the
    /// constraint. Row slots stay below 2³¹ (holes count: an entity of a billion rows; a larger
    /// one stops at a precondition). (An owner named by its 16-byte primary key took 24: the key and an enum tag
    /// before the digest, P8.)
    private struct Entry {
        static let crowdFlag: UInt32 = 1 << 31
        var owner: UInt32
        let digest: UInt32
        let constraintIndex: UInt16

        /// The hash the entry is filed under (``Slot/hash``).
        var hash: Int { Int(digest) }

        init(_ slot: Slot, owner: UInt32) {
            self.owner = owner
            digest = slot.digest
            constraintIndex = slot.constraintIndex
        }

        @inline(__always)
        func isFiled(under slot: Slot) -> Bool {
            digest == slot.digest && constraintIndex == slot.constraintIndex
        }
    }

    /// One constrained entity: its constraints and the keys filed under them. The tables sit in
    /// an array (``tables``, found by ``tablePositions``) and are mutated in place: a dictionary of
    /// them by entity name hashed the name and copied the table's reference out and back for each
    /// key filed (P4-ctx profile).
    private struct Table {
        let entity: String
        let constraints: [[String]]
        /// The slots filed, in no order (a removed entry's place is taken by the last).
        private var entries: [Entry] = []
        /// Slot → position in ``entries``, filed under the slot's digest.
        private var positions = PositionTable()
        /// The crowds entries point to (``Entry/crowdFlag``); a crowd let go leaves an empty one,
        /// whose place ``freeCrowds`` keeps for the next.
        private var crowds: [Crowd] = []
        private var freeCrowds: [UInt32] = []

        init(entity: String, constraints: [[String]]) {
            self.entity = entity
            self.constraints = constraints
        }

        /// The (row slot, slot) pairs filed, crowds spelled out (``UniqueIndex/problems(against:)``).
        func filings() -> [(rowSlot: UInt32, slot: Slot)] {
            entries.flatMap { entry -> [(rowSlot: UInt32, slot: Slot)] in
                let slot = Slot(constraintIndex: UInt32(entry.constraintIndex), digest: entry.hash)
                guard entry.owner & Entry.crowdFlag != 0 else { return [(entry.owner, slot)] }
                return crowds[Int(entry.owner & ~Entry.crowdFlag)].newestFirst.map { ($0, slot) }
            }
        }

        var filingCount: Int {
            entries.reduce(0) { $0 + ($1.owner & Entry.crowdFlag == 0 ? 1 : crowds[Int($1.owner & ~Entry.crowdFlag)].count) }
        }

        private func position(of slot: Slot) -> Int? {
            positions.find(hash: slot.hash) { entries[$0].isFiled(under: slot) }
        }

        func owners(of slot: Slot) -> Owners? {
            guard let position = position(of: slot) else { return nil }
            let owner = entries[position].owner
            return owner & Entry.crowdFlag == 0 ? .one(owner) : .crowd(crowds[Int(owner & ~Entry.crowdFlag)])
        }

        /// Files the row in `rowSlot` as the newest model holding `slot`.
        mutating func file(_ rowSlot: UInt32, under slot: Slot) {
            precondition(rowSlot < Entry.crowdFlag, "row slot \(rowSlot) past what a unique index names")
            guard let position = position(of: slot) else {
                entries.append(Entry(slot, owner: rowSlot))
                positions.file(
                    entries.count - 1, hash: slot.hash, replacing: { _ in false },
                    hashOf: { [entries] in entries[$0].hash })
                return
            }
            let owner = entries[position].owner
            if owner & Entry.crowdFlag != 0 {
                // Mutated where it is: no copy of a crowd.
                crowds[Int(owner & ~Entry.crowdFlag)].file(rowSlot)
            } else if owner != rowSlot {
                var crowd = Crowd()
                crowd.file(owner)
                crowd.file(rowSlot)
                let place: UInt32
                if let free = freeCrowds.popLast() {
                    place = free
                    crowds[Int(place)] = crowd
                } else {
                    place = UInt32(crowds.count)
                    precondition(place < Entry.crowdFlag, "more crowds than a unique index names")
                    crowds.append(crowd)
                }
                entries[position].owner = place | Entry.crowdFlag
            }
        }

        /// Removes the row in `rowSlot` from the models holding `slot` (the slot goes when none
        /// is left; a crowd left with one becomes that one).
        mutating func remove(_ rowSlot: UInt32, from slot: Slot) {
            guard let position = position(of: slot) else { return }
            let owner = entries[position].owner
            if owner & Entry.crowdFlag != 0 {
                let place = Int(owner & ~Entry.crowdFlag)
                crowds[place].remove(rowSlot)
                guard crowds[place].count == 1 else { return }
                entries[position].owner = crowds[place].newestFirst.first { _ in true }!
                crowds[place] = Crowd()
                freeCrowds.append(UInt32(place))
                return
            }
            guard owner == rowSlot else { return }
            positions.remove(hash: slot.hash, where: { $0 == position }, hashOf: { [entries] in entries[$0].hash })
            let last = entries.count - 1
            if position != last {
                entries[position] = entries[last]
                positions.move(last, to: position, hash: entries[position].hash)
            }
            entries.removeLast()
        }

        mutating func reserveCapacity(_ capacity: Int) {
            entries.reserveCapacity(capacity)
            positions.reserveCapacity(capacity) { [entries] in entries[$0].hash }
        }
    }

    private var tables: [Table] = []

    /// The bytes an entry takes in a table's array (tests of the layout).
    static var entryStride: Int { MemoryLayout<Entry>.stride }
    /// entity name → position in ``tables`` (constrained entities only).
    private let tablePositions: [String: Int]
    /// Applied to every ``Key/digest(of:)``: none, or in tests a worse one, so that different
    /// keys share slots.
    private let worsen: (@Sendable (Int) -> Int)?

    init(schema: Schema, worsen: (@Sendable (Int) -> Int)? = nil) {
        self.worsen = worsen
        var positions: [String: Int] = [:]
        for entity in schema.entities where !entity.allUniquenessConstraints.isEmpty {
            // A slot numbers its entity's constraints in 16 bits.
            precondition(
                entity.allUniquenessConstraints.count <= Int(UInt16.max),
                "\(entity.name) has \(entity.allUniquenessConstraints.count) unique constraints")
            positions[entity.name] = tables.count
            tables.append(Table(entity: entity.name, constraints: entity.allUniquenessConstraints))
        }
        tablePositions = positions
    }

    func keys(entity: String, values: some AttributeValuesByName) -> [Key] {
        guard let position = tablePositions[entity] else { return [] }
        return keys(constraints: tables[position].constraints, values: values)
    }

    private func keys(constraints: [[String]], values: some AttributeValuesByName) -> [Key] {
        // Room for every constraint's key at once (a `compactMap` grew its result from none).
        var keys: [Key] = []
        keys.reserveCapacity(constraints.count)
        for (index, constraint) in constraints.enumerated() {
            let keyValues = constraint.map { values[$0] ?? .null }
            guard !keyValues.contains(where: \.isNull) else { continue }
            let digest = Key.digest(of: keyValues)
            keys.append(Key(constraintIndex: index, values: keyValues, digest: worsen?(digest) ?? digest))
        }
        return keys
    }

    /// The slot `row`'s values of `constraint` are filed under — ``Key/digest(of:)`` of them,
    /// read where they are (no array of values and keys per change: a fifth of an open's
    /// index building, and every save's) — or `nil` when one of them is null.
    private func slot(constraintIndex: Int, _ constraint: [String], row: RowValues) -> Slot? {
        var made = Key.Digest(count: constraint.count)
        for name in constraint {
            guard let value = row[name], !value.isNull else { return nil }
            made.add(value)
        }
        let digest = made.value
        return Slot(constraintIndex: UInt32(constraintIndex), digest: worsen?(digest) ?? digest)
    }

    /// The (model, constraint) pairs filed: one per constraint of each model holding its values
    /// (tests compare it with an index built from the state: a change that left a model filed
    /// under values it no longer holds shows here, where lookups, which check the state, hide it).
    var filingCount: Int { tables.reduce(0) { $0 + $1.filingCount } }

    /// The property names of the constraint a key of `entity` is for.
    func constraint(of key: Key, entity: String) -> [String] {
        tables[tablePositions[entity]!].constraints[Int(key.constraintIndex)]
    }

    /// The model holding `key` in `state` — the state this index describes (every row slot it
    /// names holds a model with the values it was filed under). Of several, the one filed last.
    func owner(entity: String, key: Key, in state: FoldState, storeIdentifier: String) -> PersistentIdentifier? {
        guard let position = tablePositions[entity], let filed = tables[position].owners(of: Slot(key)) else {
            return nil
        }
        let constraint = tables[position].constraints[Int(key.constraintIndex)]
        func holder(_ rowSlot: UInt32) -> UUID? {
            guard let (primaryKey, row) = state.entry(entity: entity, slot: Int(rowSlot)) else {
                assertionFailure("the unique index names row slot \(rowSlot) of \(entity), which the state does not hold")
                return nil
            }
            let holds = constraint.indices.allSatisfy { (row.values[constraint[$0]] ?? .null) == key.values[$0] }
            return holds ? primaryKey : nil
        }
        let found: UUID? =
            switch filed {
            case .one(let rowSlot): holder(rowSlot)
            case .crowd(let crowd): crowd.newestFirst.lazy.compactMap(holder).first
            }
        return found.map { .permanent(for: storeIdentifier, entityName: entity, primaryKey: $0) }
    }

    /// Applies `change` to `state` — the state this index describes — and keeps the index in
    /// step: the model's old values leave their slots and its new values are filed, under its
    /// row's slot before and after the change; a change after which the entity renumbered its
    /// rows (its holes compacted: every slot moved) files the entity again from the state.
    /// Returns the model's values after the change (`nil`: it has no row).
    @discardableResult
    mutating func apply(_ change: ResolvedChange, to state: inout FoldState) -> RowValues? {
        let kind: TransactionRecord.Decoder.ChangeKind =
            switch change {
            case .insert: .insert
            case .update: .update
            case .delete: .delete
            }
        return apply(kind, of: change.identifier, to: &state) { state, tellingOld in
            tellingOld ? state.applyTellingOld(change) : (nil, state.apply(change))
        }
    }

    /// ``apply(_:to:)`` for an insert whose values are (name, value) pairs as a record holds them
    /// (a catch-up fold of other processes' records: no dictionary made per change).
    @discardableResult
    mutating func applyInsert<Values: Sequence<(key: String, value: AttributeValue)>>(
        of identifier: PersistentIdentifier, values: Values, to state: inout FoldState
    ) -> RowValues {
        let new = apply(.insert, of: identifier, to: &state) { state, _ in
            let (new, old) = state.insert(
                entityName: identifier.entityName, primaryKey: identifier.primaryKey, values: values)
            return (old, new)
        }
        return new!
    }

    /// A change of `kind` to the model `identifier`, made by `change` (told whether the model's
    /// old values are needed), with the index kept in step.
    private mutating func apply(
        _ kind: TransactionRecord.Decoder.ChangeKind, of identifier: PersistentIdentifier, to state: inout FoldState,
        _ change: (inout FoldState, _ tellingOld: Bool) -> (old: RowValues?, new: RowValues?)
    ) -> RowValues? {
        let entity = identifier.entityName
        guard let position = tablePositions[entity] else { return change(&state, false).new }
        let oldSlot = state.slot(of: identifier)
        let renumberings = state.renumberings(of: entity)
        let (old, new) = change(&state, true)
        guard state.renumberings(of: entity) == renumberings else {
            refile(position, from: state)
            return new
        }
        // Where the row is now, without a third lookup of its key: an insert appends it, an
        // update leaves it where it was.
        let newSlot: Int? =
            switch kind {
            case .insert: new == nil ? nil : state.lastSlot(of: entity)
            case .update: new == nil ? nil : oldSlot
            case .delete: nil
            }
        assert((old == nil) == (oldSlot == nil) && (new == nil) == (newSlot == nil), "a row without a slot")
        assert(newSlot == nil || newSlot == state.slot(of: identifier), "the row is not where the change put it")
        let constraints = tables[position].constraints
        for (index, constraint) in constraints.enumerated() {
            if let old, let oldSlot, let slot = slot(constraintIndex: index, constraint, row: old) {
                tables[position].remove(UInt32(oldSlot), from: slot)
            }
            if let new, let newSlot, let slot = slot(constraintIndex: index, constraint, row: new) {
                tables[position].file(UInt32(newSlot), under: slot)
            }
        }
        return new
    }

    /// How many filings name a row slot of `state` that holds no model, or whose model's values
    /// are not filed there (tests: 0 when the index describes `state`).
    func problems(against state: FoldState) -> Int {
        var problems = 0
        for table in tables {
            for (rowSlot, slot) in table.filings() {
                let constraint = table.constraints[Int(slot.constraintIndex)]
                let filed = state.entry(entity: table.entity, slot: Int(rowSlot)).flatMap {
                    self.slot(constraintIndex: Int(slot.constraintIndex), constraint, row: $0.row.values)
                }
                if filed != slot { problems += 1 }
            }
        }
        return problems
    }

    /// Files every model of the entity whose table is at `position` again, from `state` — at an
    /// open, and after the entity's rows were renumbered (a compaction of its holes: at most once
    /// per max(1,024, rows) removals, a pass over the entity under the store's lock). A crowd
    /// refiled is in slot order: of several models holding one key (never after a validated
    /// save), which one is "filed last" may change there.
    private mutating func refile(_ position: Int, from state: FoldState) {
        let entity = tables[position].entity
        tables[position] = Table(entity: entity, constraints: tables[position].constraints)
        // Grown once, not 20 times, for an entity of a million models.
        tables[position].reserveCapacity(state.count(of: entity) * tables[position].constraints.count)
        let constraints = tables[position].constraints
        state.rows(of: entity).scanSlots { rowSlot, _, row in
            for (index, constraint) in constraints.enumerated() {
                if let slot = slot(constraintIndex: index, constraint, row: row.values) {
                    tables[position].file(UInt32(rowSlot), under: slot)
                }
            }
            return true
        }
    }
}

extension UniqueIndex {
    /// The index of every model `state` holds (at an open, a migration's staging, an archive's
    /// save, and after a failed sync put the working state back).
    init(schema: Schema, state: FoldState) {
        self.init(schema: schema)
        for position in tables.indices { refile(position, from: state) }
    }
}
