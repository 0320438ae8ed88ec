import Foundation

extension ModelContext {
    /// The models matching `descriptor`. When the store declines the predicate or sort, the
    /// context evaluates predicate, sort, offset and limit itself (DECISIONS.md D9). With
    /// `includePendingChanges`, unsaved inserts take part and unsaved deletes do not.
    public func fetch<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) throws -> [T] {
        let pendingInserts = descriptor.includePendingChanges ? inserted.compactMap { $0 as? T } : []
        let pendingDeletes = descriptor.includePendingChanges ? deleted.filter { $0.key.entityName == T.entityName } : [:]
        let mustFilterHere = !pendingInserts.isEmpty || !pendingDeletes.isEmpty
        var evaluatesHere = mustFilterHere
        var result: DataStoreFetchResult<T, DefaultSnapshot>
        do {
            guard !mustFilterHere else { throw DataStoreError.preferInMemoryFilter }
            result = try container.store.fetch(DataStoreFetchRequest(descriptor: descriptor))
        } catch let error as DataStoreError where error == .preferInMemoryFilter || error == .preferInMemorySort {
            evaluatesHere = true
            result = try container.store.fetch(DataStoreFetchRequest(descriptor: FetchDescriptor<T>()))
        }
        var models: [T] = try materialize(result.fetchedSnapshots, related: result.relatedSnapshots)
        guard evaluatesHere else { return models }
        models.removeAll { pendingDeletes[$0.persistentModelID] != nil }
        models += pendingInserts
        if let predicate = descriptor.predicate { models = try models.filter { try predicate.evaluate($0) } }
        if !descriptor.sortBy.isEmpty { models.sort(using: descriptor.sortBy) }
        let start = min(models.count, max(0, descriptor.fetchOffset ?? 0))
        let end = descriptor.fetchLimit.map { min(models.count, start + max(0, $0)) } ?? models.count
        return Array(models[start..<end])
    }

    /// How many models match; the same rules as ``fetch(_:)``.
    public func fetchCount<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) throws -> Int {
        if descriptor.includePendingChanges && (inserted.contains { $0 is T } || deleted.keys.contains { $0.entityName == T.entityName }) {
            return try fetch(descriptor).count
        }
        do { return try container.store.fetchCount(DataStoreFetchRequest(descriptor: descriptor)) } catch let error as DataStoreError
            where error == .preferInMemoryFilter || error == .preferInMemorySort {
            return try fetch(descriptor).count
        }
    }

    /// The identifiers of the matching models; the same rules as ``fetch(_:)``.
    public func fetchIdentifiers<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) throws -> [PersistentIdentifier] {
        if descriptor.includePendingChanges && (inserted.contains { $0 is T } || deleted.keys.contains { $0.entityName == T.entityName }) {
            return try fetch(descriptor).map(\.persistentModelID)
        }
        do { return try container.store.fetchIdentifiers(DataStoreFetchRequest(descriptor: descriptor)) } catch let error as DataStoreError
            where error == .preferInMemoryFilter || error == .preferInMemorySort {
            return try fetch(descriptor).map(\.persistentModelID)
        }
    }

    /// Instances for snapshots: registered ones are reused (keeping their unsaved changes); new
    /// ones are made first for every snapshot and then filled, so cycles need no recursion.
    func materialize<T: PersistentModel>(_ snapshots: [DefaultSnapshot], related: [PersistentIdentifier: DefaultSnapshot]) throws -> [T] {
        var fresh: [(any PersistentModel, [String: AttributeValue])] = []
        for snapshot in snapshots + Array(related.values) {
            let identifier = snapshot.persistentIdentifier
            guard registered[identifier] == nil, deleted[identifier] == nil else { continue }
            guard let type = container.modelTypes[identifier.entityName] else { throw ModelError.unknownEntity(identifier.entityName) }
            let model = type.init()
            model.modelState.assign(identifier)
            model.modelState.context = self
            registered[identifier] = model
            savedValues[identifier] = snapshot.values
            fresh.append((model, snapshot.values))
        }
        for (model, values) in fresh { try fill(model, with: values) }
        return snapshots.compactMap { (registered[$0.persistentIdentifier] ?? deleted[$0.persistentIdentifier]) as? T }
    }
}
