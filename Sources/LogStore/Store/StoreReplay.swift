import Foundation
import LogStoreEngine

/// The models of a store as its log folds to, read without the model types and without the
/// writer's lock (what `logstore replay` prints).
///
/// ```swift
/// let state = try LogStore.replay(directory: "/var/lib/trips")
/// for entity in state.entities {
///     print(entity.name, entity.rows.count)
/// }
/// ```
public struct StoreState: Sendable, Hashable {
    /// One entity of the stored schema and its models.
    public struct Entity: Sendable, Hashable {
        public var name: String
        /// Attribute and relationship names in the stored schema's order (declaration order;
        /// properties added by later schema versions come last).
        public var attributeNames: [String]
        /// The models, in insertion order, with their values as stored. A model saved before an
        /// attribute was added has no value for it.
        public var rows: [DefaultSnapshot]
    }

    /// The directory the store was read from.
    public var directory: String
    /// The store's UUID: the store identifier of every ``PersistentIdentifier`` in ``entities``.
    public var storeIdentifier: UUID
    /// The version of the last schema record folded, or `nil` when the log (up to the replayed
    /// offset) holds none: then it is not a model store, or its first open has not finished.
    public var schemaVersion: UInt32?
    /// The entities of the stored schema, in the order they were added to it.
    public var entities: [Entity]
    /// How many transaction records were folded.
    public var transactionCount: Int
    /// The token of the last transaction folded, or `nil` when there is none.
    public var lastToken: HistoryToken?
    /// Non-zero bytes after the last good record, which the replay stopped at (see
    /// `RecoveryReport.unreadTail`); `logstore verify` tells whether they are a torn tail or damage.
    public var unreadTail: RecoveryReport.DroppedRecord?
    /// The checkpoint a time-travel replay started from (``transactionCount`` then counts only
    /// the transactions after it), or `nil` when it folded from the log's start.
    public var checkpointOffset: UInt64? = nil

    /// The entity with this name, if the stored schema has it.
    public func entity(named name: String) -> Entity? {
        entities.first { $0.name == name }
    }
}

extension LogStore {
    /// Folds the log of the store in `directory` into its models, read-only: the log is opened
    /// with `Log.openReadOnly` (no lock, nothing on disk changes, a torn tail record counts as
    /// the end), so this runs beside a live writer and needs no model types.
    ///
    /// - Parameter offset: stop after the record at this log offset (inclusive) — a history
    ///   token's ``HistoryToken/offset`` gives the state right after that transaction. `nil`
    ///   folds the whole log.
    /// - Throws: ``LogStoreError/log(_:)`` when the store cannot be opened or read,
    ///   ``LogStoreError/corruptRecord(offset:reason:)`` when a record does not decode.
    public static func replay(directory: String, fileSystem: any FileSystem = PosixFileSystem(),
                              through offset: UInt64? = nil) throws(LogStoreError) -> StoreState {
        let log = try openReadOnlyLog(directory: directory, fileSystem: fileSystem)
        defer { try? log.close() }
        let limit = offset.map { $0 == .max ? $0 : $0 + 1 } ?? log.visibleEnd
        return try foldReadOnly(log, configuration: LogStoreConfiguration(directory: directory, fileSystem: fileSystem),
                                through: offset, checkpointAtOrBefore: limit)
    }

    /// Opens a store's log read-only (no lock, nothing changes on disk).
    static func openReadOnlyLog(directory: String, fileSystem: any FileSystem) throws(LogStoreError) -> Log {
        // Log.openReadOnly says "does not exist" for a regular file; say what it is instead.
        if let kind = try? fileSystem.kind(of: directory), kind != .directory {
            throw .log(LogError(.notAStore, "\(directory) is a file, not a store directory.", file: directory))
        }
        do { return try Log.openReadOnly(directory: directory, fileSystem: fileSystem) } catch { throw .log(error) }
    }

    /// Folds a read-only log through `offset` (inclusive; `nil`: everything), starting from the
    /// newest checkpoint at or before `limit`: after history deletion the log alone no longer
    /// holds the oldest records' effects.
    static func foldReadOnly(_ log: Log, configuration: LogStoreConfiguration, through offset: UInt64?,
                             checkpointAtOrBefore limit: UInt64) throws(LogStoreError) -> StoreState {
        let (result, checkpointOffset) = try fold(log: log, configuration: configuration, through: offset, endingAt: limit)
        var state = storeState(result, directory: configuration.directory, log: log)
        state.checkpointOffset = checkpointOffset
        return state
    }
}
