/// For each entity and unique constraint, the model holding each combination of values.
/// Combinations with a null value are not indexed (nulls never collide). Keys compare with Swift
/// value semantics, so `"é"` and `"e\u{301}"` collide.
///
/// The index keeps no values: each combination is filed under its constraint and 32 bits of the
/// hash of its values, with the primary key of the model holding it, and a lookup compares the
/// candidates' stored values (in the state the index describes) with the key's. It kept a copy of
/// every key's values before — an array per model and constraint, about 200 of the 811 bytes a
/// stored Trip took (P8) — and then a `[slot: owners]` dictionary, 84 bytes a model at 1M (2.1
/// buckets of 40 bytes each); an entry is now 24 bytes in an array and 6 in a ``PositionTable``
/// made for the count (at an open).
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
    /// a million keys make about a hundred such pairs, and an entry takes 24 bytes, not 32.
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

    /// The models holding the keys of one slot: one, or a crowd — when two different
    /// combinations share a slot's 32 bits of hash, or many models hold one combination (replay never
    /// validates; a migration's fill gives every model one value; NaNs hash alike and are never
    /// equal). A crowd files and removes in O(1) and is looked through newest first, so a slot of
    /// many equal keys costs what a slot of one does (a list scanned per change made that O(n²)).
    private enum Owners {
        case one(UUID)
        case crowd(Crowd)

        /// Files `primaryKey` as the newest (moving it there if it is filed already).
        mutating func file(_ primaryKey: UUID) {
            switch self {
            case .one(primaryKey): return
            case .one(let other):
                var crowd = Crowd()
                crowd.file(other)
                crowd.file(primaryKey)
                self = .crowd(crowd)
            case .crowd(var crowd):
                self = .one(primaryKey)  // lets go of the crowd's storage: mutated in place below
                crowd.file(primaryKey)
                self = .crowd(crowd)
            }
        }

        var count: Int {
            switch self {
            case .one: 1
            case .crowd(let crowd): crowd.count
            }
        }

        /// Removes `primaryKey`; `false` when nothing is left.
        mutating func remove(_ primaryKey: UUID) -> Bool {
            switch self {
            case .one(primaryKey): return false
            case .one: return true
            case .crowd(var crowd):
                self = .one(primaryKey)  // as in `file`
                crowd.remove(primaryKey)
                self = crowd.count == 1 ? .one(crowd.newestFirst.first { _ in true }!) : .crowd(crowd)
                return true
            }
        }
    }

    /// Primary keys in the order they were filed (a removed one leaves a hole, compacted when the
    /// holes outnumber the rest) and each one's place.
    private struct Crowd {
        private var order: [UUID?] = []
        private var places: [UUID: Int] = [:]

        var count: Int { places.count }

        mutating func file(_ primaryKey: UUID) {
            if let place = places[primaryKey] { order[place] = nil }
            places[primaryKey] = order.count
            order.append(primaryKey)
        }

        mutating func remove(_ primaryKey: UUID) {
            guard let place = places.removeValue(forKey: primaryKey) else { return }
            order[place] = nil
            if order.count > 2 * places.count + 8 {
                order = order.filter { $0 != nil }
                for (place, key) in order.enumerated() { places[key!] = place }
            }
        }

        var newestFirst: some Sequence<UUID> { order.reversed().lazy.compactMap { $0 } }
    }

    /// A slot filed and the models holding it. Its fields in this order take 24 bytes: the
    /// owners 17, the constraint and the digest in the 7 after them (with a 64-bit digest first:
    /// 32; a slot and its owners apart, 16 and 17: 40).
    private struct Entry {
        var owners: Owners
        let constraintIndex: UInt16
        let digest: UInt32

        /// The hash the entry is filed under (``Slot/hash``).
        var hash: Int { Int(digest) }

        init(_ slot: Slot, owners: Owners) {
            digest = slot.digest
            self.owners = owners
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
        let constraints: [[String]]
        /// The slots filed, in no order (a removed entry's place is taken by the last).
        private var entries: [Entry] = []
        /// Slot → position in ``entries``, filed under the slot's digest.
        private var positions = PositionTable()

        init(constraints: [[String]]) { self.constraints = constraints }

        var filingCount: Int { entries.reduce(0) { $0 + $1.owners.count } }

        private func position(of slot: Slot) -> Int? {
            positions.find(hash: slot.hash) { entries[$0].isFiled(under: slot) }
        }

        func owners(of slot: Slot) -> Owners? {
            position(of: slot).map { entries[$0].owners }
        }

        /// Files `primaryKey` as the newest model holding `slot`.
        mutating func file(_ primaryKey: UUID, under slot: Slot) {
            if let position = position(of: slot) {
                // Mutated where it is: no copy of a crowd.
                entries[position].owners.file(primaryKey)
                return
            }
            entries.append(Entry(slot, owners: .one(primaryKey)))
            positions.file(
                entries.count - 1, hash: slot.hash, replacing: { _ in false },
                hashOf: { [entries] in entries[$0].hash })
        }

        /// Removes `primaryKey` from the models holding `slot` (the slot goes when none is left).
        mutating func remove(_ primaryKey: UUID, from slot: Slot) {
            guard let position = position(of: slot), !entries[position].owners.remove(primaryKey) else { return }
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
            tables.append(Table(constraints: entity.allUniquenessConstraints))
        }
        tablePositions = positions
    }

    func keys(entity: String, values: some AttributeValuesByName) -> [Key] {
        guard let position = tablePositions[entity] else { return [] }
        return keys(constraints: tables[position].constraints, values: values)
    }

    private func keys(constraints: [[String]], values: some AttributeValuesByName) -> [Key] {
        constraints.enumerated().compactMap { index, constraint in
            let keyValues = constraint.map { values[$0] ?? .null }
            guard !keyValues.contains(where: \.isNull) else { return nil }
            let digest = Key.digest(of: keyValues)
            return Key(constraintIndex: index, values: keyValues, digest: worsen?(digest) ?? digest)
        }
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

    /// Whether `entity` has uniqueness constraints (models of others are never filed).
    func constrains(_ entity: String) -> Bool { tablePositions[entity] != nil }

    /// The (model, constraint) pairs filed: one per constraint of each model holding its values
    /// (tests compare it with an index built from the state: a change that left a model filed
    /// under values it no longer holds shows here, where lookups, which check the state, hide it).
    var filingCount: Int { tables.reduce(0) { $0 + $1.filingCount } }

    /// The property names of the constraint a key of `entity` is for.
    func constraint(of key: Key, entity: String) -> [String] {
        tables[tablePositions[entity]!].constraints[Int(key.constraintIndex)]
    }

    /// Room for `count` keys of `entity` (building the index at open grows it once, not 20 times).
    mutating func reserveCapacity(_ count: Int, entity: String) {
        guard let position = tablePositions[entity] else { return }
        tables[position].reserveCapacity(count * tables[position].constraints.count)
    }

    /// The model holding `key` in `state` — the state this index describes (every model it names
    /// is there, with the values it was filed under). Of several, the one filed last.
    func owner(entity: String, key: Key, in state: FoldState, storeIdentifier: String) -> PersistentIdentifier? {
        guard let position = tablePositions[entity], let filed = tables[position].owners(of: Slot(key)) else {
            return nil
        }
        let constraint = tables[position].constraints[Int(key.constraintIndex)]
        func holds(_ primaryKey: UUID) -> Bool {
            guard let row = state.row(entity: entity, primaryKey: primaryKey) else {
                assertionFailure("the unique index names a model of \(entity) the state does not hold")
                return false
            }
            return constraint.indices.allSatisfy { (row.values[constraint[$0]] ?? .null) == key.values[$0] }
        }
        let found: UUID? =
            switch filed {
            case .one(let primaryKey): holds(primaryKey) ? primaryKey : nil
            case .crowd(let crowd): crowd.newestFirst.first(where: holds)
            }
        return found.map { .permanent(for: storeIdentifier, entityName: entity, primaryKey: $0) }
    }

    /// Updates the index for a model whose values went from `old` to `new` (nil: absent).
    mutating func replace(
        _ identifier: PersistentIdentifier, old: RowValues?, new: RowValues?
    ) {
        guard let position = tablePositions[identifier.entityName] else { return }
        let primaryKey = identifier.primaryKey
        let constraints = tables[position].constraints
        for (index, constraint) in constraints.enumerated() {
            if let old, let slot = slot(constraintIndex: index, constraint, row: old) {
                tables[position].remove(primaryKey, from: slot)
            }
            if let new, let slot = slot(constraintIndex: index, constraint, row: new) {
                tables[position].file(primaryKey, under: slot)
            }
        }
    }
}

extension UniqueIndex {
    /// The index of every model `state` holds (at an open, a migration's staging, an archive's
    /// save, and after a failed sync put the working state back).
    init(schema: Schema, state: FoldState, storeIdentifier: String) {
        self.init(schema: schema)
        for entity in schema.entities where constrains(entity.name) {
            reserveCapacity(state.count(of: entity.name), entity: entity.name)
            state.rows(of: entity.name).scan { primaryKey, row in
                replace(
                    .permanent(for: storeIdentifier, entityName: entity.name, primaryKey: primaryKey), old: nil,
                    new: row.values)
                return true
            }
        }
    }
}
