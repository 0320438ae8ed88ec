import Foundation

/// What both stores do for a fetch once they hold a ``FoldState``: decline predicates and sorts
/// (the context then evaluates them, and applies limit and offset too — DECISIONS.md D9), return
/// rows in insertion order within the descriptor's window, and load relationships eagerly.
enum StoreFetching {
    /// Throws `preferInMemoryFilter` / `preferInMemorySort` for what the stores do not push down.
    static func declineUnsupported<T>(_ descriptor: FetchDescriptor<T>) throws {
        if descriptor.predicate != nil { throw DataStoreError.preferInMemoryFilter }
        if !descriptor.sortBy.isEmpty { throw DataStoreError.preferInMemorySort }
    }

    /// The rows inside `fetchOffset` and `fetchLimit`.
    static func window<T, Element>(_ rows: [Element], _ descriptor: FetchDescriptor<T>) -> ArraySlice<Element> {
        let start = min(rows.count, max(0, descriptor.fetchOffset ?? 0))
        let end = descriptor.fetchLimit.map { min(rows.count, start + max(0, $0)) } ?? rows.count
        return rows[start..<end]
    }

    /// How many rows the window holds out of `count`.
    static func windowCount<T>(_ count: Int, _ descriptor: FetchDescriptor<T>) -> Int {
        let afterOffset = max(0, count - max(0, descriptor.fetchOffset ?? 0))
        return min(afterOffset, descriptor.fetchLimit.map { max(0, $0) } ?? afterOffset)
    }
}

extension FoldState {
    /// A store's fetch over this state: snapshots of the entity in insertion order within the
    /// window, with everything they reach (the caller has declined predicates and sorts).
    func fetchResult<T: PersistentModel>(_ request: DataStoreFetchRequest<T>, storeIdentifier: String)
        -> DataStoreFetchResult<T, DefaultSnapshot> {
        let snapshots = StoreFetching.window(rows(of: T.entityName), request.descriptor).map { primaryKey, row in
            DefaultSnapshot(persistentIdentifier: .identifier(for: storeIdentifier, entityName: T.entityName,
                                                              primaryKey: primaryKey),
                            values: row.values)
        }
        return DataStoreFetchResult(descriptor: request.descriptor, fetchedSnapshots: snapshots,
                                    relatedSnapshots: relatedSnapshots(to: snapshots))
    }

    /// A store's `fetchCount` over this state.
    func fetchCount<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) -> Int {
        StoreFetching.windowCount(count(of: T.entityName), request.descriptor)
    }

    /// A store's `fetchIdentifiers` over this state.
    func fetchIdentifiers<T: PersistentModel>(_ request: DataStoreFetchRequest<T>, storeIdentifier: String)
        -> [PersistentIdentifier] {
        StoreFetching.window(rows(of: T.entityName), request.descriptor).map {
            .identifier(for: storeIdentifier, entityName: T.entityName, primaryKey: $0.0)
        }
    }

    /// Snapshots of every model reachable from `snapshots` through references (relationships are
    /// loaded eagerly), bounded by the number of models in the state.
    func relatedSnapshots(to snapshots: [DefaultSnapshot]) -> [PersistentIdentifier: DefaultSnapshot] {
        var related: [PersistentIdentifier: DefaultSnapshot] = [:]
        var seen = Set(snapshots.map(\.persistentIdentifier))
        var worklist = snapshots.flatMap { $0.values.values.flatMap(\.referencedIdentifiers) }
        while let next = worklist.popLast() {
            guard seen.insert(next).inserted, let row = row(next) else { continue }
            related[next] = DefaultSnapshot(persistentIdentifier: next, values: row.values)
            worklist += row.values.values.flatMap(\.referencedIdentifiers)
        }
        return related
    }
}
