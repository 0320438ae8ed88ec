import Foundation
import LogStoreEngine
import Synchronization

/// The log-backed ``DataStore``: every save appends one transaction record holding the save's
/// resolved changes; the state is the fold of those records.
///
/// Saves are validated and written under one lock (so concurrent saves get consecutive offsets
/// and see each other's effects), then wait for durability outside it — concurrent saves share
/// one `fdatasync`. Fetches read the *published* state: everything up to the log's visible end
/// (in synchronous mode, only durable saves).
public final class LogStore: DataStore, @unchecked Sendable {
    // @unchecked: all mutable state is in `inner`, behind a Mutex; the rest is immutable.
    public typealias Snapshot = DefaultSnapshot

    public let configuration: LogStoreConfiguration
    public let schema: Schema
    public let identifier: String
    let log: Log
    let inner: SleepingMutex<Inner>
    /// Checkpoint bookkeeping (LogStore+Checkpoint.swift).
    let checkpoints: CheckpointState

    struct Inner: @unchecked Sendable {
        // @unchecked: only touched inside the Mutex.
        var table: SchemaTable
        /// Every written save applied: what the next save is validated against.
        var working: FoldState
        /// Saves up to the log's visible end: what fetches see.
        var published: FoldState
        var uniqueIndex: UniqueIndex
        /// Written saves not yet published, in log order.
        var pending: [(position: LogPosition, changes: [ResolvedChange])] = []
        /// The token of the newest published transaction.
        var publishedToken: HistoryToken?
        /// Whether the state was folded again after the log failed (see `refreshAfterLogFailure`).
        var refoldedAfterFailure = false
        var lastTimestampMicroseconds: Int64
        var closed = false
    }

    /// `pid@host` plus a UUID made once per process launch (DECISIONS.md D5).
    public static let processIdentifier: String = {
        let info = ProcessInfo.processInfo
        return "\(info.processIdentifier)@\(info.hostName) \(UUID().uuidString)"
    }()

    public init(_ configuration: LogStoreConfiguration, migrationPlan: (any SchemaMigrationPlan.Type)? = nil) throws {
        guard let schema = configuration.schema else {
            throw LogStoreError.schemaMismatch(entity: "", attribute: nil, reason: "the configuration has no schema")
        }
        let log: Log
        do { log = try Log.open(directory: configuration.directory, options: configuration.logOptions) } catch {
            throw LogStoreError.log(error)
        }
        do {
            // Start from the newest checkpoint (every one is validated first), replay the rest.
            let loaded = try Self.loadCheckpoints(log: log, configuration: configuration)
            var start = Replay.Result()
            if let newest = loaded.newest {
                start.table = newest.header.table
                start.state = newest.state
                start.lastToken = newest.header.lastToken
                start.lastTimestampMicroseconds = newest.header.lastTimestampMicroseconds
            }
            let replayed = try Replay(log: log, storeIdentifier: log.storeID.uuidString)
                .run(from: start, startOffset: loaded.newest?.header.offset)
            var table = replayed.table
            if let extended = try table.extended(toCover: schema) {
                table = extended
                try Self.append(table.encoded(), type: .schema, to: log)
            }
            var uniqueIndex = UniqueIndex(schema: schema)
            let storeIdentifier = log.storeID.uuidString
            for entity in schema.entities where uniqueIndex.constraints[entity.name] != nil {
                uniqueIndex.reserveCapacity(replayed.state.count(of: entity.name), entity: entity.name)
                for (primaryKey, row) in replayed.state.rows(of: entity.name) {
                    uniqueIndex.replace(.identifier(for: storeIdentifier, entityName: entity.name, primaryKey: primaryKey),
                                        old: nil, new: row.values)
                }
            }
            self.configuration = configuration
            self.schema = schema
            self.identifier = log.storeID.uuidString
            self.log = log
            self.checkpoints = CheckpointState(loaded: loaded, replayedRecordCount: replayed.recordCount)
            self.inner = SleepingMutex(Inner(table: table, working: replayed.state, published: replayed.state,
                                     uniqueIndex: uniqueIndex, publishedToken: replayed.lastToken,
                                     lastTimestampMicroseconds: replayed.lastTimestampMicroseconds))
        } catch {
            try? log.close()
            throw error
        }
    }

    deinit { try? log.close() }

    /// Syncs and closes the log. Further calls throw.
    public func close() throws {
        inner.withLock { $0.closed = true }
        checkpoints.close() // cancels a running checkpoint and waits for it
        do { try log.close() } catch { throw LogStoreError.log(error) }
    }

    /// The token of the newest visible transaction, or `nil` when there is none yet.
    public var currentToken: HistoryToken? {
        refreshAfterLogFailure()
        return inner.withLock { $0.publishedToken }
    }

    /// After a failed sync the log cut itself back to its durable end. In `.none`/`.batched` mode
    /// saves were published at write, so the published state may hold saves the log no longer
    /// has: fold the log again (once) so that everything sees exactly what the log holds.
    func refreshAfterLogFailure() {
        guard log.isReadOnly, !inner.withLock({ $0.refoldedAfterFailure }) else { return }
        let replayed = try? Replay(log: log, storeIdentifier: identifier).run()
        inner.withLock { inner in
            guard !inner.refoldedAfterFailure else { return }
            inner.refoldedAfterFailure = true
            if let replayed {
                inner.published = replayed.state
                inner.publishedToken = replayed.lastToken
            }
            inner.working = inner.published
            inner.pending.removeAll()
        }
    }

    /// What opening the log found and did (torn tail cut, temporary files removed…).
    public var recoveryReport: RecoveryReport { log.recoveryReport }

    static func append(_ payload: [UInt8], type: RecordType, to log: Log) throws(LogStoreError) {
        do {
            let position = try log.write(payload, type: type)
            try log.waitUntilDurable(position)
        } catch {
            throw .log(error)
        }
    }
}

extension LogStore {
    /// The log's append and sync counts since open (for example, saves per `fdatasync`).
    public var logStatistics: LogStatistics { log.statistics }
    /// The log's visible end: where the next transaction will start.
    public var logEndOffset: UInt64 { log.visibleEnd }
}
