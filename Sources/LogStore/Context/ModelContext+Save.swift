import Foundation

extension ModelContext {
    /// Writes the inserts, changes and deletes as one transaction, then swaps permanent
    /// identifiers into the inserted instances.
    public func save() throws {
        guard let (request, madeTaken) = makeSaveRequest() else { return }
        // Let go of the inserts' array: `apply` empties `inserted` in place.
        var taken = consume madeTaken
        taken.inserts = []
        // Not recorded as in flight: nothing runs on this actor while it blocks, and it is the
        // newest write when it is applied.
        let cascaded = cascadedDeletes(of: request.deleted.map(\.persistentIdentifier))
        do {
            let result = try container.store.save(request)
            apply(result, request: request, sequence: nil, cascaded: cascaded)
        } catch {
            restoreChanges(taken)
            throw error
        }
    }

    /// `save()` that suspends, instead of blocking a thread, while the store waits for durability.
    /// What it carries stays its own while it is suspended: a save made meanwhile (async,
    /// synchronous or an autosave) sends only what is pending beyond it, `rollback()` leaves it,
    /// and an insert it carries that is deleted meanwhile is deleted by the next save.
    public nonisolated(nonsending) func save() async throws {
        guard let (request, madeTaken) = makeSaveRequest() else { return }
        let sequence = beginSave(madeTaken, request)
        var taken = consume madeTaken
        taken.inserts = []
        defer { endSave(sequence, request) }
        do {
            let result = try await container.store.save(request)
            apply(result, request: request, sequence: sequence, cascaded: savesInFlight[sequence]?.cascaded ?? [])
        } catch {
            restoreChanges(taken)
            // What saves made meanwhile held back for it is pending: autosaved like any change (an
            // autosave is a synchronous save, which schedules nothing when it fails). Only then:
            // its own changes are not retried behind the caller's back.
            if savesInFlight[sequence]?.heldBack == true { changeMade() }
            throw error
        }
    }

    /// The tracked changes a request carries, by model: taken from the models when the request is
    /// made (changes made while an async save is suspended are the next save's), given back if
    /// the save fails; and the inserts it carries, in the request's order.
    struct TakenChanges {
        var changes: [(model: any PersistentModel, names: Set<String>)] = []
        var inserts: [any PersistentModel] = []
    }

    /// What a save in flight carries (``savesInFlight``).
    struct SaveInFlight {
        /// Its inserts' values, by model.
        var inserts: [ObjectIdentifier: [String: AttributeValue]] = [:]
        var deletes: Set<PersistentIdentifier> = []
        /// The models its deletes delete by cascade, worked out when it was made (over the saved
        /// values and the saves then in flight: the state the store resolved it against).
        var cascaded: [PersistentIdentifier] = []
        /// The properties of tracked models it carries (a fetch's refresh treats them as pending).
        var names: [ObjectIdentifier: Set<String>] = [:]
        /// The changed values it carries, by model — less those a later save applied first (the
        /// later save wrote them after it: its values are the stored ones).
        var updates: [PersistentIdentifier: [String: AttributeValue]] = [:]
        /// The properties, by model, a later save applied first wrote (the store's snapshots of
        /// this save predate them: a re-register leaves them as they are).
        var superseded: [PersistentIdentifier: Set<String>] = [:]
        /// A save made meanwhile held something back for it.
        var heldBack = false
    }

    func isInsertBeingSaved(_ model: any PersistentModel) -> Bool {
        !savesInFlight.isEmpty && savesInFlight.values.contains { $0.inserts[ObjectIdentifier(model)] != nil }
    }

    func isDeleteBeingSaved(_ identifier: PersistentIdentifier) -> Bool {
        !savesInFlight.isEmpty && savesInFlight.values.contains { $0.deletes.contains(identifier) }
    }

    /// Models a save in flight deletes, by request or cascade, or that it deletes and that were
    /// inserted again meanwhile: a save made meanwhile neither changes them nor refers to them.
    private var identifiersBeingDeleted: Set<PersistentIdentifier> {
        var identifiers = reinsertedWhileBeingDeleted
        for save in savesInFlight.values {
            identifiers.formUnion(save.deletes)
            identifiers.formUnion(save.cascaded)
        }
        return identifiers
    }

    func namesBeingSaved(of model: any PersistentModel) -> Set<String> {
        savesInFlight.values.reduce(into: []) { $0.formUnion($1.names[ObjectIdentifier(model)] ?? []) }
    }

    func valuesBeingSaved(ofInsert model: any PersistentModel) -> [String: AttributeValue]? {
        savesInFlight.values.lazy.compactMap { $0.inserts[ObjectIdentifier(model)] }.first
    }

    /// The saved values with the changes saves in flight carry (oldest first, so the newest win):
    /// what the store holds once they are saved.
    func savedValuesWithSavesInFlight(of identifier: PersistentIdentifier) -> [String: AttributeValue]? {
        guard var values = savedValues[identifier] else { return nil }
        if savesInFlight.isEmpty { return values }
        for sequence in savesInFlight.keys.sorted() {
            values.merge(savesInFlight[sequence]?.updates[identifier] ?? [:]) { $1 }
        }
        return values
    }

    /// The request for the pending changes, or `nil` when there are none. Unsaved models that
    /// registered models refer to are inserted too (as SwiftData does).
    ///
    /// Costs what changed: inserts, deletes and the tracked models set since their last save —
    /// unless a model without change tracking is registered, whose values are compared with the
    /// saved ones.
    ///
    /// While a save is in flight, what it carries is not sent again, and neither is an insert or
    /// an update that refers to one of its inserts (the store knows an insert's temporary
    /// identifier only within its own request): those stay pending until that save is applied.
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
        // Temporary identifiers this request cannot carry or refer to: inserts a save in flight
        // carries, and the inserts that refer to them (to a fixed point, bounded by the inserts).
        var held: Set<PersistentIdentifier> = []
        // Deletes that wait for the saves in flight (below), and their entities: an insert or
        // update of one waits too (with the delete held, the store would take a new model with the
        // deleted one's unique key for an update of it).
        var heldDeletes: Set<PersistentIdentifier> = []
        var heldEntities: Set<String> = []
        if savesInFlight.isEmpty {
            taken.inserts = inserted
        } else {
            for model in inserted where isInsertBeingSaved(model) { held.insert(model.persistentModelID) }
            held.formUnion(identifiersBeingDeleted)
            // What the inserts in flight refer to (a relationship without an inverse too).
            var referencedInFlight: Set<PersistentIdentifier> = []
            for save in savesInFlight.values {
                for values in save.inserts.values {
                    for value in values.values { referencedInFlight.formUnion(value.referencedIdentifiers) }
                }
            }
            var candidates = inserted.filter { !held.contains($0.persistentModelID) }
            // Deletes a save in flight makes anyway (by request or cascade) are not sent, and hold
            // nothing; the others, with what their cascades reach (worked out once, not per pass).
            let beingDeleted = identifiersBeingDeleted
            var reachedByDelete: [PersistentIdentifier: [PersistentIdentifier]] = [:]
            for identifier in deleted.keys where !beingDeleted.contains(identifier) && !isDeleteBeingSaved(identifier) {
                reachedByDelete[identifier] = cascadedDeletes(of: [identifier])
            }
            // To a fixed point, bounded by the inserts and deletes: each pass holds one more or stops.
            var grew = true
            while grew {
                grew = false
                for model in candidates
                where refersTo(held, model) || heldEntities.contains(model.persistentModelID.entityName) {
                    held.insert(model.persistentModelID)
                    grew = true
                }
                candidates.removeAll { held.contains($0.persistentModelID) }
                // A delete that refers to what is held, that an insert in flight refers to, or whose
                // cascade reaches such a model or an insert in flight waits: the store would delete
                // (or unlink) the insert behind the context's back, and its save then register it.
                for (identifier, reached) in reachedByDelete where !heldDeletes.contains(identifier) {
                    guard let model = deleted[identifier],
                        refersTo(held, model) || referencedInFlight.contains(identifier)
                            || reached.contains(where: {
                                $0.isTemporary || referencedInFlight.contains($0) || held.contains($0)
                            })
                    else { continue }
                    // With the entities it deletes: a new model with a unique key of one of them
                    // would merge into a model about to be deleted.
                    heldDeletes.insert(identifier)
                    heldEntities.insert(identifier.entityName)
                    for target in reached { heldEntities.insert(target.entityName) }
                    grew = true
                }
            }
            taken.inserts = candidates
            let heldInserts = inserted.contains { held.contains($0.persistentModelID) && !isInsertBeingSaved($0) }
            if heldInserts || !heldDeletes.isEmpty {
                for key in savesInFlight.keys { savesInFlight[key]?.heldBack = true }
            }
        }
        request.inserted = taken.inserts.map {
            DefaultSnapshot(persistentIdentifier: $0.persistentModelID, values: encode($0))
        }
        // An insert is sent whole: what is set on it from here on (while an async save is
        // suspended) is a change for the next save (`apply` tracks it once it is permanent).
        for model in taken.inserts { model.modelState.changedNames.removeAll() }
        var stillPending: [ObjectIdentifier: any PersistentModel] = [:]
        for (key, model) in changedModels {
            if isHeld(model, held, heldEntities) {
                stillPending[key] = model
                continue
            }
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
        if !stillPending.isEmpty {
            for key in savesInFlight.keys { savesInFlight[key]?.heldBack = true }
        }
        changedModels = stillPending
        if hasUntrackedModels {
            for (identifier, model) in registered
            where !identifier.isTemporary && !tracked.contains(ObjectIdentifier(model)) {
                let values = encode(model)
                guard let saved = savedValuesWithSavesInFlight(of: identifier), values != saved else { continue }
                if isHeld(model, held, heldEntities) { continue }
                request.updated.append(DefaultSnapshot(persistentIdentifier: identifier, values: values))
                request.changedAttributeNames[identifier] = Set(values.keys.filter { saved[$0] != values[$0] })
            }
        }
        request.deleted = deleted.compactMap { identifier, _ in
            held.contains(identifier) || heldDeletes.contains(identifier) || isDeleteBeingSaved(identifier)
                ? nil : DefaultSnapshot(persistentIdentifier: identifier, values: [:])
        }
        if request.inserted.isEmpty && request.updated.isEmpty && request.deleted.isEmpty { return nil }
        return (request, taken)
    }

    /// Whether an update of `model` waits: it is held, refers to what is held, or is of an entity a
    /// held delete deletes.
    private func isHeld(_ model: any PersistentModel, _ held: Set<PersistentIdentifier>, _ heldEntities: Set<String>)
        -> Bool
    {
        if held.isEmpty && heldEntities.isEmpty { return false }
        let identifier = model.persistentModelID
        return held.contains(identifier) || heldEntities.contains(identifier.entityName) || refersTo(held, model)
    }

    /// Whether `model` refers to one of `identifiers`.
    private func refersTo(_ identifiers: Set<PersistentIdentifier>, _ model: any PersistentModel) -> Bool {
        relatedModels(of: model).contains { identifiers.contains($0.persistentModelID) }
    }

    /// A save is in flight from its request until it returns or throws: what it carries counts as
    /// pending for a fetch's refresh, is not sent by a save made meanwhile, and is left to it by
    /// `rollback()`. Returns its sequence number.
    private func beginSave(_ taken: TakenChanges, _ request: DataStoreSaveChangesRequest<DefaultSnapshot>) -> Int {
        var save = SaveInFlight()
        for (model, names) in taken.changes { save.names[ObjectIdentifier(model), default: []].formUnion(names) }
        for (model, snapshot) in zip(taken.inserts, request.inserted) { save.inserts[ObjectIdentifier(model)] = snapshot.values }
        save.deletes = Set(request.deleted.map(\.persistentIdentifier))
        save.cascaded = cascadedDeletes(of: request.deleted.map(\.persistentIdentifier))
        for snapshot in request.updated {
            let names = request.changedAttributeNames[snapshot.persistentIdentifier] ?? Set(snapshot.values.keys)
            save.updates[snapshot.persistentIdentifier] = snapshot.values.filter { names.contains($0.key) }
        }
        let sequence = nextSaveSequence
        nextSaveSequence += 1
        savesInFlight[sequence] = save
        return sequence
    }

    /// After the save returned or threw (a failed save's inserts and deletes are pending again;
    /// an insert deleted meanwhile is then simply dropped, as a delete of an unsaved insert is,
    /// and a model inserted again meanwhile simply stays).
    private func endSave(_ sequence: Int, _ request: DataStoreSaveChangesRequest<DefaultSnapshot>) {
        savesInFlight[sequence] = nil
        if !insertsDeletedWhileBeingSaved.isEmpty {
            for snapshot in request.inserted { insertsDeletedWhileBeingSaved[snapshot.persistentIdentifier] = nil }
        }
        if !reinsertedWhileBeingDeleted.isEmpty {
            for snapshot in request.deleted { reinsertedWhileBeingDeleted.remove(snapshot.persistentIdentifier) }
        }
    }

    /// A failed save leaves its changes pending: the tracked ones are marked changed again.
    func restoreChanges(_ taken: TakenChanges) {
        for (model, names) in taken.changes {
            if registered[model.persistentModelID] === model {
                model.modelState.changedNames.formUnion(names)
                changedModels[ObjectIdentifier(model)] = model
            } else if deleted[model.persistentModelID] === model {
                // Deleted meanwhile: the changes come back with the model if it is inserted again.
                model.modelState.changedNames.formUnion(names)
            }
        }
    }

    /// `sequence`: the save's in ``savesInFlight`` (an async save), `nil` for a synchronous save
    /// (the newest write when it is applied). `cascaded`: what its deletes delete by cascade,
    /// worked out when it was made.
    func apply(
        _ result: DataStoreSaveChangesResult<DefaultSnapshot>, request: DataStoreSaveChangesRequest<DefaultSnapshot>,
        sequence: Int?, cascaded: [PersistentIdentifier]
    ) {
        // Only what the request carried is saved: `save() async` suspends, and code on the same
        // actor may insert, delete or change models meanwhile — those stay pending.
        // Each saved insert takes its permanent identifier, and as saved values what its request
        // carried, with the permanent identifiers of this save's inserts in its references
        // (encoding the model again cost as much as the rest of this function, and would take
        // values set while an async save was suspended as saved; those are tracked as changes).
        // References to this save's inserts are saved as their permanent identifiers, in inserts'
        // and updates' saved values alike (kept temporary in an update's, a cascade over the saved
        // values missed the insert it reached).
        func remapped(_ values: [String: AttributeValue]) -> [String: AttributeValue] {
            guard !result.remappedIdentifiers.isEmpty,
                values.values.contains(where: { !$0.referencedIdentifiers.isEmpty })
            else { return values }
            return values.mapValues { $0.mapReferences { result.remappedIdentifiers[$0] ?? $0 } }
        }
        func take(_ model: any PersistentModel, savedAs snapshot: DefaultSnapshot) {
            if let permanent = result.remappedIdentifiers[snapshot.persistentIdentifier] {
                registered[snapshot.persistentIdentifier] = nil
                model.modelState.assign(permanent)
                // An upsert maps onto an existing model: the instance just saved becomes the registered one.
                registered[permanent] = model
                if !model.modelState.changedNames.isEmpty { changedModels[ObjectIdentifier(model)] = model }
            }
            savedValues[model.persistentModelID] = remapped(snapshot.values)
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
            var deletedMeanwhile: [(any PersistentModel, DefaultSnapshot)] = []
            for snapshot in request.inserted {
                guard let model = pending[snapshot.persistentIdentifier] else {
                    if let model = insertsDeletedWhileBeingSaved.removeValue(forKey: snapshot.persistentIdentifier) {
                        deletedMeanwhile.append((model, snapshot))
                    }
                    continue
                }
                take(model, savedAs: snapshot)
                savedObjects.insert(ObjectIdentifier(model))
            }
            inserted.removeAll { savedObjects.contains(ObjectIdentifier($0)) }
            // Deleted while this save was suspended: stored now, so its delete is pending — unless
            // the store merged it (a unique key) into a model another instance here stands for,
            // which stays; then this instance just leaves the context.
            for (model, snapshot) in deletedMeanwhile {
                let permanent = result.remappedIdentifiers[snapshot.persistentIdentifier] ?? snapshot.persistentIdentifier
                if let holder = registered[permanent], holder !== model {
                    model.modelState.assign(permanent)
                    continue
                }
                take(model, savedAs: snapshot)
                registered[permanent] = nil
                changedModels[ObjectIdentifier(model)] = nil
                model.modelState.context = self
                deleted[permanent] = model
            }
        }
        for snapshot in request.deleted {
            let identifier = snapshot.persistentIdentifier
            savedValues[identifier] = nil
            deleted.removeValue(forKey: identifier)?.modelState.context = nil
            // Inserted again while this save deleted it: a pending insert now, with its identifier.
            if reinsertedWhileBeingDeleted.remove(identifier) != nil, let model = registered[identifier] {
                inserted.append(model)
                changedModels[ObjectIdentifier(model)] = nil
            }
        }
        // Models the store deleted by cascade leave the context as the requested deletes do
        // (left registered, a later edit of one would make every save fail with modelNotFound;
        // left in `deleted`, every later save would send their delete and fail so).
        for identifier in cascaded {
            if let model = registered.removeValue(forKey: identifier) {
                model.modelState.context = nil
                changedModels[ObjectIdentifier(model)] = nil
            }
            deleted.removeValue(forKey: identifier)?.modelState.context = nil
            savedValues[identifier] = nil
        }
        // What was saved is the last saved values with the changes this request carried. A
        // synchronous save is the newest write: its whole snapshots are the stored values. An
        // async save's are those it carried less what a save made meanwhile applied first (written
        // later, its values are the stored ones). Not the model's values now, which may have
        // changed meanwhile.
        if let sequence {
            for (identifier, values) in savesInFlight[sequence]?.updates ?? [:]
            where (registered[identifier] != nil || deleted[identifier] != nil) && savedValues[identifier] != nil {
                savedValues[identifier, default: [:]].merge(remapped(values)) { $1 }
            }
        } else {
            for snapshot in request.updated
            where registered[snapshot.persistentIdentifier] != nil || deleted[snapshot.persistentIdentifier] != nil {
                savedValues[snapshot.persistentIdentifier, default: [:]].merge(remapped(snapshot.values)) { $1 }
            }
        }
        // Saves still in flight were made before this one and written before it: this one's
        // values win over theirs when they are applied.
        for other in savesInFlight.keys where sequence.map({ other < $0 }) ?? true {
            for snapshot in request.updated {
                let identifier = snapshot.persistentIdentifier
                let names =
                    sequence == nil
                    ? Set(snapshot.values.keys) : request.changedAttributeNames[identifier] ?? Set(snapshot.values.keys)
                savesInFlight[other]?.superseded[identifier, default: []].formUnion(names)
                guard var theirs = savesInFlight[other]?.updates[identifier] else { continue }
                for name in names { theirs[name] = nil }
                savesInFlight[other]?.updates[identifier] = theirs
            }
        }
        // Models the store changed beyond the request (nullified references, upserts). Its
        // snapshot holds what earlier saves wrote; a property changed meanwhile (pending, or
        // carried by a save made after this one) keeps its value.
        for (identifier, snapshot) in result.snapshotsToReregister {
            guard let model = registered[identifier] else { continue }
            var pending = model.modelState.changedNames
            // Written by a save applied first: the stored values, already saved here.
            var superseded: Set<String> = []
            if let sequence {
                for (other, save) in savesInFlight where other > sequence {
                    pending.formUnion(save.names[ObjectIdentifier(model)] ?? [])
                }
                superseded = savesInFlight[sequence]?.superseded[identifier] ?? []
                pending.formUnion(superseded)
            }
            if pending.isEmpty {
                try? fill(model, with: snapshot.values)
                savedValues[identifier] = encode(model)
            } else {
                try? fill(model, with: snapshot.values.filter { !pending.contains($0.key) }, keepingPendingChanges: true)
                var saved = snapshot.values
                for name in superseded { saved[name] = savedValues[identifier]?[name] }
                savedValues[identifier] = saved
            }
        }
        // Every identifier with saved values is registered or deleted, pending (checked in debug
        // builds only: it is a walk over every registered model, which a save must not cost).
        assert(
            savedValues.keys.allSatisfy { registered[$0] != nil || deleted[$0] != nil },
            "saved values of unregistered models")
        // What is left pending (made while this save was in flight) is autosaved like any change.
        if !inserted.isEmpty || !deleted.isEmpty || !changedModels.isEmpty { changeMade() }
    }

    /// The models the store's `.cascade` rules delete along with `requested`: the store cascades
    /// over its stored values, which are the saved values the context holds. Each identifier is
    /// visited once.
    private func cascadedDeletes(of requested: [PersistentIdentifier]) -> [PersistentIdentifier] {
        if requested.isEmpty { return [] }
        var seen = Set(requested)
        var worklist = requested
        var cascaded: [PersistentIdentifier] = []
        while let identifier = worklist.popLast() {
            // Over what the store holds when this save is resolved: the saved values with what the
            // saves in flight carry (written before it).
            guard let entity = container.schema.entity(named: identifier.entityName),
                let values = savesInFlight.isEmpty ? savedValues[identifier] : savedValuesWithSavesInFlight(of: identifier)
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
