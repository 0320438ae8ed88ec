import Foundation
import LogStoreEngine

extension LogStore {
    /// Fetches the published snapshots of an entity, in insertion order. A predicate or sort is
    /// declined (`preferInMemoryFilter`/`preferInMemorySort`): the context evaluates it and, as
    /// then the store ignores them, applies limit and offset too (DECISIONS.md D9).
    public func fetch<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws -> DataStoreFetchResult<T, DefaultSnapshot> {
        let descriptor = request.descriptor
        try declineUnsupported(descriptor)
        let state = try publishedState(for: T.entityName)
        let rows = window(state.rows(of: T.entityName), descriptor)
        let snapshots = rows.map { primaryKey, row in
            DefaultSnapshot(persistentIdentifier: .identifier(for: identifier, entityName: T.entityName, primaryKey: primaryKey),
                            values: row.values)
        }
        return DataStoreFetchResult(descriptor: descriptor, fetchedSnapshots: snapshots,
                                    relatedSnapshots: related(to: snapshots, in: state))
    }

    public func fetchCount<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws -> Int {
        try declineUnsupported(request.descriptor)
        let count = try publishedState(for: T.entityName).count(of: T.entityName)
        let afterOffset = max(0, count - (request.descriptor.fetchOffset ?? 0))
        return min(afterOffset, request.descriptor.fetchLimit ?? afterOffset)
    }

    public func fetchIdentifiers<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws -> [PersistentIdentifier] {
        try declineUnsupported(request.descriptor)
        let state = try publishedState(for: T.entityName)
        return window(state.rows(of: T.entityName), request.descriptor).map {
            .identifier(for: identifier, entityName: T.entityName, primaryKey: $0.0)
        }
    }

    /// The published snapshot of one model, or `nil`.
    public func snapshot(for persistentIdentifier: PersistentIdentifier) -> DefaultSnapshot? {
        inner.withLock { $0.published.row(persistentIdentifier) }.map {
            DefaultSnapshot(persistentIdentifier: persistentIdentifier, values: $0.values)
        }
    }

    /// Every published model of every entity, keyed by entity name, in insertion order.
    public func allSnapshots() -> [String: [DefaultSnapshot]] {
        let state = inner.withLock { $0.published }
        var result: [String: [DefaultSnapshot]] = [:]
        for entity in schema.entities {
            result[entity.name] = state.rows(of: entity.name).map {
                DefaultSnapshot(persistentIdentifier: .identifier(for: identifier, entityName: entity.name, primaryKey: $0.0),
                                values: $0.1.values)
            }
        }
        return result
    }

    public func erase() throws {
        throw DataStoreError.unsupportedFeature
    }

    private func declineUnsupported<T>(_ descriptor: FetchDescriptor<T>) throws {
        if descriptor.predicate != nil { throw DataStoreError.preferInMemoryFilter }
        if !descriptor.sortBy.isEmpty { throw DataStoreError.preferInMemorySort }
    }

    private func publishedState(for entityName: String) throws -> FoldState {
        guard schema.entity(named: entityName) != nil else { throw LogStoreError.unknownEntity(entityName) }
        return inner.withLock { $0.published }
    }

    private func window<T, Element>(_ rows: [Element], _ descriptor: FetchDescriptor<T>) -> ArraySlice<Element> {
        let start = min(rows.count, max(0, descriptor.fetchOffset ?? 0))
        let end = descriptor.fetchLimit.map { min(rows.count, start + max(0, $0)) } ?? rows.count
        return rows[start..<end]
    }

    /// Snapshots of every model reachable from `snapshots` through references (relationships are
    /// loaded eagerly), bounded by the number of models in the store.
    private func related(to snapshots: [DefaultSnapshot], in state: FoldState) -> [PersistentIdentifier: DefaultSnapshot] {
        var related: [PersistentIdentifier: DefaultSnapshot] = [:]
        var seen = Set(snapshots.map(\.persistentIdentifier))
        var worklist = snapshots.flatMap { $0.values.values.flatMap(\.referencedIdentifiers) }
        while let next = worklist.popLast() {
            guard seen.insert(next).inserted, let row = state.row(next) else { continue }
            let snapshot = DefaultSnapshot(persistentIdentifier: next, values: row.values)
            related[next] = snapshot
            worklist += row.values.values.flatMap(\.referencedIdentifiers)
        }
        return related
    }
}
