import Foundation

extension ModelContext {
    /// The models matching `descriptor`. The store evaluates predicate, sort, offset and limit
    /// when it recognises them (push-down, DECISIONS.md D9); when it declines the predicate or
    /// sort, the context evaluates predicate, sort, offset and limit itself with
    /// `Predicate.evaluate` and `SortDescriptor`. With `includePendingChanges`, unsaved inserts
    /// take part, unsaved deletes do not, and unsaved changes of registered models count (the
    /// context then evaluates in memory, over the models as they are).
    ///
    /// Registered models are returned as the same instances, refreshed: what another context or
    /// another process saved since this context last saw a model replaces the values it has no
    /// pending change of (observers see those sets); its pending changes stay, and win at the
    /// next save.
    public func fetch<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) throws -> [T] {
        let pendingInserts = descriptor.includePendingChanges ? inserted.compactMap { $0 as? T } : []
        let pendingDeletes =
            descriptor.includePendingChanges ? deleted.filter { $0.key.entityName == T.entityName } : [:]
        let mustFilterHere = mustEvaluateInMemory(descriptor)
        var evaluatesHere = mustFilterHere
        var result: DataStoreFetchResult<T, DefaultSnapshot>
        do {
            guard !mustFilterHere else { throw DataStoreError.preferInMemoryFilter }
            result = try container.store.fetch(DataStoreFetchRequest(descriptor: descriptor))
        } catch let error as DataStoreError where error == .preferInMemoryFilter || error == .preferInMemorySort {
            evaluatesHere = true
            // Narrowed by the saved values only when no unsaved change of `T` takes part.
            result = try fetchCandidates(descriptor, narrowed: !mustFilterHere)
        }
        // A store is code the context does not control: whatever it returns, the context hands
        // back only models of the entity asked for, and never more than the limit.
        let fetched = result.fetchedSnapshots.filter { $0.persistentIdentifier.entityName == T.entityName }
        var models: [T] = try materialize(fetched, related: result.relatedSnapshots)
        guard evaluatesHere else {
            if let limit = descriptor.fetchLimit, models.count > max(0, limit) { models.removeLast(models.count - max(0, limit)) }
            return models
        }
        models.removeAll { pendingDeletes[$0.persistentModelID] != nil }
        models += pendingInserts
        if let predicate = descriptor.predicate { models = try models.filter { try predicate.evaluate($0) } }
        if !descriptor.sortBy.isEmpty { models.sort(using: descriptor.sortBy) }
        let start = min(models.count, max(0, descriptor.fetchOffset ?? 0))
        let end = descriptor.fetchLimit.map { min(models.count, start + max(0, $0)) } ?? models.count
        return Array(models[start..<end])
    }

    /// What the context evaluates a declined descriptor over: with `narrowed`, the rows whose
    /// saved values match the predicate's `&&` terms the store recognises (LogStore filters by
    /// those and returns a superset); otherwise, or when the store declines that too, every row
    /// of the entity.
    private func fetchCandidates<T: PersistentModel>(_ descriptor: FetchDescriptor<T>, narrowed: Bool) throws
        -> DataStoreFetchResult<T, DefaultSnapshot>
    {
        // Only stores that fetch through a FoldState know `candidatesOnly`; any other store just
        // declined this predicate and would be asked the same question again.
        if narrowed, descriptor.predicate != nil, container.store.base is any CandidateFetching {
            var candidates = FetchDescriptor<T>(predicate: descriptor.predicate)
            candidates.candidatesOnly = true
            return try container.store.fetch(DataStoreFetchRequest(descriptor: candidates))
        }
        return try container.store.fetch(DataStoreFetchRequest(descriptor: FetchDescriptor<T>()))
    }

    /// Whether unsaved inserts, deletes or changes of `T` take part in the fetch, so the store's
    /// view (saved values only) is not enough.
    func mustEvaluateInMemory<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) -> Bool {
        guard descriptor.includePendingChanges else { return false }
        if inserted.contains(where: { $0 is T }) || deleted.keys.contains(where: { $0.entityName == T.entityName }) {
            return true
        }
        // Only a predicate or a sort reads values: without them, changed values do not matter.
        guard descriptor.predicate != nil || !descriptor.sortBy.isEmpty else { return false }
        if changedModels.values.contains(where: { $0 is T && !changedValues(of: $0).isEmpty }) { return true }
        guard hasUntrackedModels else { return false }
        return registered.contains { identifier, model in
            identifier.entityName == T.entityName && !identifier.isTemporary && encode(model) != savedValues[identifier]
        }
    }

    /// How many models match; the same rules as ``fetch(_:)``.
    public func fetchCount<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) throws -> Int {
        if mustEvaluateInMemory(descriptor) { return try fetch(descriptor).count }
        do { return try container.store.fetchCount(DataStoreFetchRequest(descriptor: descriptor)) } catch let error
            as DataStoreError
            where error == .preferInMemoryFilter || error == .preferInMemorySort
        {
            return try fetch(descriptor).count
        }
    }

    /// The identifiers of the matching models; the same rules as ``fetch(_:)``.
    public func fetchIdentifiers<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) throws -> [PersistentIdentifier]
    {
        if mustEvaluateInMemory(descriptor) { return try fetch(descriptor).map(\.persistentModelID) }
        do { return try container.store.fetchIdentifiers(DataStoreFetchRequest(descriptor: descriptor)) } catch let
            error as DataStoreError
            where error == .preferInMemoryFilter || error == .preferInMemorySort
        {
            return try fetch(descriptor).map(\.persistentModelID)
        }
    }

    /// Calls `block` with each matching model, materialising `batchSize` models at a time
    /// (SwiftData's `enumerate(_:batchSize:block:)`): the store finds the matching identifiers
    /// (predicate, sort, offset and limit pushed down), then each batch is fetched, handed to
    /// `block`, and — when `block` changed none of it — dropped from the context again, so memory
    /// stays bounded by the batch. A batch that was changed stays registered for the next save.
    /// A model deleted by another save between batches is skipped. When the fetch must be
    /// evaluated in memory (unsaved changes of `T`, or a predicate or sort the store declines),
    /// this is ``fetch(_:)`` followed by a loop.
    public func enumerate<T: PersistentModel>(
        _ descriptor: FetchDescriptor<T>, batchSize: Int = 5000,
        block: (T) throws -> Void
    ) throws {
        let identifiers: [PersistentIdentifier]
        do {
            guard !mustEvaluateInMemory(descriptor) else { throw DataStoreError.preferInMemoryFilter }
            identifiers = try container.store.fetchIdentifiers(DataStoreFetchRequest(descriptor: descriptor))
        } catch let error as DataStoreError where error == .preferInMemoryFilter || error == .preferInMemorySort {
            for model in try fetch(descriptor) { try block(model) }
            return
        }
        let batchSize = max(1, batchSize)
        var start = 0
        while start < identifiers.count {
            let batch = Array(identifiers[start..<min(identifiers.count, start + batchSize)])
            start += batch.count
            let (fetched, related) = try container.store.snapshots(of: T.self, batch)
            let before = Set(registered.keys)
            let models: [T] = try materialize(fetched, related: related)
            for model in models { try block(model) }
            // Drop what this batch registered, unless the block changed any of it.
            let fresh = registered.keys.filter { !before.contains($0) }
            let changed = fresh.contains { identifier in
                registered[identifier].map { encode($0) != savedValues[identifier] } ?? true
            }
            guard !changed else { continue }
            for identifier in fresh {
                registered[identifier]?.modelState.context = nil
                registered[identifier] = nil
                savedValues[identifier] = nil
            }
        }
    }

    /// The model with this identifier, as SwiftData's `model(for:)`: the instance this context
    /// holds (with its unsaved changes; a model deleted and not yet saved too), else one filled
    /// from the store's saved values and registered from then on, with the models it refers to.
    ///
    /// Otherwise — an identifier the store does not hold (never saved, deleted since, another
    /// store's, a temporary one of another context) or a store that could not be read (closed,
    /// failed; the call cannot throw) — the answer is a new instance with that identifier, no
    /// stored values and no context, as SwiftData answers with a fault nothing backs: reading a
    /// required property that has no initial value traps, naming the property and why; optional
    /// properties read `nil` and properties with initial values read those. It is made anew on
    /// each call, and a save never inserts it: a reference to it fails the save (a missing
    /// reference, or another store's identifier) — unless the store holds the model after all (it
    /// could not be read when the instance was made): then the reference is saved, and the
    /// instance itself still has no values. An identifier of an entity this container's schema
    /// lacks traps.
    /// ``registeredModel(for:)`` and a fetch with `#Predicate { $0.persistentModelID == id }` are
    /// the ways that can answer "none".
    public func model(for persistentModelID: PersistentIdentifier) -> any PersistentModel {
        if let model = registered[persistentModelID] ?? deleted[persistentModelID] { return model }
        guard let type = container.modelTypes[persistentModelID.entityName] else {
            preconditionFailure(
                "model(for: \(persistentModelID)): the container's schema has no entity "
                    + "\(persistentModelID.entityName)")
        }
        let reason: String
        if persistentModelID.isTemporary {
            reason = "a temporary identifier this context does not hold"
        } else if persistentModelID.storeIdentifier != container.store.identifier {
            reason = "an identifier of another store"
        } else {
            do {
                if let model = try storedModel(type, persistentModelID) { return model }
                reason = "the store holds no such model (never saved, or deleted)"
            } catch {
                reason = "the store could not be read: \(error)"
            }
        }
        let placeholder = type.init()
        placeholder.modelState.assign(persistentModelID)
        placeholder.modelState.unbackedReason = reason
        return placeholder
    }

    /// The model of `identifier` from the store's saved values, registered; `nil` when the store
    /// does not hold it.
    private func storedModel<T: PersistentModel>(_ type: T.Type, _ identifier: PersistentIdentifier) throws -> T? {
        let (fetched, related) = try container.store.snapshots(of: T.self, [identifier])
        guard !fetched.isEmpty else { return nil }
        let models: [T] = try materialize(fetched, related: related)
        return models.first
    }

    /// Instances for snapshots: registered ones are reused (keeping their unsaved changes); new
    /// ones are made first for every snapshot and then filled, so cycles need no recursion.
    func materialize<T: PersistentModel>(
        _ snapshots: [DefaultSnapshot], related: [PersistentIdentifier: DefaultSnapshot]
    ) throws -> [T] {
        var fresh: [(any PersistentModel, [String: AttributeValue])] = []
        var refreshed: [(any PersistentModel, [String: AttributeValue])] = []
        for snapshot in snapshots + Array(related.values) {
            let identifier = snapshot.persistentIdentifier
            if let model = registered[identifier] {
                if let saved = savedValues[identifier], saved != snapshot.values { refreshed.append((model, snapshot.values)) }
                continue
            }
            guard deleted[identifier] == nil else { continue }
            guard let type = container.modelTypes[identifier.entityName] else {
                throw ModelError.unknownEntity(identifier.entityName)
            }
            let model = type.init()
            if !type._usesModelStorage { hasUntrackedModels = true }
            model.modelState.assign(identifier)
            model.modelState.context = self
            registered[identifier] = model
            savedValues[identifier] = snapshot.values
            fresh.append((model, snapshot.values))
        }
        do {
            for (model, values) in fresh { try fill(model, with: values) }
        } catch {
            // Nothing half-filled stays registered: the next fetch must not return it silently.
            for (model, _) in fresh {
                registered[model.persistentModelID] = nil
                savedValues[model.persistentModelID] = nil
                model.modelState.context = nil
            }
            throw error
        }
        for (model, values) in refreshed { refresh(model, with: values) }
        return snapshots.compactMap { (registered[$0.persistentIdentifier] ?? deleted[$0.persistentIdentifier]) as? T }
    }

    /// A registered model whose stored values changed since this context last saw them (another
    /// context's or another process's save): the attributes it has no pending change of take the
    /// stored values (observers see the sets); pending changes stay and win at the next save
    /// (DECISIONS.md D11). The saved values become the stored ones, except for a property whose
    /// new value cannot be set (a reference to a model not in this fetch): it keeps the old one,
    /// so the next save does not write the old value back over the other save.
    private func refresh(_ model: any PersistentModel, with stored: [String: AttributeValue]) {
        let identifier = model.persistentModelID
        guard var saved = savedValues[identifier] else { return }
        // Pending: what differs from the saved values (a property set to its saved value is not a
        // change), and what a save in flight carries.
        var pending = namesBeingSaved(of: model)
        if type(of: model)._usesModelStorage {
            pending.formUnion(changedValues(of: model).keys)
        } else {
            let current = encode(model)
            pending.formUnion(current.keys.filter { current[$0] != saved[$0] })
        }
        for (name, value) in stored where saved[name] != value {
            if pending.contains(name) {
                saved[name] = value
            } else if (try? fill(model, with: [name: value], keepingPendingChanges: true)) != nil {
                saved[name] = value
            }
        }
        savedValues[identifier] = saved
    }
}
