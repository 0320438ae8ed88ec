import Foundation

/// Turns a save request into the changes its transaction records (DECISIONS.md D5): mints
/// permanent identifiers, resolves unique collisions (upsert: the insert becomes an update of the
/// existing model), checks values and references against the schema, and applies delete rules
/// (cascade, deny, nullify — each nullified reference its own change). Reads the state; changes
/// nothing, so a refused save leaves no trace.
struct SaveResolver {
    let schema: Schema
    let storeIdentifier: String
    let state: FoldState
    let uniqueIndex: UniqueIndex
    var collisionPolicy: UniqueCollisionPolicy = .upsert
    /// A store shared by writing processes (D11 stage 2): an update or delete of a model that is
    /// gone — another process deleted it since this process read it — is dropped and reported in
    /// ``Resolution/droppedChanges`` (never resurrected), instead of failing the save.
    var dropsChangesToDeletedModels = false
    /// Each entity's properties by name, made once by the store (``Schema/Entity/properties``
    /// builds the array per call: 2 % of a one-Trip save); an entity missing here has them built.
    var entityProperties: [String: [Schema.Property]] = [:]
    /// Saves of more inserts than this make their per-save maps with room for all of them.
    static let reservedInsertCountMin = 16
    /// Bound on cascaded deletes in one save (a named limit on the worklist).
    static let cascadeCountMax = 1_000_000

    struct Resolution {
        var changes: [ResolvedChange] = []
        var remapped: [PersistentIdentifier: PersistentIdentifier] = [:]
        /// Updates and deletes of models another process deleted (``dropsChangesToDeletedModels``).
        var droppedChanges: [PersistentIdentifier] = []
        /// Values after the save of every model the store changed beyond what was asked.
        var reregister: [PersistentIdentifier: [String: AttributeValue]] = [:]
    }

    func resolve(_ request: DataStoreSaveChangesRequest<DefaultSnapshot>) throws(LogStoreError) -> Resolution {
        var resolution = Resolution()
        // Room for every insert's identifiers in a save of many: these dictionaries grew (and
        // rehashed) a dozen times in a save of 100 inserts. Not in a small save: making a
        // dictionary with a capacity runs generic here, a metadata lookup per call (~1 % of a
        // one-Trip save; `reserveCapacity` 2.3 %).
        let reserved = request.inserted.count > Self.reservedInsertCountMin ? request.inserted.count : 0
        if reserved > 0 { resolution.remapped = Dictionary(minimumCapacity: reserved) }
        var lastChecked: Schema.Entity?
        // Each list in turn (an array of the three was made per save).
        func checkNames(_ snapshots: [DefaultSnapshot]) throws(LogStoreError) {
            for snapshot in snapshots {
                let entityName = snapshot.persistentIdentifier.entityName
                if lastChecked?.name != entityName {
                    guard let entity = schema.entity(named: entityName) else { throw .unknownEntity(entityName) }
                    lastChecked = entity
                }
                let entity = lastChecked!
                for name in snapshot.values.keys where !entity.hasProperty(named: name) {
                    throw .unknownAttribute(entity: entity.name, attribute: name)
                }
            }
        }
        try checkNames(request.inserted)
        try checkNames(request.updated)
        try checkNames(request.deleted)
        func checkStored(_ snapshots: [DefaultSnapshot]) throws(LogStoreError) {
            for snapshot in snapshots {
                let identifier = snapshot.persistentIdentifier
                if identifier.isTemporary { throw .modelNotFound(identifier) }
                if identifier.storeIdentifier != storeIdentifier { throw .foreignIdentifier(identifier) }
            }
        }
        try checkStored(request.updated)
        try checkStored(request.deleted)
        var requestedDeletes = request.deleted.map(\.persistentIdentifier)
        if dropsChangesToDeletedModels {
            resolution.droppedChanges += requestedDeletes.filter { !state.contains($0) }
            requestedDeletes.removeAll { !state.contains($0) }
        }
        let deleted = try deletions(requestedDeletes, resolution: &resolution)
        // Inserts: mint identifiers, or upsert into the model already holding a unique key.
        var insertedValues: [PersistentIdentifier: [String: AttributeValue]] =
            reserved > 0 ? Dictionary(minimumCapacity: reserved) : [:]
        var keysOfThisSave: [String: [UniqueIndex.Key: PersistentIdentifier]] = [:]
        let claimsKeys = request.inserted.count > 1 || !request.updated.isEmpty
        var upserts: Set<PersistentIdentifier> = []
        // The properties of the entity inserted last (a save's inserts are mostly of one entity):
        // `Schema.Entity.properties` builds an array.
        var lastEntity: (name: String, properties: [Schema.Property])?
        for snapshot in request.inserted {
            let temporary = snapshot.persistentIdentifier
            let entity = schema.entity(named: temporary.entityName)!
            if lastEntity?.name != entity.name {
                lastEntity = (entity.name, entityProperties[entity.name] ?? entity.properties)
            }
            let values = try completed(snapshot.values, entity: entity, properties: lastEntity!.properties)
            let keys = uniqueIndex.keys(entity: entity.name, values: values)
            var target: PersistentIdentifier?
            for key in keys {
                if let owner = keysOfThisSave[entity.name]?[key]
                    ?? uniqueIndex.owner(entity: entity.name, key: key, in: state, storeIdentifier: storeIdentifier)
                    .flatMap({ deleted.contains($0) ? nil : $0 })
                {
                    if collisionPolicy == .throw {
                        throw .uniqueConstraintViolation(
                            entity: entity.name, constraint: uniqueIndex.constraint(of: key, entity: entity.name),
                            values: key.values)
                    }
                    target = owner
                    break
                }
            }
            // An insert whose identifier is already a permanent one of this store keeps it (how
            // `logstore import` carries primary keys over); it must name a model that does not exist.
            let kept = temporary.storeIdentifier == storeIdentifier ? temporary : nil
            if let kept, target == nil, state.contains(kept) || insertedValues[kept] != nil {
                throw LogStoreError(
                    .uniqueConstraintViolation,
                    "An insert keeps the identifier \(kept), which a model already has: an insert may keep only an "
                        + "identifier no model has.", entity: entity.name, identifier: kept)
            }
            let permanent =
                target ?? kept
                ?? .permanent(for: storeIdentifier, entityName: entity.name, primaryKey: RandomUUID.make())
            // A collision with a stored model is an upsert; with an earlier insert of this save, a merge.
            if let target, state.contains(target) { upserts.insert(target) }
            resolution.remapped[temporary] = permanent
            if let earlier = insertedValues[permanent] {
                insertedValues[permanent] = earlier.merging(values) { $1 }
            } else {
                insertedValues[permanent] = values
            }
            if reserved > 0, !keys.isEmpty, keysOfThisSave[entity.name] == nil {
                // Room for the keys of the save's inserts, bounded: grown one by one it rehashed ~7
                // times per 100; a save of many inserts of other entities must not reserve for them.
                keysOfThisSave[entity.name] = Dictionary(minimumCapacity: min(reserved, 1_024) * keys.count)
            }
            // Read by the later inserts and the updates of this save: none when this is its only change.
            if claimsKeys {
                for key in keys { keysOfThisSave[entity.name, default: [:]][key] = permanent }
            }
        }
        let remap = { (identifier: PersistentIdentifier) -> PersistentIdentifier? in
            let mapped = resolution.remapped[identifier] ?? identifier
            return deleted.contains(mapped) ? nil : mapped
        }
        // References to models deleted in this save are dropped; the context must hear of it.
        let dropsDeleted = { (values: [String: AttributeValue]) -> Bool in
            !deleted.isEmpty
                && values.values.contains {
                    $0.referencedIdentifiers.contains { deleted.contains(resolution.remapped[$0] ?? $0) }
                }
        }
        // Insert (and upsert) changes, in request order. Only when two inserts became one model (a
        // unique key in common: fewer models than inserts) or a temporary identifier was given
        // twice (fewer identifiers than inserts, the later insert's model kept) can two inserts
        // name one permanent identifier, which is emitted once.
        let merged =
            insertedValues.count < request.inserted.count || resolution.remapped.count < request.inserted.count
        var emitted: Set<PersistentIdentifier> = merged && reserved > 0 ? Set(minimumCapacity: reserved) : []
        for snapshot in request.inserted {
            let permanent = resolution.remapped[snapshot.persistentIdentifier]!
            if merged {
                guard !emitted.contains(permanent) else { continue }
                emitted.insert(permanent)
            }
            let inserted = insertedValues[permanent]!
            // Most inserts refer to nothing: their values are kept as they are, not copied.
            let values = try checkedReferences(
                inserted.values.contains(where: \.holdsReferences) ? inserted.mapValues { $0.mapReferences(remap) } : inserted,
                of: permanent, inserted: insertedValues)
            if upserts.contains(permanent) {
                let current = state.row(permanent)?.values ?? RowValues()
                let changed = changedValues(values, current: current)
                if !changed.isEmpty { resolution.changes.append(.update(permanent, changed)) }
                resolution.reregister[permanent] = current.merging(changed).dictionary
            } else {
                resolution.changes.append(.insert(permanent, values))
                if dropsDeleted(inserted) { resolution.reregister[permanent] = values }
            }
        }
        for snapshot in request.updated {
            let identifier = snapshot.persistentIdentifier
            if deleted.contains(identifier) { continue }
            guard let current = state.row(identifier)?.values else {
                guard dropsChangesToDeletedModels else { throw .modelNotFound(identifier) }
                resolution.droppedChanges.append(identifier)
                continue
            }
            let entity = schema.entity(named: identifier.entityName)!
            var values = snapshot.values
            // Only what the context changed: the rest of a whole snapshot may be a stale copy.
            if let names = request.changedAttributeNames[identifier] {
                values = values.filter { names.contains($0.key) }
            }
            for (name, value) in values { try check(value, property: entity.property(named: name)!, entity: entity) }
            let droppedReferences = dropsDeleted(values)
            values = try checkedReferences(
                values.mapValues { $0.mapReferences(remap) }, of: identifier, inserted: insertedValues)
            let changed = changedValues(values, current: current)
            if droppedReferences { resolution.reregister[identifier] = current.merging(changed).dictionary }
            guard !changed.isEmpty else { continue }
            try checkUnique(
                identifier, values: current.merging(changed), claimed: &keysOfThisSave, deleted: deleted)
            resolution.changes.append(.update(identifier, changed))
        }
        resolution.changes += try deleteChanges(deleted, inserted: insertedValues, resolution: &resolution)
        finalizeReregistered(&resolution)
        return resolution
    }

    /// Re-registered values are the model's state after every change of this save, in order.
    private func finalizeReregistered(_ resolution: inout Resolution) {
        guard !resolution.reregister.isEmpty else { return }
        var final: [PersistentIdentifier: [String: AttributeValue]] = [:]
        for identifier in resolution.reregister.keys {
            final[identifier] = state.row(identifier)?.values.dictionary ?? [:]
        }
        for change in resolution.changes where final[change.identifier] != nil {
            switch change {
            case .insert(let identifier, let values): final[identifier] = values
            case .update(let identifier, let values): final[identifier]!.merge(values) { $1 }
            case .delete(let identifier, _): final[identifier] = nil
            }
        }
        resolution.reregister = final
    }

    /// The requested deletes plus cascades, checking deny rules.
    private func deletions(_ requested: [PersistentIdentifier], resolution: inout Resolution) throws(LogStoreError)
        -> Set<PersistentIdentifier>
    {
        var deleted: Set<PersistentIdentifier> = []
        var worklist = requested
        for identifier in requested where !state.contains(identifier) { throw .modelNotFound(identifier) }
        while let identifier = worklist.popLast() {
            guard deleted.count < Self.cascadeCountMax else {
                throw .transactionTooLarge(byteCount: deleted.count, limit: Self.cascadeCountMax)
            }
            guard !deleted.contains(identifier), let row = state.row(identifier) else { continue }
            deleted.insert(identifier)
            let entity = schema.entity(named: identifier.entityName)!
            for relationship in entity.relationships where relationship.deleteRule == .cascade {
                worklist += (row.values[relationship.name] ?? .null).referencedIdentifiers
            }
        }
        for identifier in deleted {
            let entity = schema.entity(named: identifier.entityName)!
            for relationship in entity.relationships where relationship.deleteRule == .deny {
                let related = (state.row(identifier)?.values[relationship.name] ?? .null).referencedIdentifiers
                if let blocking = related.first(where: { !deleted.contains($0) && state.contains($0) }) {
                    throw .deleteDenied(identifier, relationship: relationship.name, related: blocking)
                }
            }
        }
        return deleted
    }

    /// Nullifications of references to deleted models (each its own update), then the deletes
    /// with their tombstones, requested ones first.
    private func deleteChanges(
        _ deleted: Set<PersistentIdentifier>, inserted: [PersistentIdentifier: [String: AttributeValue]],
        resolution: inout Resolution
    ) throws(LogStoreError) -> [ResolvedChange] {
        guard !deleted.isEmpty else { return [] }
        var changes: [ResolvedChange] = []
        let deletedEntities = Set(deleted.map(\.entityName))
        for entity in schema.entities {
            let pointing = entity.relationships.filter { deletedEntities.contains($0.destination) }
            guard !pointing.isEmpty else { continue }
            for (primaryKey, row) in state.rows(of: entity.name) {
                let identifier = PersistentIdentifier.permanent(
                    for: storeIdentifier, entityName: entity.name, primaryKey: primaryKey)
                guard !deleted.contains(identifier), inserted[identifier] == nil else { continue }
                // Most rows point at no deleted model: checked on the row, with no dictionary made.
                let reregistered = resolution.reregister[identifier]
                guard
                    pointing.contains(where: { relationship in
                        let value = (reregistered.map { $0[relationship.name] } ?? row.values[relationship.name]) ?? .null
                        return value.referencedIdentifiers.contains(where: deleted.contains)
                    })
                else { continue }
                var current = reregistered ?? row.values.dictionary
                for relationship in pointing {
                    let value = current[relationship.name] ?? .null
                    guard value.referencedIdentifiers.contains(where: deleted.contains) else { continue }
                    let nullified = value.mapReferences { deleted.contains($0) ? nil : $0 }
                    changes.append(.update(identifier, [relationship.name: nullified]))
                    current[relationship.name] = nullified
                }
                resolution.reregister[identifier] = current
            }
        }
        for identifier in deleted.sorted() {
            let entity = schema.entity(named: identifier.entityName)!
            let values = state.row(identifier)?.values ?? RowValues()
            var tombstone: [String: AttributeValue] = [:]
            for property in entity.properties where property.options.contains(.preserveValueOnDeletion) {
                tombstone[property.name] = values[property.name] ?? .null
            }
            changes.append(.delete(identifier, tombstone: tombstone))
        }
        return changes
    }

    /// Fills defaults for missing properties and checks every value's type. `values` names only
    /// properties of `entity` (checked first), so a snapshot with every property is kept as it is.
    private func completed(
        _ values: [String: AttributeValue], entity: Schema.Entity, properties: [Schema.Property]
    ) throws(LogStoreError) -> [String: AttributeValue] {
        if values.count == properties.count {
            // Every property has a value (the names are the entity's, checked first, and a
            // dictionary's are distinct): each value is checked against its property, found by
            // name in the short array, with no lookup hashing a name. A value that fails goes
            // to the loop below, which names the first failing property in declaration order
            // (the dictionary's order is not one).
            let allValid = values.allSatisfy { name, value in
                // By index: `first(where:)` copied the property out (its strings and default).
                guard let index = properties.firstIndex(where: { $0.name == name }) else {
                    preconditionFailure("a value names no property of \(entity.name)")
                }
                return (try? check(value, property: properties[index], entity: entity)) != nil
            }
            if allValid { return values }
        }
        var result = values
        for property in properties {
            if let value = values[property.name] {
                try check(value, property: property, entity: entity)
                continue
            }
            guard let value = property.defaultValue else {
                throw .missingValue(entity: entity.name, attribute: property.name)
            }
            try check(value, property: property, entity: entity)
            result[property.name] = value
        }
        // `resolve` refused unknown names first; a value under any other name would be recorded.
        precondition(result.count == properties.count, "a value names no property of \(entity.name)")
        return result
    }

    private func check(_ value: AttributeValue, property: Schema.Property, entity: Schema.Entity) throws(LogStoreError)
    {
        if value.isNull {
            guard property.isOptional else { throw .missingValue(entity: entity.name, attribute: property.name) }
            return
        }
        guard property.valueType.accepts(value) else {
            throw .valueTypeMismatch(
                entity: entity.name, attribute: property.name, expected: property.valueType.description,
                value: value)
        }
    }

    /// Every reference must name a model that exists after the save.
    private func checkedReferences(
        _ values: [String: AttributeValue], of identifier: PersistentIdentifier,
        inserted: [PersistentIdentifier: [String: AttributeValue]]
    ) throws(LogStoreError) -> [String: AttributeValue] {
        for (name, value) in values {
            for reference in value.referencedIdentifiers {
                // The state finds rows by entity and primary key: another store's identifier with
                // a key this store holds would pass for one of this store's models.
                if !reference.isTemporary, reference.storeIdentifier != storeIdentifier {
                    throw .foreignIdentifier(reference)
                }
                if inserted[reference] == nil && !state.contains(reference) {
                    throw .missingReference(entity: identifier.entityName, attribute: name, identifier: reference)
                }
            }
        }
        return values
    }

    private func checkUnique(
        _ identifier: PersistentIdentifier, values: some AttributeValuesByName,
        claimed: inout [String: [UniqueIndex.Key: PersistentIdentifier]],
        deleted: Set<PersistentIdentifier>
    ) throws(LogStoreError) {
        for key in uniqueIndex.keys(entity: identifier.entityName, values: values) {
            let owner =
                claimed[identifier.entityName]?[key]
                ?? uniqueIndex.owner(entity: identifier.entityName, key: key, in: state, storeIdentifier: storeIdentifier)
            if let owner, owner != identifier, !deleted.contains(owner) {
                throw .uniqueConstraintViolation(
                    entity: identifier.entityName,
                    constraint: uniqueIndex.constraint(of: key, entity: identifier.entityName), values: key.values)
            }
            claimed[identifier.entityName, default: [:]][key] = identifier
        }
    }

    private func changedValues(_ values: [String: AttributeValue], current: RowValues) -> [String: AttributeValue] {
        values.filter { current[$0.key] != $0.value }
    }
}
