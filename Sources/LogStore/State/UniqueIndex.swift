/// For each entity and unique constraint, the model holding each combination of values.
/// Combinations with a null value are not indexed (nulls never collide). Keys compare with Swift
/// value semantics, so `"é"` and `"e\u{301}"` collide.
///
/// The index keeps no values: each combination is filed under its constraint and the 64-bit hash
/// of its values, with the primary key of the model holding it, and a lookup compares the
/// candidates' stored values (in the state the index describes) with the key's. It kept a copy of
/// every key's values before — an array per model and constraint, about 200 of the 811 bytes a
/// stored Trip took (P8) — where an entry is now 40 bytes.
struct UniqueIndex: Sendable {
    /// A combination of values of one constraint, as a save's models have it.
    struct Key: Hashable, Sendable {
        let values: [AttributeValue]
        /// Which of its entity's constraints (an index into ``UniqueIndex/constraints``): the
        /// names are found there when an error needs them.
        let constraintIndex: UInt32
        /// The values' hash, computed once: where the index files the key, and what tells most
        /// keys apart in one compare (comparing value arrays was most of a save's unique check,
        /// P4-ctx profile).
        let digest: Int

        init(constraintIndex: Int, values: [AttributeValue]) {
            self.values = values
            self.constraintIndex = UInt32(constraintIndex)
            // The values only: an entity's keys share a few constraints, and hashing their
            // names too doubled the cost of every lookup.
            var hasher = Hasher()
            hasher.combine(values)
            digest = hasher.finalize()
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(digest)
        }

        static func == (lhs: Key, rhs: Key) -> Bool {
            lhs.digest == rhs.digest && lhs.constraintIndex == rhs.constraintIndex && lhs.values == rhs.values
        }
    }

    /// Where the keys of one constraint with one hash are filed.
    private struct Slot: Hashable {
        let constraintIndex: UInt32
        let digest: Int

        init(_ key: Key) {
            constraintIndex = key.constraintIndex
            digest = key.digest
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(digest)
        }
    }

    /// The models holding the keys of one slot: one, unless two different combinations share a
    /// 64-bit hash (or replay, which never validates, met two models with one combination).
    private enum Owners {
        case one(UUID)
        case many([UUID])

        var primaryKeys: [UUID] {
            switch self {
            case .one(let primaryKey): [primaryKey]
            case .many(let primaryKeys): primaryKeys
            }
        }
    }

    private var owners: [String: [Slot: Owners]] = [:]
    let constraints: [String: [[String]]]

    init(schema: Schema) {
        var constraints: [String: [[String]]] = [:]
        for entity in schema.entities where !entity.allUniquenessConstraints.isEmpty {
            constraints[entity.name] = entity.allUniquenessConstraints
        }
        self.constraints = constraints
    }

    func keys(entity: String, values: [String: AttributeValue]) -> [Key] {
        (constraints[entity] ?? []).enumerated().compactMap { index, constraint in
            let keyValues = constraint.map { values[$0] ?? .null }
            return keyValues.contains(where: \.isNull) ? nil : Key(constraintIndex: index, values: keyValues)
        }
    }

    /// The property names of the constraint a key of `entity` is for.
    func constraint(of key: Key, entity: String) -> [String] {
        constraints[entity]![Int(key.constraintIndex)]
    }

    /// Room for `count` keys of `entity` (building the index at open grows it once, not 20 times).
    mutating func reserveCapacity(_ count: Int, entity: String) {
        guard let constraints = constraints[entity] else { return }
        owners[entity, default: [:]].reserveCapacity(count * constraints.count)
    }

    /// The model holding `key` in `state` — the state this index describes (every model it names
    /// is there, with the values it was filed under). Of several, the one filed last.
    func owner(entity: String, key: Key, in state: FoldState, storeIdentifier: String) -> PersistentIdentifier? {
        guard let filed = owners[entity]?[Slot(key)] else { return nil }
        let constraint = constraints[entity]![Int(key.constraintIndex)]
        for primaryKey in filed.primaryKeys.reversed() {
            guard let row = state.row(entity: entity, primaryKey: primaryKey) else {
                assertionFailure("the unique index names a model of \(entity) the state does not hold")
                continue
            }
            if constraint.indices.allSatisfy({ (row.values[constraint[$0]] ?? .null) == key.values[$0] }) {
                return .permanent(for: storeIdentifier, entityName: entity, primaryKey: primaryKey)
            }
        }
        return nil
    }

    /// Updates the index for a model whose values went from `old` to `new` (nil: absent).
    mutating func replace(
        _ identifier: PersistentIdentifier, old: [String: AttributeValue]?, new: [String: AttributeValue]?
    ) {
        let entity = identifier.entityName
        guard constraints[entity] != nil else { return }
        let primaryKey = identifier.primaryKey
        if let old {
            for key in keys(entity: entity, values: old) {
                let slot = Slot(key)
                switch owners[entity]?[slot] {
                case .one(primaryKey): owners[entity]?[slot] = nil
                case .many(var primaryKeys):
                    primaryKeys.removeAll { $0 == primaryKey }
                    owners[entity]?[slot] = primaryKeys.count == 1 ? .one(primaryKeys[0]) : .many(primaryKeys)
                case .one, nil: break
                }
            }
        }
        if let new {
            for key in keys(entity: entity, values: new) {
                let slot = Slot(key)
                switch owners[entity, default: [:]][slot] {
                case nil: owners[entity, default: [:]][slot] = .one(primaryKey)
                case .one(primaryKey): break
                case .one(let other): owners[entity, default: [:]][slot] = .many([other, primaryKey])
                case .many(var primaryKeys):
                    primaryKeys.removeAll { $0 == primaryKey }
                    primaryKeys.append(primaryKey)
                    owners[entity, default: [:]][slot] = .many(primaryKeys)
                }
            }
        }
    }
}
