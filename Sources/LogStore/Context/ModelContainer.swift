import Foundation

/// Owns a store and the model types that live in it (SwiftData's `ModelContainer`).
///
/// ```swift
/// let container = try ModelContainer(for: Trip.self, BucketListItem.self,
///                                    configurations: LogStoreConfiguration(directory: "/tmp/trips"))
/// let context = ModelContext(container)
/// ```
public final class ModelContainer: @unchecked Sendable {
    // @unchecked: immutable after init; the store does its own locking.
    /// The schema of the container's model types (and of those their relationships reach).
    public let schema: Schema
    let store: any ModelStore
    let modelTypes: [String: any PersistentModel.Type]
    /// The main-actor context, made on first use. Only touched on the main actor (its accessor
    /// is `@MainActor`), which is what makes the unchecked access safe.
    nonisolated(unsafe) private var mainContextStorage: ModelContext?

    /// SwiftData's `ModelContainer(for: Trip.self)`: the default store
    /// (``LogStoreConfiguration/init(_:schema:isStoredInMemoryOnly:allowsSave:)``).
    public convenience init(for types: any PersistentModel.Type...) throws {
        try self.init(for: types, configuration: ModelConfiguration())
    }

    /// Opens the store the configuration describes, for the given model types. The schema is
    /// built from the types' declarations (the configuration's own schema, if any, is replaced).
    public convenience init<Configuration: DataStoreConfiguration>(
        for types: any PersistentModel.Type..., configurations: Configuration
    ) throws where Configuration.Store.Snapshot == DefaultSnapshot {
        try self.init(for: types, configuration: configurations)
    }

    /// Opens the store the configuration describes, for these model types and those their
    /// relationships reach; the configuration's schema is replaced by theirs. Without a migration
    /// plan: additions and `originalName` renames are still recorded. Throws what the store's open
    /// throws: a ``LogStoreError`` (``LogStoreError/Code/locked``,
    /// ``LogStoreError/Code/schemaMismatch``, ``LogStoreError/Code/corruption``…) for a
    /// ``LogStoreConfiguration``.
    public convenience init<Configuration: DataStoreConfiguration>(
        for types: [any PersistentModel.Type], configuration: Configuration
    ) throws where Configuration.Store.Snapshot == DefaultSnapshot {
        try self.init(for: types, migrationPlan: nil, configuration: configuration)
    }

    /// SwiftData's `ModelContainer(for: Trip.self, migrationPlan: TripsMigrationPlan.self,
    /// configurations: configuration)`: opens the store and, when the store records an older
    /// version of the plan's schemas, runs the plan's stages up to the version of these types
    /// (``SchemaMigrationPlan``).
    public convenience init<Configuration: DataStoreConfiguration>(
        for types: any PersistentModel.Type..., migrationPlan: (any SchemaMigrationPlan.Type)?,
        configurations: Configuration
    ) throws where Configuration.Store.Snapshot == DefaultSnapshot {
        try self.init(for: types, migrationPlan: migrationPlan, configuration: configurations)
    }

    /// SwiftData's `ModelContainer(for: schema, migrationPlan: plan, configurations: configuration)`;
    /// the schema is usually `Schema(versionedSchema: TripsSchemaV3.self)`.
    public convenience init<Configuration: DataStoreConfiguration>(
        for schema: Schema, migrationPlan: (any SchemaMigrationPlan.Type)?, configurations: Configuration...
    ) throws where Configuration.Store.Snapshot == DefaultSnapshot {
        guard let configuration = configurations.first, configurations.count == 1 else {
            throw LogStoreError.unsupportedFeature(
                "A ModelContainer opens exactly one configuration (got "
                    + "\(configurations.count)); open one container per store.")
        }
        try self.init(for: try Self.types(of: schema), migrationPlan: migrationPlan, configuration: configuration)
    }

    /// Opens the store the configuration describes for these model types (the configuration's
    /// own schema, if any, is replaced by theirs), handing the plan to the store's
    /// `init(_:migrationPlan:)`.
    public init<Configuration: DataStoreConfiguration>(
        for types: [any PersistentModel.Type], migrationPlan: (any SchemaMigrationPlan.Type)?,
        configuration: Configuration
    ) throws where Configuration.Store.Snapshot == DefaultSnapshot {
        let modelTypes = ModelTypes(types)
        let schema = Schema(modelTypes.all.map { $0.schemaEntity })
        var configuration = configuration
        configuration.schema = schema
        self.schema = schema
        self.modelTypes = modelTypes.byEntityName
        if let logConfiguration = configuration as? LogStoreConfiguration, logConfiguration.allowsSave,
            !logConfiguration.isStoredInMemoryOnly
        {
            // One open store per directory in a process (D11): a second container shares it.
            self.store = try OpenLogStores.open(logConfiguration, migrationPlan: migrationPlan)
        } else {
            self.store = StoreBox(try Configuration.Store(configuration, migrationPlan: migrationPlan))
        }
    }

    /// A container over a store made elsewhere (a migration stage's staged models).
    init(schema: Schema, modelTypes: [String: any PersistentModel.Type], store: any ModelStore) {
        self.schema = schema
        self.modelTypes = modelTypes
        self.store = store
    }

    /// SwiftData's `ModelContainer(for: schema, configurations: [configuration])`: the schema's
    /// entities must be those of model types (``Schema/init(_:)-([PersistentModel.])``).
    public convenience init<Configuration: DataStoreConfiguration>(
        for schema: Schema, configurations: [Configuration]
    ) throws where Configuration.Store.Snapshot == DefaultSnapshot {
        guard let configuration = configurations.first, configurations.count == 1 else {
            throw LogStoreError.unsupportedFeature(
                "A ModelContainer opens exactly one configuration (got "
                    + "\(configurations.count)); open one container per store.")
        }
        try self.init(for: schema, configuration: configuration)
    }

    /// `ModelContainer(for: schema, configurations: configuration)`.
    public convenience init<Configuration: DataStoreConfiguration>(
        for schema: Schema, configurations: Configuration...
    ) throws where Configuration.Store.Snapshot == DefaultSnapshot {
        try self.init(for: schema, configurations: configurations)
    }

    private convenience init<Configuration: DataStoreConfiguration>(
        for schema: Schema, configuration: Configuration
    ) throws where Configuration.Store.Snapshot == DefaultSnapshot {
        try self.init(for: try Self.types(of: schema), configuration: configuration)
    }

    /// The model types of a schema built from types.
    private static func types(of schema: Schema) throws -> [any PersistentModel.Type] {
        try schema.entities.map { entity throws -> any PersistentModel.Type in
            guard let type = schema.modelTypes[entity.name] else {
                throw LogStoreError.unsupportedFeature(
                    "The schema's entity \(entity.name) has no model type: build the "
                        + "schema with Schema([\(entity.name).self, …]) to open a ModelContainer for it.")
            }
            return type
        }
    }

    /// The store behind the container, for store-specific calls (checkpoints, history, close).
    public func dataStore<Store: DataStore>(as type: Store.Type = Store.self) -> Store? {
        store.base as? Store
    }

    /// The container's one main-actor context (SwiftData's `mainContext`): the same instance on
    /// every access, with ``ModelContext/autosaveEnabled`` on — changes are saved on the main
    /// actor's next turn after they are made, so ported code that never calls `save()` keeps its
    /// data. Other threads and tasks make their own ``ModelContext``.
    @MainActor public var mainContext: ModelContext {
        if let mainContextStorage { return mainContextStorage }
        let context = ModelContext(self)
        context.autosaveEnabled = true
        context.isMainContext = true
        mainContextStorage = context
        return context
    }

    /// Saves what the main context has not saved yet (SwiftData's autosave, which would otherwise
    /// run on the main actor's next turn), then closes the store: its log is synced and closed and
    /// its directory lock released. Afterwards every fetch, history fetch and save through a
    /// context of this container throws `LogError.Code.closed`. Closing twice is harmless. A
    /// custom ``DataStore`` without a close of its own is left as it is.
    ///
    /// Main-actor isolated, like ``mainContext``, whose unsaved changes only the main actor may
    /// look at; from other code, `await container.close()`.
    ///
    /// Throws when that save fails, or when the store's log failed a sync that no call has
    /// reported yet (in `.batched` or `.none` durability a background `fdatasync` that failed cut
    /// back saves that had returned: they are not durable). The store is closed either way.
    @MainActor public func close() throws {
        var saveError: (any Error)?
        if let context = mainContextStorage, context.autosaveEnabled, context.hasChanges {
            do { try context.save() } catch { saveError = error }
        }
        // Closed even when the save failed (a store whose log failed refuses it): a close that
        // throws must not leave the log, its syncer and the directory lock open. The close's error
        // wins: it says that saves which returned are gone, which the save's error may not.
        try store.close()
        if let saveError { throw saveError }
    }
}

/// What a context needs of a store, with its generic methods erased.
protocol ModelStore: AnyObject {
    var base: AnyObject { get }
    var identifier: String { get }
    func fetch<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws -> DataStoreFetchResult<
        T, DefaultSnapshot
    >
    func fetchCount<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws -> Int
    func fetchIdentifiers<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws -> [PersistentIdentifier]
    func save(_ request: DataStoreSaveChangesRequest<DefaultSnapshot>) throws -> DataStoreSaveChangesResult<
        DefaultSnapshot
    >
    nonisolated(nonsending) func save(_ request: DataStoreSaveChangesRequest<DefaultSnapshot>) async throws
        -> DataStoreSaveChangesResult<DefaultSnapshot>
    /// The snapshots of these models (those still stored, in the given order) and of everything
    /// they reach — one batch of ``ModelContext/enumerate(_:batchSize:block:)``.
    func snapshots<T: PersistentModel>(of type: T.Type, _ identifiers: [PersistentIdentifier]) throws
        -> (fetched: [DefaultSnapshot], related: [PersistentIdentifier: DefaultSnapshot])
    func close() throws
}

/// Not final: ``SharedStoreBox`` changes what closing means for a store shared by containers.
class StoreBox<Store: DataStore>: ModelStore where Store.Snapshot == DefaultSnapshot {
    let store: Store
    init(_ store: Store) { self.store = store }
    var base: AnyObject { store }
    var identifier: String { store.identifier }
    func fetch<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws -> DataStoreFetchResult<
        T, DefaultSnapshot
    > {
        try store.fetch(request)
    }
    func fetchCount<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws -> Int {
        try store.fetchCount(request)
    }
    func fetchIdentifiers<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws -> [PersistentIdentifier] {
        try store.fetchIdentifiers(request)
    }
    func save(_ request: DataStoreSaveChangesRequest<DefaultSnapshot>) throws -> DataStoreSaveChangesResult<
        DefaultSnapshot
    > {
        try store.save(request)
    }
    nonisolated(nonsending) func save(_ request: DataStoreSaveChangesRequest<DefaultSnapshot>) async throws
        -> DataStoreSaveChangesResult<DefaultSnapshot>
    {
        try await store.save(request)
    }
    func snapshots<T: PersistentModel>(of type: T.Type, _ identifiers: [PersistentIdentifier]) throws
        -> (fetched: [DefaultSnapshot], related: [PersistentIdentifier: DefaultSnapshot])
    {
        let result = try store.fetch(identifiers, of: type)
        return (result.fetchedSnapshots, result.relatedSnapshots)
    }
    func close() throws {
        try (store as? any ClosableDataStore)?.close()
    }
}

/// A store that holds resources to release (LogStore: its log, syncer thread and directory lock):
/// ``ModelContainer/close()`` closes it.
protocol ClosableDataStore: AnyObject {
    func close() throws
}

extension LogStore: ClosableDataStore {}
