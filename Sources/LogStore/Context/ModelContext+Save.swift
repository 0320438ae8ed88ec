import Foundation

extension ModelContext {
    /// Writes the inserts, changes and deletes as one transaction, then swaps permanent
    /// identifiers into the inserted instances.
    public func save() throws {
        guard let (request, changed) = makeSaveRequest() else { return }
        markBeingSaved(changed, request)
        defer { unmarkBeingSaved(changed, request) }
        do {
            let result = try container.store.save(request)
            apply(result, request: request)
        } catch {
            restoreChanges(changed)
            throw error
        }
    }

    /// `save()` that suspends, instead of blocking a thread, while the store waits for durability.
    public nonisolated(nonsending) func save() async throws {
        guard let (request, changed) = makeSaveRequest() else { return }
        markBeingSaved(changed, request)
        defer { unmarkBeingSaved(changed, request) }
        do {
            let result = try await container.store.save(request)
            apply(result, request: request)
        } catch {
            restoreChanges(changed)
            throw error
        }
    }

    /// The tracked changes a request carries, by model: taken from the models when the request is
    /// made (changes made while an async save is suspended are the next save's), given back if
    /// the save fails; and the inserts it carries.
    struct TakenChanges {
        var changes: [(model: any PersistentModel, names: Set<String>)] = []
        var inserts: [any PersistentModel] = []
    }

    /// The request for the pending changes, or `nil` when there are none. Unsaved models that
    /// registered models refer to are inserted too (as SwiftData does).
    ///
    /// Costs what changed: inserts, deletes and the tracked models set since their last save —
    /// unless a model without change tracking is registered, whose values are compared with the
    /// saved ones.
    func makeSaveRequest() -> (DataStoreSaveChangesRequest<DefaultSnapshot>, TakenChanges)? {
        var worklist: [any PersistentModel] =
            hasUntrackedModels ? Array(registered.values) : inserted + Array(changedModels.values)
        // Bounded by the number of reachable models: each is inserted at most once.
        while let model = worklist.popLast() {
            // A model(for:) instance nothing backs is not inserted: the reference to it fails the
            // save (a missing reference, or another store's identifier), where inserting it saved a
            // model of default values.
            for related in relatedModels(of: model)
            where registered[related.persistentModelID] == nil
                && deleted[related.persistentModelID] == nil && related.modelState.unbackedReason == nil
            {
                insert(related)
                worklist.append(related)
            }
        }
        var request = DataStoreSaveChangesRequest<DefaultSnapshot>(editingState: EditingState(author: author))
        var taken = TakenChanges()
        // What a save in flight carries is that save's (a save started while another is
        // suspended sends only what is pending beyond it).
        taken.inserts = insertsBeingSaved.isEmpty ? inserted : inserted.filter { !insertsBeingSaved.contains(ObjectIdentifier($0)) }
        request.inserted = taken.inserts.map {
            DefaultSnapshot(persistentIdentifier: $0.persistentModelID, values: encode($0))
        }
        // An insert is sent whole: what is set on it from here on (while an async save is
        // suspended) is a change for the next save (`apply` tracks it once it is permanent).
        for model in taken.inserts { model.modelState.changedNames.removeAll() }
        for model in changedModels.values {
            let values = changedValues(of: model)
            taken.changes.append((model, model.modelState.changedNames))
            model.modelState.changedNames.removeAll()
            guard !values.isEmpty else { continue }
            // Whole models, as SwiftData's contract has it: a store may replace its copy with
            // the snapshot (LogStore records only the values that differ from its own).
            request.updated.append(DefaultSnapshot(persistentIdentifier: model.persistentModelID, values: encode(model)))
            request.changedAttributeNames[model.persistentModelID] = Set(values.keys)
        }
        let tracked = Set(changedModels.keys)
        changedModels.removeAll()
        if hasUntrackedModels {
            for (identifier, model) in registered
            where !identifier.isTemporary && !tracked.contains(ObjectIdentifier(model)) {
                let values = encode(model)
                guard let saved = savedValues[identifier], values != saved else { continue }
                request.updated.append(DefaultSnapshot(persistentIdentifier: identifier, values: values))
                request.changedAttributeNames[identifier] = Set(values.keys.filter { saved[$0] != values[$0] })
            }
        }
        request.deleted = deleted.compactMap {
            deletesBeingSaved.contains($0.key) ? nil : DefaultSnapshot(persistentIdentifier: $0.key, values: [:])
        }
        if request.inserted.isEmpty && request.updated.isEmpty && request.deleted.isEmpty { return nil }
        return (request, taken)
    }

    /// The changes a save in flight carries count as pending for a fetch's refresh: an async save
    /// suspends, and a fetch meanwhile must not set those properties to another save's values.
    /// So are its inserts and deletes, for a save started meanwhile and for `rollback()`.
    private func markBeingSaved(_ taken: TakenChanges, _ request: DataStoreSaveChangesRequest<DefaultSnapshot>) {
        for (model, names) in taken.changes { namesBeingSaved[ObjectIdentifier(model), default: []].formUnion(names) }
        for model in taken.inserts { insertsBeingSaved.insert(ObjectIdentifier(model)) }
        for snapshot in request.deleted { deletesBeingSaved.insert(snapshot.persistentIdentifier) }
    }

    /// After the save returned or threw (a failed save's inserts and deletes are pending again;
    /// an insert deleted meanwhile is then simply dropped, as a delete of an unsaved insert is).
    private func unmarkBeingSaved(_ taken: TakenChanges, _ request: DataStoreSaveChangesRequest<DefaultSnapshot>) {
        for (model, _) in taken.changes { namesBeingSaved[ObjectIdentifier(model)] = nil }
        for model in taken.inserts { insertsBeingSaved.remove(ObjectIdentifier(model)) }
        for snapshot in request.deleted { deletesBeingSaved.remove(snapshot.persistentIdentifier) }
        if !insertsDeletedWhileBeingSaved.isEmpty {
            for snapshot in request.inserted { insertsDeletedWhileBeingSaved[snapshot.persistentIdentifier] = nil }
        }
    }

    /// A failed save leaves its changes pending: the tracked ones are marked changed again.
    func restoreChanges(_ taken: TakenChanges) {
        for (model, names) in taken.changes where registered[model.persistentModelID] === model {
            model.modelState.changedNames.formUnion(names)
            changedModels[ObjectIdentifier(model)] = model
        }
    }

    func apply(
        _ result: DataStoreSaveChangesResult<DefaultSnapshot>, request: DataStoreSaveChangesRequest<DefaultSnapshot>
    ) {
        let cascaded = cascadedDeletes(of: request.deleted.map(\.persistentIdentifier))
        // Only what the request carried is saved: `save() async` suspends, and code on the same
        // actor may insert, delete or change models meanwhile — those stay pending.
        // Each saved insert takes its permanent identifier, and as saved values what its request
        // carried, with the permanent identifiers of this save's inserts in its references
        // (encoding the model again cost as much as the rest of this function, and would take
        // values set while an async save was suspended as saved; those are tracked as changes).
        func take(_ model: any PersistentModel, savedAs snapshot: DefaultSnapshot) {
            if let permanent = result.remappedIdentifiers[snapshot.persistentIdentifier] {
                registered[snapshot.persistentIdentifier] = nil
                model.modelState.assign(permanent)
                // An upsert maps onto an existing model: the instance just saved becomes the registered one.
                registered[permanent] = model
                if !model.modelState.changedNames.isEmpty { changedModels[ObjectIdentifier(model)] = model }
            }
            var values = snapshot.values
            if values.values.contains(where: { !$0.referencedIdentifiers.isEmpty }) {
                values = values.mapValues { $0.mapReferences { result.remappedIdentifiers[$0] ?? $0 } }
            }
            savedValues[model.persistentModelID] = values
        }
        // (Generic, a metadata lookup: only where it spares rehashing.)
        if request.inserted.count > 16 { savedValues.reserveCapacity(savedValues.count + request.inserted.count) }
        // Mostly nothing was inserted meanwhile: the pending inserts are the request's, in order
        // (compared one by one; no dictionary of identifiers to hash).
        if inserted.count == request.inserted.count
            && zip(inserted, request.inserted).allSatisfy({ $0.persistentModelID == $1.persistentIdentifier })
        {
            for (model, snapshot) in zip(inserted, request.inserted) { take(model, savedAs: snapshot) }
            // Capacity kept for the next batch of a usual size, not a huge one's (40 bytes a model).
            inserted.removeAll(keepingCapacity: inserted.count <= 1_024)
        } else {
            // Matched by identifier, in request order: an insert deleted and inserted again meanwhile
            // moved to the end of `inserted`, and of two inserts the store merged by a unique key
            // the later one's values and instance are the saved ones.
            let pending = Dictionary(
                inserted.map { ($0.persistentModelID, $0) }, uniquingKeysWith: { first, _ in first })
            var savedObjects: Set<ObjectIdentifier> = []
            for snapshot in request.inserted {
                guard let model = pending[snapshot.persistentIdentifier] else {
                    // Deleted while this save was suspended: stored now, so its delete is pending.
                    if let model = insertsDeletedWhileBeingSaved.removeValue(forKey: snapshot.persistentIdentifier) {
                        take(model, savedAs: snapshot)
                        let identifier = model.persistentModelID
                        registered[identifier] = nil
                        changedModels[ObjectIdentifier(model)] = nil
                        model.modelState.context = self
                        deleted[identifier] = model
                    }
                    continue
                }
                take(model, savedAs: snapshot)
                savedObjects.insert(ObjectIdentifier(model))
            }
            inserted.removeAll { savedObjects.contains(ObjectIdentifier($0)) }
        }
        for snapshot in request.deleted {
            savedValues[snapshot.persistentIdentifier] = nil
            deleted.removeValue(forKey: snapshot.persistentIdentifier)?.modelState.context = nil
        }
        // Models the store deleted by cascade leave the context as the requested deletes do
        // (left registered, a later edit of one would make every save fail with modelNotFound).
        for identifier in cascaded {
            registered.removeValue(forKey: identifier)?.modelState.context = nil
            savedValues[identifier] = nil
        }
        // What was saved is the last saved values with the request's changes (not the model's
        // values now, which may have changed while an async save was suspended).
        for snapshot in request.updated where registered[snapshot.persistentIdentifier] != nil {
            savedValues[snapshot.persistentIdentifier, default: [:]].merge(snapshot.values) { $1 }
        }
        // Models the store changed beyond the request (nullified references, upserts).
        for (identifier, snapshot) in result.snapshotsToReregister {
            guard let model = registered[identifier] else { continue }
            try? fill(model, with: snapshot.values)
            savedValues[identifier] = encode(model)
        }
        // Every identifier with saved values is registered or deleted, pending (checked in debug
        // builds only: it is a walk over every registered model, which a save must not cost).
        assert(
            savedValues.keys.allSatisfy { registered[$0] != nil || deleted[$0] != nil },
            "saved values of unregistered models")
    }

    /// The models the store's `.cascade` rules delete along with `requested`: the store cascades
    /// over its stored values, which are the saved values the context holds. Each identifier is
    /// visited once.
    private func cascadedDeletes(of requested: [PersistentIdentifier]) -> [PersistentIdentifier] {
        var seen = Set(requested)
        var worklist = requested
        var cascaded: [PersistentIdentifier] = []
        while let identifier = worklist.popLast() {
            guard let entity = container.schema.entity(named: identifier.entityName),
                let values = savedValues[identifier]
            else { continue }
            for relationship in entity.relationships where relationship.deleteRule == .cascade {
                for target in (values[relationship.name] ?? .null).referencedIdentifiers
                where seen.insert(target).inserted {
                    cascaded.append(target)
                    worklist.append(target)
                }
            }
        }
        return cascaded
    }
}
