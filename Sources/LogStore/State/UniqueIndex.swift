/// For each entity and unique constraint, the model holding each combination of values.
/// Combinations with a null value are not indexed (nulls never collide). Keys compare with Swift
/// value semantics, so `"é"` and `"e\u{301}"` collide.
struct UniqueIndex: Sendable {
    struct Key: Hashable, Sendable {
        let values: [AttributeValue]
        /// Which of its entity's constraints (an index into ``UniqueIndex/constraints``): the
        /// names are found there when an error needs them.
        let constraintIndex: UInt32
        /// The values' hash, computed once (32 bits: with the index, a key takes 16 bytes, as it
        /// did before it had one). Swift's dictionaries keep no hashes: a lookup compares the key
        /// with every occupied slot it probes (several for a key that is absent, as every new
        /// model's is), and comparing value arrays was most of a save's unique check (P4-ctx
        /// profile). Keys whose digests differ are now told apart by one compare.
        let digest: UInt32

        init(constraintIndex: Int, values: [AttributeValue]) {
            self.values = values
            self.constraintIndex = UInt32(constraintIndex)
            // The values only: an entity's keys share a few constraints, and hashing their
            // names too doubled the cost of every lookup.
            var hasher = Hasher()
            hasher.combine(values)
            digest = UInt32(truncatingIfNeeded: hasher.finalize())
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(digest)
        }

        static func == (lhs: Key, rhs: Key) -> Bool {
            lhs.digest == rhs.digest && lhs.constraintIndex == rhs.constraintIndex && lhs.values == rhs.values
        }
    }

    private var owners: [String: [Key: PersistentIdentifier]] = [:]
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

    func owner(entity: String, key: Key) -> PersistentIdentifier? {
        owners[entity]?[key]
    }

    /// Updates the index for a model whose values went from `old` to `new` (nil: absent).
    mutating func replace(
        _ identifier: PersistentIdentifier, old: [String: AttributeValue]?, new: [String: AttributeValue]?
    ) {
        let entity = identifier.entityName
        guard constraints[entity] != nil else { return }
        if let old {
            for key in keys(entity: entity, values: old) where owners[entity]?[key] == identifier {
                owners[entity]?[key] = nil
            }
        }
        if let new {
            for key in keys(entity: entity, values: new) { owners[entity, default: [:]][key] = identifier }
        }
    }
}
