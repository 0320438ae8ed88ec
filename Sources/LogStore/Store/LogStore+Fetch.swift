import Foundation
import LogStoreEngine

extension LogStore {
    /// Fetches the published snapshots of an entity. Recognised predicates and attribute sorts
    /// are evaluated here (`PredicatePushDown`), then offset and limit; others are declined
    /// (`preferInMemoryFilter`/`preferInMemorySort`): the context evaluates them and, as then
    /// the store ignores them, applies limit and offset too (DECISIONS.md D9).
    public func fetch<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws -> DataStoreFetchResult<
        T, DefaultSnapshot
    > {
        try publishedState(for: T.entityName).fetchResult(request, storeIdentifier: identifier)
    }

    /// How many published models of the entity the request selects (the window applied).
    public func fetchCount<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws -> Int {
        try publishedState(for: T.entityName).fetchCount(request)
    }

    /// The identifiers of the published models the request selects, in fetch order.
    public func fetchIdentifiers<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws
        -> [PersistentIdentifier]
    {
        try publishedState(for: T.entityName).fetchIdentifiers(request, storeIdentifier: identifier)
    }

    /// The published snapshots of these models and of every model they refer to.
    public func fetch<T: PersistentModel>(_ identifiers: [PersistentIdentifier], of type: T.Type) throws
        -> DataStoreFetchResult<T, DefaultSnapshot>
    {
        try publishedState(for: T.entityName).fetchResult(identifiers, of: type, storeIdentifier: identifier)
    }

    /// The published snapshot of one model, or `nil`.
    ///
    /// In a read-only store this does not throw: an error following the writing process
    /// (``LogStoreError/Code/reopenRequired``, corruption) is not reported here — the answer is then
    /// the state as last followed. A fetch, history fetch or tail throws it.
    public func snapshot(for persistentIdentifier: PersistentIdentifier) -> DefaultSnapshot? {
        try? followOtherProcess()
        refreshAfterLogFailure()
        guard persistentIdentifier.storeIdentifier == identifier else { return nil }
        return inner.withLock { $0.published.row(persistentIdentifier) }.map {
            DefaultSnapshot(persistentIdentifier: persistentIdentifier, values: $0.values.dictionary)
        }
    }

    /// Every published model of every entity, keyed by entity name, in insertion order.
    ///
    /// In a read-only store this does not throw: an error following the writing process
    /// (``LogStoreError/Code/reopenRequired``, corruption) is not reported here — the answer is then
    /// the state as last followed. A fetch, history fetch or tail throws it.
    public func allSnapshots() -> [String: [DefaultSnapshot]] {
        try? followOtherProcess()
        refreshAfterLogFailure()
        let state = inner.withLock { $0.published }
        var result: [String: [DefaultSnapshot]] = [:]
        for entity in schema.entities {
            result[entity.name] = state.rows(of: entity.name).map {
                DefaultSnapshot(
                    persistentIdentifier: .permanent(for: identifier, entityName: entity.name, primaryKey: $0.0),
                    values: $0.1.values.dictionary)
            }
        }
        return result
    }

    /// Not supported: throws ``DataStoreError/unsupportedFeature``. Delete the store's directory
    /// while it is closed instead.
    public func erase() throws {
        throw DataStoreError.unsupportedFeature
    }

    private func publishedState(for entityName: String) throws -> FoldState {
        try checkOpen()
        guard schema.entity(named: entityName) != nil else { throw LogStoreError.unknownEntity(entityName) }
        try followOtherProcess()
        refreshAfterLogFailure()
        return inner.withLock { $0.published }
    }
}
