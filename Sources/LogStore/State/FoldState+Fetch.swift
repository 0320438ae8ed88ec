import Foundation

/// What both stores do for a fetch once they hold a ``FoldState``: evaluate the predicate and the
/// sort themselves when they recognise them (``PredicatePushDown``; sorts on attributes through
/// `SortDescriptor.compare`), and otherwise decline them — then the context evaluates predicate,
/// sort, limit and offset itself (DECISIONS.md D9). Rows come in insertion order unless sorted;
/// relationships are loaded eagerly.
enum StoreFetching {
    /// How a store runs one descriptor.
    struct Plan<T: PersistentModel> {
        var filter: PredicatePushDown.Filter?
        var sortBy: [SortDescriptor<T>]
        /// The attribute properties the sort reads, to fill the stand-in instances it compares.
        var sortProperties: [ModelProperty<T>]
        var offset: Int
        var limit: Int?
    }

    /// The plan for `descriptor`, or `preferInMemoryFilter` / `preferInMemorySort` for a
    /// predicate or sort the store does not recognise.
    static func plan<T: PersistentModel>(_ descriptor: FetchDescriptor<T>) throws -> Plan<T> {
        var filter: PredicatePushDown.Filter?
        if descriptor.candidatesOnly {
            // The context evaluates the whole predicate over what comes back: filter by the
            // terms recognised, leave the order and the window to it.
            let filter = descriptor.predicate.flatMap { PredicatePushDown.compileConjuncts($0) }
            return Plan(filter: filter, sortBy: [], sortProperties: [], offset: 0, limit: nil)
        }
        if let predicate = descriptor.predicate {
            guard let compiled = PredicatePushDown.compile(predicate) else { throw DataStoreError.preferInMemoryFilter }
            filter = compiled
        }
        var sortProperties: [ModelProperty<T>] = []
        for sort in descriptor.sortBy {
            guard let keyPath = sort.keyPath,
                let property = T.schemaProperties.first(where: {
                    $0.attribute != nil && ($0.keyPath as AnyKeyPath) == keyPath as AnyKeyPath
                })
            else { throw DataStoreError.preferInMemorySort }
            sortProperties.append(property)
        }
        return Plan(
            filter: filter, sortBy: descriptor.sortBy, sortProperties: sortProperties,
            offset: max(0, descriptor.fetchOffset ?? 0), limit: descriptor.fetchLimit.map { max(0, $0) })
    }

    /// The rows inside `fetchOffset` and `fetchLimit`.
    static func window<Element>(_ rows: [Element], offset: Int, limit: Int?) -> ArraySlice<Element> {
        let start = min(rows.count, offset)
        let end = limit.map { min(rows.count, start + $0) } ?? rows.count
        return rows[start..<end]
    }

    /// How many rows the window holds out of `count`.
    static func windowCount(_ count: Int, offset: Int, limit: Int?) -> Int {
        let afterOffset = max(0, count - offset)
        return min(afterOffset, limit ?? afterOffset)
    }
}

/// A store whose fetches go through ``FoldState/fetchResult(_:storeIdentifier:)`` and therefore
/// answer ``FetchDescriptor/candidatesOnly`` requests (never declining them).
protocol CandidateFetching: AnyObject {}

extension LogStore: CandidateFetching {}
extension ArchiveStore: CandidateFetching {}
extension MigrationStagingStore: CandidateFetching {}

extension FoldState {
    /// The matching rows of `T`'s entity, sorted, within the window.
    func fetchRows<T: PersistentModel>(_ plan: StoreFetching.Plan<T>, storeIdentifier: String) -> [(UUID, Row)] {
        let rows = rows(of: T.entityName)
        // Not optional: unwrapping an optional closure per row retained and released its context.
        let matches = plan.filter.map { $0.makeMatcher() } ?? { _ in true }
        guard !plan.sortBy.isEmpty else {
            // Insertion order: stop as soon as the window is full.
            var result: [(UUID, Row)] = []
            var skipped = 0
            if plan.limit == 0 { return [] }
            rows.scan { primaryKey, row in
                guard matches(row.values) else { return true }
                if skipped < plan.offset {
                    skipped += 1
                    return true
                }
                result.append((primaryKey, row))
                if let limit = plan.limit, result.count >= limit { return false }
                return true
            }
            return result
        }
        // Sorted with the descriptors themselves (SortDescriptor.compare): on stand-in instances
        // holding only the sorted attributes, in insertion order, so ties keep insertion order
        // exactly as the context's in-memory sort does.
        var standIns: [T] = []
        for (primaryKey, row) in rows where matches(row.values) {
            let model = T()
            model.modelState.assign(.permanent(for: storeIdentifier, entityName: T.entityName, primaryKey: primaryKey))
            for property in plan.sortProperties {
                if let value = row.values[property.name] { try? property.write(model, value) { _ in nil } }
            }
            standIns.append(model)
        }
        standIns.sort(using: plan.sortBy)
        return StoreFetching.window(standIns, offset: plan.offset, limit: plan.limit).map { model in
            let primaryKey = model.persistentModelID.primaryKey
            return (primaryKey, rows[primaryKey]!)
        }
    }

    /// A store's fetch over this state.
    func fetchResult<T: PersistentModel>(_ request: DataStoreFetchRequest<T>, storeIdentifier: String) throws
        -> DataStoreFetchResult<T, DefaultSnapshot>
    {
        let plan = try StoreFetching.plan(request.descriptor)
        let snapshots = fetchRows(plan, storeIdentifier: storeIdentifier).map { primaryKey, row in
            DefaultSnapshot(
                persistentIdentifier: .permanent(
                    for: storeIdentifier, entityName: T.entityName,
                    primaryKey: primaryKey),
                values: row.values.dictionary)
        }
        return DataStoreFetchResult(
            descriptor: request.descriptor, fetchedSnapshots: snapshots,
            relatedSnapshots: relatedSnapshots(to: snapshots, storeIdentifier: storeIdentifier))
    }

    /// A store's `fetchCount` over this state (no sort needed to count).
    func fetchCount<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws -> Int {
        let plan = try StoreFetching.plan(request.descriptor)
        let rows = rows(of: T.entityName)
        var count = rows.count
        if let filter = plan.filter {
            let matches = filter.makeMatcher()
            count = 0
            rows.scan { _, row in
                if matches(row.values) { count += 1 }
                return true
            }
        }
        return StoreFetching.windowCount(count, offset: plan.offset, limit: plan.limit)
    }

    /// A store's `fetchIdentifiers` over this state.
    func fetchIdentifiers<T: PersistentModel>(_ request: DataStoreFetchRequest<T>, storeIdentifier: String) throws
        -> [PersistentIdentifier]
    {
        let plan = try StoreFetching.plan(request.descriptor)
        return fetchRows(plan, storeIdentifier: storeIdentifier).map {
            .permanent(for: storeIdentifier, entityName: T.entityName, primaryKey: $0.0)
        }
    }

    /// The snapshots of these models (those of store `storeIdentifier` in the state, in the given
    /// order) and of every model they refer to (``DataStore/fetch(_:of:)``). Another store's
    /// identifier names no model here, whatever its primary key (`logstore import` keeps keys).
    func fetchResult<T: PersistentModel>(
        _ identifiers: [PersistentIdentifier], of type: T.Type, storeIdentifier: String
    ) -> DataStoreFetchResult<T, DefaultSnapshot> {
        let fetched = identifiers.compactMap { identifier -> DefaultSnapshot? in
            guard identifier.storeIdentifier == storeIdentifier else { return nil }
            return row(identifier).map { DefaultSnapshot(persistentIdentifier: identifier, values: $0.values.dictionary) }
        }
        return DataStoreFetchResult(
            descriptor: FetchDescriptor<T>(), fetchedSnapshots: fetched,
            relatedSnapshots: relatedSnapshots(to: fetched, storeIdentifier: storeIdentifier))
    }

    /// Snapshots of every model reachable from `snapshots` through references (relationships are
    /// loaded eagerly), bounded by the number of models in the state.
    /// Only references of store `storeIdentifier` are followed (an archive saved before a save
    /// refused another store's references may hold one: it names no model here).
    func relatedSnapshots(to snapshots: [DefaultSnapshot], storeIdentifier: String)
        -> [PersistentIdentifier: DefaultSnapshot]
    {
        var related: [PersistentIdentifier: DefaultSnapshot] = [:]
        var seen = Set(snapshots.map(\.persistentIdentifier))
        var worklist = snapshots.flatMap { $0.values.values.flatMap(\.referencedIdentifiers) }
        while let next = worklist.popLast() {
            guard next.storeIdentifier == storeIdentifier, seen.insert(next).inserted, let row = row(next) else {
                continue
            }
            related[next] = DefaultSnapshot(persistentIdentifier: next, values: row.values.dictionary)
            worklist += row.values.storedValues.flatMap(\.referencedIdentifiers)
        }
        return related
    }
}
