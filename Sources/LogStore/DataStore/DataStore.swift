import Foundation

/// A store's configuration: its name and schema, and the type of store it makes (SwiftData's
/// `DataStoreConfiguration`; like SwiftData's, it need not be `Sendable`).
public protocol DataStoreConfiguration: Hashable {
    /// The store this configuration opens. Code written for the WWDC24 beta names it `StoreType`
    /// instead; either declaration works, the other follows it.
    associatedtype Store: DataStore = StoreType where Store.Configuration == Self
    /// The WWDC24 beta's name of ``Store`` (`typealias StoreType = JSONStore` in the session's
    /// code); new code declares `Store`.
    associatedtype StoreType: DataStore = Store
    /// The configuration's name (`"default"` unless given).
    var name: String { get }
    /// The schema the store opens with. ``ModelContainer`` sets it to the schema of its model
    /// types; `nil` asks a store that records its schema to use the stored one.
    var schema: Schema? { get set }
}

/// The plug-in point behind a ``ModelContext`` (SwiftData's `DataStore`): fetch snapshots, save
/// changes. ``LogStore`` and ``ArchiveStore`` conform; the same context code runs on either.
public protocol DataStore: AnyObject {
    /// The configuration type that opens this store.
    associatedtype Configuration: DataStoreConfiguration where Configuration.Store == Self
    /// The snapshot type the store exchanges with a context (``DefaultSnapshot`` for a
    /// ``ModelContainer``).
    associatedtype Snapshot: DataStoreSnapshot

    /// The configuration the store was opened with.
    var configuration: Configuration { get }
    /// The identifier permanent ``PersistentIdentifier``s of this store carry.
    var identifier: String { get }
    /// The schema the store works with.
    var schema: Schema { get }

    /// Opens (or creates) the store the configuration describes. ``ModelContainer`` passes no
    /// migration plan (see ``SchemaMigrationPlan``).
    init(_ configuration: Configuration, migrationPlan: (any SchemaMigrationPlan.Type)?) throws

    /// The snapshots of the request's entity that its descriptor selects, sorted and windowed —
    /// or ``DataStoreError/preferInMemoryFilter`` / ``DataStoreError/preferInMemorySort`` for a
    /// predicate or sort the store leaves to the context.
    func fetch<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws -> DataStoreFetchResult<T, Snapshot>
    /// How many models the request selects.
    func fetchCount<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws -> Int
    /// The identifiers of the models the request selects, in fetch order.
    func fetchIdentifiers<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws -> [PersistentIdentifier]
    /// Applies one save's inserts, updates and deletes (see ``DataStoreSaveChangesRequest`` for the
    /// contract) and says what it did.
    func save(_ request: DataStoreSaveChangesRequest<Snapshot>) throws -> DataStoreSaveChangesResult<Snapshot>
    /// `save` for `async` callers (``ModelContext/save()-6j8k0``): a store that waits for the disk
    /// should suspend instead of blocking the caller while it waits.
    ///
    /// `nonisolated(nonsending)`: it starts on the caller's actor, so a store takes the save's
    /// place in line before the caller's actor runs anything else — and one context's saves are
    /// applied in the order they were called (``LogStore`` writes, or queues its write, there;
    /// ``ArchiveStore`` queues it). The default calls the synchronous ``save(_:)`` there, on the
    /// caller's actor. A store that implements it `@concurrent` runs on the cooperative pool
    /// instead, and a synchronous save called while it is suspended may then be applied first.
    nonisolated(nonsending) func save(_ request: DataStoreSaveChangesRequest<Snapshot>) async throws
        -> DataStoreSaveChangesResult<Snapshot>
    /// The snapshots of these models of `T` (those still stored, in the given order) and of every
    /// model they refer to: one batch of ``ModelContext/enumerate(_:batchSize:block:)``. The
    /// default fetches the whole entity and keeps the identifiers asked for.
    func fetch<T: PersistentModel>(_ identifiers: [PersistentIdentifier], of type: T.Type) throws
        -> DataStoreFetchResult<T, Snapshot>
    /// Removes every model (and, for a log, its history).
    func erase() throws
}

extension DataStore {
    /// Counts the snapshots of ``fetch(_:)``.
    public func fetchCount<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws -> Int {
        try fetch(request).fetchedSnapshots.count
    }

    /// The identifiers of the snapshots of ``fetch(_:)``.
    public func fetchIdentifiers<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws
        -> [PersistentIdentifier]
    {
        try fetch(request).fetchedSnapshots.map(\.persistentIdentifier)
    }

    /// Calls the synchronous ``save(_:)`` on the caller's actor (a store that waits for the disk
    /// should implement this itself and suspend while it waits).
    public nonisolated(nonsending) func save(_ request: DataStoreSaveChangesRequest<Snapshot>) async throws
        -> DataStoreSaveChangesResult<Snapshot>
    {
        try saveSynchronously(request)
    }

    /// A store that cannot erase itself says so.
    public func erase() throws {
        throw DataStoreError.unsupportedFeature
    }

    /// The synchronous `save` (inside an `async` function the name resolves to the `async` one).
    private func saveSynchronously(_ request: DataStoreSaveChangesRequest<Snapshot>) throws
        -> DataStoreSaveChangesResult<Snapshot>
    {
        try save(request)
    }

    /// Fetches the whole entity and keeps the snapshots of `identifiers` that are still stored, in
    /// the order given.
    public func fetch<T: PersistentModel>(_ identifiers: [PersistentIdentifier], of type: T.Type) throws
        -> DataStoreFetchResult<T, Snapshot>
    {
        var result = try fetch(DataStoreFetchRequest(descriptor: FetchDescriptor<T>()))
        let byIdentifier = Dictionary(result.fetchedSnapshots.map { ($0.persistentIdentifier, $0) }) { first, _ in first
        }
        result.fetchedSnapshots = identifiers.compactMap { byIdentifier[$0] }
        return result
    }
}

/// A fetch handed to a store.
public struct DataStoreFetchRequest<T: PersistentModel>: @unchecked Sendable {
    // @unchecked: carries a FetchDescriptor (see there).
    /// What to fetch.
    public var descriptor: FetchDescriptor<T>
    /// The entity to fetch from: `T`'s ``PersistentModel/entityName``.
    public var entityName: String { T.entityName }

    /// A request for what `descriptor` selects.
    public init(descriptor: FetchDescriptor<T>) {
        self.descriptor = descriptor
    }
}

/// What a store fetched.
public struct DataStoreFetchResult<T: PersistentModel, Snapshot: DataStoreSnapshot>: @unchecked Sendable {
    // @unchecked: carries a FetchDescriptor (see there).
    /// The descriptor of the request answered.
    public var descriptor: FetchDescriptor<T>
    /// The selected models' snapshots, in fetch order.
    public var fetchedSnapshots: [Snapshot]
    /// Snapshots of models the fetched ones refer to, keyed by identifier.
    public var relatedSnapshots: [PersistentIdentifier: Snapshot]

    /// A result with the fetched snapshots and, optionally, those of the models they refer to.
    public init(
        descriptor: FetchDescriptor<T>, fetchedSnapshots: [Snapshot],
        relatedSnapshots: [PersistentIdentifier: Snapshot] = [:]
    ) {
        self.descriptor = descriptor
        self.fetchedSnapshots = fetchedSnapshots
        self.relatedSnapshots = relatedSnapshots
    }
}

/// The changes of one save (SwiftData's contract):
///
/// - `inserted`: whole models with **temporary** identifiers; references among them use those
///   temporary identifiers too. The store mints a permanent identifier for each, returns the
///   mapping in ``DataStoreSaveChangesResult/remappedIdentifiers``, and should store each snapshot
///   as `copy(persistentIdentifier: permanent, remappedIdentifiers: mapping)` so references to
///   models inserted in the same save become permanent too.
/// - `updated`: **whole** models (every property, not only the changed ones), with permanent
///   identifiers; a store may replace its copy.
/// - `deleted`: the models to delete (their values are not needed).
///
/// A store returns from `fetch` snapshots of the requested entity (the context drops any
/// other), at most `fetchLimit` of them unless it declined the predicate or sort.
public struct DataStoreSaveChangesRequest<Snapshot: DataStoreSnapshot>: Sendable {
    /// New models, with temporary identifiers.
    public var inserted: [Snapshot]
    /// Changed models, whole, with permanent identifiers.
    public var updated: [Snapshot]
    /// Models to delete.
    public var deleted: [Snapshot]
    /// The editing state: who saves.
    public var editingState: EditingState
    /// For each updated model, the attributes the context knows were changed (D11 "Lost
    /// updates"): LogStore records only those, so a stale copy of an attribute another context
    /// or process changed since this context read it is not written back. Custom stores still
    /// receive whole snapshots; a request without an entry is judged by the whole snapshot.
    var changedAttributeNames: [PersistentIdentifier: Set<String>] = [:]

    /// A save of these changes by the editing state's author.
    public init(
        editingState: EditingState = EditingState(), inserted: [Snapshot] = [], updated: [Snapshot] = [],
        deleted: [Snapshot] = []
    ) {
        self.editingState = editingState
        self.inserted = inserted
        self.updated = updated
        self.deleted = deleted
    }
}

/// Who is saving (SwiftData's `EditingState`).
public struct EditingState: Sendable, Hashable {
    /// The saving context's ``ModelContext/author``, recorded with the transaction in history.
    public var author: String?

    /// An editing state with this author (none by default).
    public init(author: String? = nil) {
        self.author = author
    }
}

/// What a save did.
public struct DataStoreSaveChangesResult<Snapshot: DataStoreSnapshot>: Sendable {
    /// The ``DataStore/identifier`` of the store that saved.
    public var storeIdentifier: String
    /// Temporary identifier → permanent identifier, for every insert.
    public var remappedIdentifiers: [PersistentIdentifier: PersistentIdentifier]
    /// Snapshots the store changed beyond the request (cascade deletes, nullified references,
    /// upserted models), so the context can refresh them.
    public var snapshotsToReregister: [PersistentIdentifier: Snapshot]
    /// The history token of the save's transaction (`nil` for a save that changed nothing, and
    /// for stores without history).
    public var token: DefaultHistoryToken?

    /// A result with every part given (only the store's identifier is required).
    public init(
        storeIdentifier: String, remappedIdentifiers: [PersistentIdentifier: PersistentIdentifier] = [:],
        snapshotsToReregister: [PersistentIdentifier: Snapshot] = [:], token: DefaultHistoryToken? = nil
    ) {
        self.storeIdentifier = storeIdentifier
        self.remappedIdentifiers = remappedIdentifiers
        self.snapshotsToReregister = snapshotsToReregister
        self.token = token
    }

    /// SwiftData's spelling: the result of a save in the store with this identifier.
    public init(
        for storeIdentifier: String, remappedIdentifiers: [PersistentIdentifier: PersistentIdentifier] = [:],
        snapshotsToReregister: [PersistentIdentifier: Snapshot] = [:]
    ) {
        self.init(
            storeIdentifier: storeIdentifier, remappedIdentifiers: remappedIdentifiers,
            snapshotsToReregister: snapshotsToReregister)
    }

    /// The WWDC24 beta spelling. Deleted identifiers need no answer here: the context drops what it
    /// asked to delete.
    @available(*, deprecated, renamed: "init(for:remappedIdentifiers:snapshotsToReregister:)")
    public init(
        for storeIdentifier: String, remappedPersistentIdentifiers: [PersistentIdentifier: PersistentIdentifier] = [:],
        deletedIdentifiers: [PersistentIdentifier] = []
    ) {
        self.init(storeIdentifier: storeIdentifier, remappedIdentifiers: remappedPersistentIdentifiers)
    }
}

/// Errors a store may throw from a fetch (SwiftData's `DataStoreError`). `preferInMemoryFilter`
/// and `preferInMemorySort` ask the context to evaluate the predicate or sort itself (then the
/// store is asked again without them, and the context also applies limit and offset).
public enum DataStoreError: Error, Sendable, Equatable {
    /// The store does not do this at all (for example ``DataStore/erase()`` by default).
    case unsupportedFeature
    /// The store cannot evaluate this predicate: the context evaluates it instead.
    case preferInMemoryFilter
    /// The store cannot evaluate this sort: the context sorts instead.
    case preferInMemorySort
    /// SwiftData's case for a predicate that cannot be evaluated at all; no store here throws it.
    case invalidPredicate
}
