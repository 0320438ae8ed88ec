import Foundation
import LogStoreEngine

/// Runs a ``SchemaMigrationPlan``'s stages when a store opens (docs/FORMAT.md §6.7): from the
/// version the store records (or, for a store written before it had a plan, the plan's first
/// version its table matches) to the container's.
///
/// Each stage is recorded in the log, so that replay, time travel and history read exactly
/// across it, and so that a power cut leaves the old version or the new one:
/// 1. `willMigrate` (custom stages) runs on a context over the old version's models; what it
///    saves is written as one ordinary transaction record, under the old schema, whose author
///    names the stage. It commits on its own: a cut after it leaves the old version (with that
///    transaction), and the next open runs the stage again.
/// 2. One schema record: the new table, the version, and the steps (renames, removals, fills).
/// 3. `didMigrate` (custom stages) runs on a context over the new version's models, staged in
///    memory; what it saves is one transaction record written right after the schema record,
///    which is then marked *completed by the next transaction*: the two take effect together,
///    and a schema record left without it is void (old version).
/// Every stage's records are folded by ``Replay`` itself, so the state is the log's fold.
struct MigrationRunner {
    let log: Log
    let configuration: LogStoreConfiguration
    /// The container's schema: the version the plan must end at.
    let schema: Schema
    /// Set in a process that shares the store with other writers and was not alone when it
    /// opened it: thrown instead of writing any of a migration's records (D11).
    var refusal: LogStoreError?

    var storeIdentifier: String { log.storeID.uuidString }

    func run(_ plan: any SchemaMigrationPlan.Type, from replayed: Replay.Result) throws -> Replay.Result {
        var result = replayed
        let versions = plan.schemas
        guard !versions.isEmpty else {
            throw LogStoreError.schemaMismatch(entity: "", attribute: nil, reason: "the migration plan lists no schemas")
        }
        guard let target = versions.firstIndex(where: { Self.sameEntities(Schema(versionedSchema: $0), schema) }) else {
            throw LogStoreError.schemaMismatch(
                entity: "", attribute: nil,
                reason: "the container's models are none of the migration plan's versions ("
                    + versions.map { "\($0.versionIdentifier)" }.joined(separator: ", ") + ")")
        }
        guard var current = try storedVersion(of: result.table, among: versions) else {
            // A new store: record the container's version.
            if let created = try result.table.migrated(
                to: schema, versionIdentifier: versions[target].versionIdentifier, allowsRemovals: false)
            {
                result = try write(created, transaction: nil, after: result)
            }
            return result
        }
        guard current <= target else {
            throw LogStoreError.schemaMismatch(
                entity: "", attribute: nil,
                reason: "the store is at version \(versions[current].versionIdentifier), newer than the container's "
                    + "\(versions[target].versionIdentifier)")
        }
        while current < target {
            let from = versions[current]
            guard let stage = plan.stages.first(where: { $0.fromVersion.versionIdentifier == from.versionIdentifier }),
                let next = versions.firstIndex(where: { $0.versionIdentifier == stage.toVersion.versionIdentifier }),
                next > current, next <= target
            else {
                throw LogStoreError.schemaMismatch(
                    entity: "", attribute: nil,
                    reason: "the migration plan has no stage from version \(from.versionIdentifier) toward "
                        + "\(versions[target].versionIdentifier)")
            }
            result = try run(stage, from: from, to: versions[next], after: result)
            current = next
        }
        return result
    }

    /// The index of the plan version the store is at; `nil` for a store with no schema yet.
    private func storedVersion(of table: SchemaTable, among versions: [any VersionedSchema.Type]) throws -> Int? {
        if table.entities.isEmpty && table.retiredEntities.isEmpty && table.versionIdentifier == nil { return nil }
        if let identifier = table.versionIdentifier {
            guard let index = versions.firstIndex(where: { $0.versionIdentifier == identifier }) else {
                throw LogStoreError.schemaMismatch(
                    entity: "", attribute: nil,
                    reason: "the store is at version \(identifier), which the migration plan does not list")
            }
            return index
        }
        // Written before it had a plan: the first version the table is exactly, else the first
        // it grows into by additions alone.
        var firstCovering: Int?
        for (index, version) in versions.enumerated() {
            do {
                if try table.migrated(to: Schema(versionedSchema: version), versionIdentifier: nil, allowsRemovals: false)
                    == nil
                {
                    return index
                }
                firstCovering = firstCovering ?? index
            } catch {
                continue
            }
        }
        guard let firstCovering else {
            throw LogStoreError.schemaMismatch(
                entity: "", attribute: nil, reason: "the store's schema matches none of the migration plan's versions")
        }
        return firstCovering
    }

    private func run(
        _ stage: MigrationStage, from: any VersionedSchema.Type, to: any VersionedSchema.Type,
        after replayed: Replay.Result
    ) throws -> Replay.Result {
        var result = replayed
        let fromSchema = Schema(versionedSchema: from)
        // A store written before its models were versioned may lack what the old version adds.
        if let additions = try result.table.migrated(
            to: fromSchema, versionIdentifier: from.versionIdentifier, allowsRemovals: false)
        {
            result = try write(additions, transaction: nil, after: result)
        }
        var willMigrate: ((ModelContext) throws -> Void)?
        var didMigrate: ((ModelContext) throws -> Void)?
        if case .custom(_, _, let will, let did) = stage {
            willMigrate = will
            didMigrate = did
        }
        if let willMigrate {
            let changes = try runContext(
                willMigrate, schema: fromSchema, state: result.state,
                author: MigrationStage.author(from: from.versionIdentifier, to: to.versionIdentifier, phase: "willMigrate"))
            if let changes {
                result = try write(nil, transaction: (changes.author, changes.changes), after: result)
            }
        }
        let toSchema = Schema(versionedSchema: to)
        guard
            var migration = try result.table.migrated(
                to: toSchema, versionIdentifier: to.versionIdentifier, allowsRemovals: true,
                allowsUnfilledRequired: didMigrate != nil)
        else { return result }
        var filled: (author: String, changes: [ResolvedChange])?
        if let didMigrate {
            var staged = result.state
            staged.apply(migration.steps)
            // New required attributes without a default are didMigrate's to fill. Until it does,
            // the staged models hold a placeholder (a model must be readable whole); it is never
            // written: only what didMigrate sets is, and every stored model must get a value.
            let unfilled = Self.requiredWithoutDefault(before: result.table, after: migration.table, schema: toSchema)
            let stored = Dictionary(
                uniqueKeysWithValues: Set(unfilled.map(\.entity)).map { entity in
                    (entity, Set(staged.rows(of: entity).map(\.0)))
                })
            staged.apply(unfilled.compactMap { required in
                Self.placeholder(for: required.valueType).map {
                    .fill(entity: required.entity, entityID: 0, attributeID: 0, name: required.name, value: $0)
                }
            })
            let author = MigrationStage.author(from: from.versionIdentifier, to: to.versionIdentifier, phase: "didMigrate")
            let outcome = try runContext(didMigrate, schema: toSchema, state: staged, author: author)
            try Self.checkFilled(unfilled, stored: stored, changes: outcome?.changes ?? [], final: outcome?.state ?? staged)
            filled = outcome.map { ($0.author, $0.changes) }
        }
        migration.completedByNextTransaction = filled != nil
        return try write(migration, transaction: filled, after: result)
    }

    /// Runs a stage's closure on a context over `state` as `schema` (staged in memory: nothing
    /// is written); returns what its saves resolved to, or `nil` when it saved nothing.
    private func runContext(
        _ body: (ModelContext) throws -> Void, schema: Schema, state: FoldState, author: String
    ) throws -> (author: String, changes: [ResolvedChange], state: FoldState)? {
        let store = MigrationStagingStore(
            schema: schema, identifier: storeIdentifier, state: state,
            collisionPolicy: configuration.uniqueCollisionPolicy)
        let container = ModelContainer(schema: schema, modelTypes: schema.modelTypes, store: store)
        let context = ModelContext(container)
        context.author = author
        try body(context)
        if context.hasChanges { try context.save() }
        return store.changes.isEmpty ? nil : (author, store.changes, store.state)
    }

    /// The required attributes a migration adds without a default (`didMigrate` fills them).
    static func requiredWithoutDefault(before: SchemaTable, after: SchemaTable, schema: Schema)
        -> [(entity: String, name: String, valueType: ValueType)]
    {
        var result: [(entity: String, name: String, valueType: ValueType)] = []
        for entity in after.entities {
            guard let old = before.entity(id: entity.id) else { continue }  // a new entity has no stored models
            for attribute in entity.attributes where !attribute.isOptional {
                guard !old.attributes.contains(where: { $0.id == attribute.id }),
                    let property = schema.entity(named: entity.name)?.property(named: attribute.name),
                    property.defaultValue == nil
                else { continue }
                if case .array = attribute.valueType { continue }
                result.append((entity.name, attribute.name, attribute.valueType))
            }
        }
        return result
    }

    /// A value of the type for a staged model to read until `didMigrate` sets the real one.
    static func placeholder(for valueType: ValueType) -> AttributeValue? {
        switch valueType {
        case .bool: .bool(false)
        case .int: .int(0)
        case .double: .double(0)
        case .string: .string("")
        case .data: .data(Data())
        case .date: .date(Date(timeIntervalSinceReferenceDate: 0))
        case .uuid: .uuid(UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
        case .array: .array([])
        case .reference: nil
        }
    }

    /// Every model stored before `didMigrate` and still there got a value for each new required
    /// attribute from `didMigrate`'s saves, or the migration is refused before anything is written.
    static func checkFilled(
        _ unfilled: [(entity: String, name: String, valueType: ValueType)], stored: [String: Set<UUID>],
        changes: [ResolvedChange], final: FoldState
    ) throws {
        for required in unfilled {
            var written: Set<UUID> = []
            for change in changes where change.identifier.entityName == required.entity {
                switch change {
                case .insert(let identifier, let values), .update(let identifier, let values):
                    if let value = values[required.name], !value.isNull { written.insert(identifier.primaryKey) }
                case .delete: break
                }
            }
            let rows = final.rows(of: required.entity)
            let missing = (stored[required.entity] ?? []).subtracting(written).filter { rows[$0] != nil }
            guard missing.isEmpty else {
                throw LogStoreError.schemaMismatch(
                    entity: required.entity, attribute: required.name,
                    reason: "a new required attribute without a default value, and \(missing.count) stored "
                        + "models have no value for it (set it in the stage's didMigrate)")
            }
        }
    }

    /// Appends a schema record and/or a transaction record (the schema record first), waits until
    /// the last is durable, and folds them into `replayed` (the fold of the log, as on open).
    private func write(
        _ migration: SchemaMigration?, transaction: (author: String, changes: [ResolvedChange])?,
        after replayed: Replay.Result
    ) throws -> Replay.Result {
        if let refusal { throw refusal }
        let start = log.visibleEnd
        var payloads: [(bytes: [UInt8], type: RecordType)] = []
        if let migration { payloads.append((migration.encoded(), .schema)) }
        if let transaction {
            let table = migration?.table ?? replayed.table
            let now = Int64(Date().timeIntervalSince1970 * 1_000_000)
            let record = TransactionRecord(
                schemaVersion: table.version, author: transaction.author,
                timestampMicroseconds: max(now, replayed.lastTimestampMicroseconds),
                processIdentifier: LogStore.processIdentifier, changes: transaction.changes)
            let payload = record.encoded(table: table)
            guard payload.count <= FormatConstants.recordByteCountMax else {
                throw LogStoreError.transactionTooLarge(
                    byteCount: payload.count, limit: FormatConstants.recordByteCountMax)
            }
            payloads.append((payload, .transaction))
        }
        do throws(LogError) {
            var last: LogPosition?
            for payload in payloads { last = try log.write(payload.bytes, type: payload.type) }
            if let last { try log.waitUntilDurable(last) }
        } catch {
            throw LogStoreError.log(error)
        }
        return try Replay(log: log, storeIdentifier: storeIdentifier).run(from: replayed, startOffset: start)
    }

    /// Same entities, in any order (a container lists its types as the caller named them).
    static func sameEntities(_ lhs: Schema, _ rhs: Schema) -> Bool {
        lhs.entities.count == rhs.entities.count && Set(lhs.entities) == Set(rhs.entities)
    }
}

/// The store a migration stage's context works on: the stored models as one schema version sees
/// them, in memory. Saves are resolved as the log store resolves them (identifiers, uniqueness,
/// delete rules) and kept, to be written as one transaction when the stage ends.
final class MigrationStagingStore: ModelStore {
    let schema: Schema
    let identifier: String
    private(set) var state: FoldState
    private var uniqueIndex: UniqueIndex
    let collisionPolicy: UniqueCollisionPolicy
    /// Every save's resolved changes, in order.
    private(set) var changes: [ResolvedChange] = []

    init(schema: Schema, identifier: String, state: FoldState, collisionPolicy: UniqueCollisionPolicy) {
        self.schema = schema
        self.identifier = identifier
        self.state = state
        self.collisionPolicy = collisionPolicy
        self.uniqueIndex = UniqueIndex(schema: schema, state: state)
    }

    var base: AnyObject { self }

    private func checkEntity(_ name: String) throws {
        guard schema.entity(named: name) != nil else { throw LogStoreError.unknownEntity(name) }
    }

    func fetch<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws -> DataStoreFetchResult<T, DefaultSnapshot> {
        try checkEntity(T.entityName)
        return try state.fetchResult(request, storeIdentifier: identifier)
    }

    func fetchCount<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws -> Int {
        try checkEntity(T.entityName)
        return try state.fetchCount(request)
    }

    func fetchIdentifiers<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws -> [PersistentIdentifier] {
        try checkEntity(T.entityName)
        return try state.fetchIdentifiers(request, storeIdentifier: identifier)
    }

    func save(_ request: DataStoreSaveChangesRequest<DefaultSnapshot>) throws -> DataStoreSaveChangesResult<DefaultSnapshot> {
        let resolution = try SaveResolver(
            schema: schema, storeIdentifier: identifier, state: state, uniqueIndex: uniqueIndex,
            collisionPolicy: collisionPolicy
        ).resolve(request)
        for change in resolution.changes { uniqueIndex.apply(change, to: &state) }
        changes += resolution.changes
        var result = DataStoreSaveChangesResult<DefaultSnapshot>(
            storeIdentifier: identifier, remappedIdentifiers: resolution.remapped)
        for (identifier, values) in resolution.reregister {
            result.snapshotsToReregister[identifier] = DefaultSnapshot(persistentIdentifier: identifier, values: values)
        }
        return result
    }

    nonisolated(nonsending) func save(_ request: DataStoreSaveChangesRequest<DefaultSnapshot>) async throws
        -> DataStoreSaveChangesResult<DefaultSnapshot>
    {
        try saveNow(request)
    }

    private func saveNow(_ request: DataStoreSaveChangesRequest<DefaultSnapshot>) throws
        -> DataStoreSaveChangesResult<DefaultSnapshot>
    {
        try save(request)
    }

    func snapshots<T: PersistentModel>(of type: T.Type, _ identifiers: [PersistentIdentifier]) throws
        -> (fetched: [DefaultSnapshot], related: [PersistentIdentifier: DefaultSnapshot])
    {
        let result = state.fetchResult(identifiers, of: type, storeIdentifier: identifier)
        return (result.fetchedSnapshots, result.relatedSnapshots)
    }

    func close() throws {}
}
