import Foundation
import LogStoreEngine

extension LogStore {
    /// Fetches the published snapshots of an entity, in insertion order. A predicate or sort is
    /// declined (`preferInMemoryFilter`/`preferInMemorySort`): the context evaluates it and, as
    /// then the store ignores them, applies limit and offset too (DECISIONS.md D9).
    public func fetch<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws -> DataStoreFetchResult<T, DefaultSnapshot> {
        let descriptor = request.descriptor
        try StoreFetching.declineUnsupported(descriptor)
        let state = try publishedState(for: T.entityName)
        let rows = StoreFetching.window(state.rows(of: T.entityName), descriptor)
        let snapshots = rows.map { primaryKey, row in
            DefaultSnapshot(persistentIdentifier: .identifier(for: identifier, entityName: T.entityName, primaryKey: primaryKey),
                            values: row.values)
        }
        return DataStoreFetchResult(descriptor: descriptor, fetchedSnapshots: snapshots,
                                    relatedSnapshots: state.relatedSnapshots(to: snapshots))
    }

    public func fetchCount<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws -> Int {
        try StoreFetching.declineUnsupported(request.descriptor)
        return StoreFetching.windowCount(try publishedState(for: T.entityName).count(of: T.entityName), request.descriptor)
    }

    public func fetchIdentifiers<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws -> [PersistentIdentifier] {
        try StoreFetching.declineUnsupported(request.descriptor)
        let state = try publishedState(for: T.entityName)
        return StoreFetching.window(state.rows(of: T.entityName), request.descriptor).map {
            .identifier(for: identifier, entityName: T.entityName, primaryKey: $0.0)
        }
    }

    /// The published snapshot of one model, or `nil`.
    public func snapshot(for persistentIdentifier: PersistentIdentifier) -> DefaultSnapshot? {
        refreshAfterLogFailure()
        return inner.withLock { $0.published.row(persistentIdentifier) }.map {
            DefaultSnapshot(persistentIdentifier: persistentIdentifier, values: $0.values)
        }
    }

    /// Every published model of every entity, keyed by entity name, in insertion order.
    public func allSnapshots() -> [String: [DefaultSnapshot]] {
        refreshAfterLogFailure()
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

    private func publishedState(for entityName: String) throws -> FoldState {
        guard schema.entity(named: entityName) != nil else { throw LogStoreError.unknownEntity(entityName) }
        refreshAfterLogFailure()
        return inner.withLock { $0.published }
    }
}
