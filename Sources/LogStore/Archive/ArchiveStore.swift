import Foundation
import Synchronization

/// The WWDC24 "JSON archive store": the whole store is one JSON file, read on every fetch and
/// read and rewritten on every save. The second ``DataStore`` beside ``LogStore`` — the same
/// ``ModelContext`` code runs on either — and the naive baseline in benchmarks.
///
/// ```swift
/// let configuration = ArchiveStoreConfiguration(path: "/tmp/trips.json")
/// let container = try ModelContainer(for: sampleTripsModels, configuration: configuration)
/// ```
///
/// Saves have LogStore's semantics because they run LogStore's resolver (`SaveResolver`) over
/// the file's state: permanent identifiers are random UUIDs, references among the save's
/// inserts are rewritten, a unique collision upserts, delete rules and value checks apply, and a
/// refused save throws ``LogStoreError`` and leaves the file untouched. There is no history: the
/// save result's token is `nil`.
///
/// File: `{"format":1,"storeIdentifier":"<UUID>","snapshots":[<DefaultSnapshot>…]}`, snapshots
/// in insertion order. A save writes a temporary file beside it, `fsync`s it, renames it over
/// the file and `fsync`s the directory (``ArchiveStoreConfiguration/isDurable``), so the file is
/// always either the old or the new state. Saves are serialized per file within a process; two
/// processes must not write one archive at the same time.
public final class ArchiveStore: DataStore, Sendable {
    /// The snapshot type it exchanges with contexts.
    public typealias Snapshot = DefaultSnapshot

    /// The version of the file layout this code writes and reads.
    public static let formatVersion = 1

    /// The configuration it was opened with.
    public let configuration: ArchiveStoreConfiguration
    /// The schema it works with (the configuration's).
    public let schema: Schema
    /// The store's UUID, kept in the file; permanent identifiers carry it.
    public let identifier: String
    /// The file's path.
    public let path: String
    /// The file, through the configuration's file system.
    private var file: ArchiveFile { ArchiveFile(path: path, fileSystem: configuration.fileSystem) }
    private let saveLock: PathLock
    /// Every save of this store, synchronous or not, in call order: a synchronous save runs here
    /// too (waiting for the asynchronous saves called before it), and an asynchronous one is queued
    /// here before its caller suspends — one `Thread` per asynchronous save let a later
    /// synchronous save take the file first, and the older values won.
    private let saves = DispatchQueue(label: "LogStore.ArchiveStore.saves")

    /// One lock per file path in the process, so two stores on one file do not interleave
    /// read-modify-write cycles. Entries are never removed (one per distinct path opened).
    private static let pathLocks = Mutex<[String: PathLock]>([:])

    private final class PathLock: Sendable {
        let mutex = Mutex(())
    }

    /// The JSON document.
    struct Document: Codable {
        var format: Int
        var storeIdentifier: String
        var snapshots: [DefaultSnapshot]
    }

    /// Opens the archive, creating an empty one (with a new store UUID) when the file is missing.
    public init(_ configuration: ArchiveStoreConfiguration, migrationPlan: (any SchemaMigrationPlan.Type)? = nil) throws
    {
        guard let schema = configuration.schema else {
            throw LogStoreError.schemaMismatch(entity: "", attribute: nil, reason: "the configuration has no schema")
        }
        let path = configuration.path
        let saveLock = Self.pathLocks.withLock { locks in
            if let existing = locks[path] { return existing }
            let made = PathLock()
            locks[path] = made
            return made
        }
        self.configuration = configuration
        self.schema = schema
        self.path = path
        self.saveLock = saveLock
        self.identifier = try saveLock.mutex.withLock { _ in
            let file = ArchiveFile(path: path, fileSystem: configuration.fileSystem)
            try file.createDirectory()
            file.removeTemporaryFiles()
            if let document = try Self.readDocument(file) { return document.storeIdentifier }
            let identifier = UUID().uuidString
            try file.replace(
                with: try Self.encode(
                    Document(
                        format: Self.formatVersion, storeIdentifier: identifier,
                        snapshots: [])),
                durable: configuration.isDurable)
            return identifier
        }
    }

    // MARK: Fetch

    /// The entity's snapshots: recognised predicates and sorts are evaluated here, others are
    /// declined (`preferInMemoryFilter`/`preferInMemorySort`), as LogStore does (DECISIONS.md D9).
    public func fetch<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws -> DataStoreFetchResult<
        T, DefaultSnapshot
    > {
        try stateForFetch(of: T.entityName).fetchResult(request, storeIdentifier: identifier)
    }

    /// How many models of the entity the request selects.
    public func fetchCount<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws -> Int {
        try stateForFetch(of: T.entityName).fetchCount(request)
    }

    /// The identifiers of the models the request selects, in fetch order.
    public func fetchIdentifiers<T: PersistentModel>(_ request: DataStoreFetchRequest<T>) throws
        -> [PersistentIdentifier]
    {
        try stateForFetch(of: T.entityName).fetchIdentifiers(request, storeIdentifier: identifier)
    }

    /// The stored snapshot of one model, or `nil`.
    public func snapshot(for persistentIdentifier: PersistentIdentifier) throws -> DefaultSnapshot? {
        guard persistentIdentifier.storeIdentifier == identifier else { return nil }
        return try loadState().row(persistentIdentifier).map {
            DefaultSnapshot(persistentIdentifier: persistentIdentifier, values: $0.values.dictionary)
        }
    }

    /// Every model of every entity of the schema, keyed by entity name, in insertion order.
    public func allSnapshots() throws -> [String: [DefaultSnapshot]] {
        let state = try loadState()
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

    // MARK: Save

    /// Reads the file, resolves the request against it (`SaveResolver`, as LogStore), applies
    /// the changes and writes the whole file back. A save that changes nothing writes nothing.
    public func save(_ request: DataStoreSaveChangesRequest<DefaultSnapshot>) throws -> DataStoreSaveChangesResult<
        DefaultSnapshot
    > {
        try saves.sync { try saveNow(request) }
    }

    /// `save` on the queue of saves, off the caller's thread, so an `async` caller suspends
    /// instead of blocking a thread of the cooperative pool through the `fsync`s (DECISIONS.md D2);
    /// queued on the caller's actor before it suspends, so saves keep their call order.
    public nonisolated(nonsending) func save(_ request: DataStoreSaveChangesRequest<DefaultSnapshot>) async throws
        -> DataStoreSaveChangesResult<DefaultSnapshot>
    {
        try await withCheckedThrowingContinuation { continuation in
            saves.async { continuation.resume(with: Result { try self.saveNow(request) }) }
        }
    }

    /// One save, on the queue of saves.
    private func saveNow(_ request: DataStoreSaveChangesRequest<DefaultSnapshot>) throws
        -> DataStoreSaveChangesResult<DefaultSnapshot>
    {
        try saveLock.mutex.withLock { _ throws -> DataStoreSaveChangesResult<DefaultSnapshot> in
            var state = try loadState()
            let resolution = try SaveResolver(
                schema: schema, storeIdentifier: identifier, state: state,
                uniqueIndex: uniqueIndex(of: state),
                collisionPolicy: configuration.uniqueCollisionPolicy
            ).resolve(request)
            if !resolution.changes.isEmpty {
                for change in resolution.changes { state.apply(change) }
                try file.replace(with: try Self.encode(document(of: state)), durable: configuration.isDurable)
            }
            var result = DataStoreSaveChangesResult<DefaultSnapshot>(
                storeIdentifier: identifier,
                remappedIdentifiers: resolution.remapped)
            for (identifier, values) in resolution.reregister {
                result.snapshotsToReregister[identifier] = DefaultSnapshot(
                    persistentIdentifier: identifier, values: values)
            }
            return result
        }
    }

    /// The stored snapshots of these models and of every model they refer to, from one read of the file.
    public func fetch<T: PersistentModel>(_ identifiers: [PersistentIdentifier], of type: T.Type) throws
        -> DataStoreFetchResult<T, DefaultSnapshot>
    {
        try stateForFetch(of: T.entityName).fetchResult(identifiers, of: type, storeIdentifier: identifier)
    }

    /// Deletes the file. The store stays usable: it reads as empty, and the next save writes a
    /// new file with the same store identifier.
    public func erase() throws {
        try saveLock.mutex.withLock { _ in try file.remove(durable: configuration.isDurable) }
    }

    // MARK: The file

    private func stateForFetch(of entityName: String) throws -> FoldState {
        guard schema.entity(named: entityName) != nil else { throw LogStoreError.unknownEntity(entityName) }
        return try loadState()
    }

    /// The file's models as a fold state (rows in file order), or an empty state without a file.
    func loadState() throws(ArchiveStoreError) -> FoldState {
        var state = FoldState()
        guard let document = try Self.readDocument(file) else { return state }
        guard document.storeIdentifier == identifier else {
            throw .foreignArchive(path: path, expected: identifier, found: document.storeIdentifier)
        }
        for snapshot in document.snapshots {
            let id = snapshot.persistentIdentifier
            guard id.storeIdentifier == identifier else {
                throw .corruptArchive(path: path, reason: "\(id) belongs to store \(id.storeIdentifier ?? "nil")")
            }
            guard !state.contains(id) else { throw .corruptArchive(path: path, reason: "\(id) appears twice") }
            state.apply(.insert(id, snapshot.values))
        }
        return state
    }

    private func uniqueIndex(of state: FoldState) -> UniqueIndex {
        UniqueIndex(schema: schema, state: state)
    }

    /// Every row of every entity, in insertion order.
    private func document(of state: FoldState) -> Document {
        let rows = state.entities.flatMap { entityName, rows in
            rows.map { primaryKey, row in
                (
                    row.sequence,
                    DefaultSnapshot(
                        persistentIdentifier: .permanent(
                            for: identifier, entityName: entityName,
                            primaryKey: primaryKey),
                        values: row.values.dictionary)
                )
            }
        }
        return Document(
            format: Self.formatVersion, storeIdentifier: identifier,
            snapshots: rows.sorted { $0.0 < $1.0 }.map(\.1))
    }

    private static func readDocument(_ file: ArchiveFile) throws(ArchiveStoreError) -> Document? {
        let path = file.path
        guard let data = try file.contents() else { return nil }
        let document: Document
        do { document = try decoder.decode(Document.self, from: data) } catch {
            // A newer format may not decode at all: name the version when it can be read.
            if let version = try? JSONDecoder().decode(FormatProbe.self, from: data).format, version != formatVersion {
                throw .unsupportedFormat(path: path, version: version)
            }
            throw .corruptArchive(path: path, reason: "\(error)")
        }
        guard document.format == formatVersion else { throw .unsupportedFormat(path: path, version: document.format) }
        return document
    }

    private struct FormatProbe: Decodable {
        var format: Int
    }

    private static func encode(_ document: Document) throws(ArchiveStoreError) -> Data {
        do { return try encoder.encode(document) } catch { throw .encodingFailed(reason: "\(error)") }
    }

    /// Non-finite doubles (and dates) are written as strings: JSON has no NaN or infinity.
    private static let floatStrings = (positiveInfinity: "+Infinity", negativeInfinity: "-Infinity", nan: "NaN")

    private static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(
            positiveInfinity: floatStrings.positiveInfinity, negativeInfinity: floatStrings.negativeInfinity,
            nan: floatStrings.nan)
        return encoder
    }

    private static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(
            positiveInfinity: floatStrings.positiveInfinity, negativeInfinity: floatStrings.negativeInfinity,
            nan: floatStrings.nan)
        return decoder
    }
}
