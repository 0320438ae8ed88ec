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
    // @unchecked: all mutable state is in `inner`, behind a SleepingMutex; the rest is immutable.
    /// The snapshot type it exchanges with contexts.
    public typealias Snapshot = DefaultSnapshot

    /// The configuration it was opened with.
    public let configuration: LogStoreConfiguration
    /// The schema it works with: the configuration's, or the stored one (``usesStoredSchema``).
    public let schema: Schema
    /// Each entity's properties (``Schema/Entity/properties`` builds the array anew), by name,
    /// for the save resolver.
    let entityProperties: [String: [Schema.Property]]
    /// Opened without a schema in code (tools): the stored schema, and saves are refused.
    public var usesStoredSchema: Bool { configuration.schema == nil }
    /// The store's UUID (from `store.meta`) as a string: the store identifier of its permanent
    /// ``PersistentIdentifier``s and history tokens.
    public let identifier: String
    let log: Log

    // Lock order (outermost first; a thread holding one may take only those after it), checked
    // in debug builds by LockOrder (LogStoreEngine/System/LockOrder.swift):
    //   1. `compactionLock`   — one history deletion / retention pass at a time; held across
    //                           its checkpoint and segment deletions.
    //   2. checkpoint writer  — `checkpoints.beginOnDemand`/`beginAutomatic` … `end`: a role
    //                           (a flag under CheckpointState's condition), not a held mutex; its
    //                           holder may take 3 and 4 but never 1.
    //   3. `inner`            — the state; saves resolve, encode and `log.write` under it (in a
    //                           store shared by writers, `log.write` runs after `inner` is
    //                           released, under the turn: it may wait for another process's SYNC).
    //   4. the log's locks    — LogStoreEngine (`LogCore.conditionLock`), taken under `inner` by
    //                           `log.write`; the engine never calls back up.
    //   Leaves (take nothing while held): CheckpointState's condition, `retentionSchedule`,
    //   `tailSignal`, HistoryChanges' mutex, HistoryBatch's memo. Blocking waits for durability (`waitUntilDurable`)
    //   and checkpoint/retention threads run with none of 1–3 held, except compaction's own
    //   checkpoint under 1.
    let inner: SleepingMutex<Inner>
    /// Checkpoint bookkeeping (LogStore+Checkpoint.swift).
    let checkpoints: CheckpointState
    /// One history deletion (or retention pass) at a time (History/LogStore+History.swift).
    let compactionLock = OrderedLock(.historyCompaction)
    /// Background retention passes (History/LogStore+Retention.swift).
    let retentionSchedule = RetentionSchedule()
    /// Wakes live history tails after saves (History/HistoryTail.swift).
    let tailSignal = TailSignal()
    /// Which author wrote each transaction of the stretch of log history fetches with an author
    /// filter read (D6): later ones read only the records they take.
    let historyAuthorIndex = HistoryAuthorIndex()
    /// Opened read-only (`allowsSave: false`): no lock, no writes; it follows the process that
    /// writes the store (Store/LogStore+Processes.swift).
    public let isReadOnly: Bool
    /// The watch on other processes' publications (inotify, or a 10 ms look) of a read-only store
    /// or a store shared by writers, from the open.
    let changeWatcher = Mutex(ChangeWatch())
    /// A store shared by writing processes: `inner`'s follow state, for the follow's fast path.
    let followMirror = FollowMirror()
    /// A store shared by writing processes: writes this process's saves in call order, in
    /// batches under one turn (set once `log` is; unused in a store not shared).
    let saveWriter: SaveWriter
    /// A store shared by writing processes: writes synchronous saves called at once, while no
    /// other process writes, in batches under one turn on one of their callers' threads.
    let saveCombiner = SaveCombiner()
    /// ``inlineSaveQuietNanosecondsDefault``; tests set a longer one (a loaded machine can take
    /// over a second for a few saves).
    let inlineSaveQuietNanoseconds = Atomic<UInt64>(LogStore.inlineSaveQuietNanosecondsDefault)
    /// Saves that returned on ``FollowMirror/publishedVisibleEnd`` without publishing (tests).
    let publicationsSkipped = Atomic<Int>(0)

    /// What a writer of a shared store folded and published, copied out of `inner` as it changes:
    /// the change watcher wakes at every write to the coordination file — this process's own
    /// included, one per save and one per sync — and most wakes find nothing new; they learn it
    /// from these and the log without taking `inner` (which saves and fetches hold).
    final class FollowMirror: Sendable {
        let workingEnd = Atomic<UInt64>(0)
        let loadedMaintenanceCounter = Atomic<UInt64>(0)
        /// The visible end the last publication published through: every pending record ends past
        /// it. Kept in every store (stored under `inner` after the published state took the
        /// records): a save whose record ends at or before it was published by another save's
        /// publication — the first waiter of a group commit to publish takes the others' too — and
        /// returns without taking `inner` again. (After a failed sync the published state may be
        /// folded again to the cut-back durable end, below this; no save follows a failed sync.)
        let publishedVisibleEnd = Atomic<UInt64>(0)
    }

    struct Inner: @unchecked Sendable {
        // @unchecked: only touched inside the Mutex.
        var table: SchemaTable
        /// Every written save applied: what the next save is validated against.
        var working: FoldState
        /// Saves up to the log's visible end: what fetches see.
        var published: FoldState
        var uniqueIndex: UniqueIndex
        /// Written saves not yet published, in log order, with the rows their inserts made in
        /// `working` (``foldWritten(_:at:)``), which `published` takes as they are (an insert of
        /// another process's record keeps no values here: ``foldForeign(_:values:at:)``).
        var pending: [(position: LogPosition, changes: [ResolvedChange], insertedRows: [RowValues])] = []
        /// The token of the newest published transaction.
        var publishedToken: DefaultHistoryToken?
        /// Whether the state was folded again after the log failed (see `refreshAfterLogFailure`).
        var refoldedAfterFailure = false
        var lastTimestampMicroseconds: Int64
        var closed = false
        /// L: the newest deleted transaction; it and everything before it are invisible (D6).
        var lowWaterMark: DefaultHistoryToken?
        /// The checkpoint holding the state right after L (kept by pruning).
        var lowWaterMarkCheckpointOffset: UInt64?
        /// Registered history consumers, after every written record (D7).
        var bookmarks: [String: CheckpointBookmark] = [:]
        /// The end of the last bookmark record written since open (0: none): a history deletion
        /// syncs through it before its checkpoint, so that the acknowledgement or removal that
        /// let L move is durable before L is (LogStore+History.swift, `compact(to:)`).
        var bookmarkRecordEnd: UInt64 = 0
        /// A read-only store: the log offset up to which `published` folds the log.
        var foldedEnd: UInt64 = 0
        /// A read-only store: the writer's maintenance counter when L was last loaded.
        var loadedMaintenanceCounter: UInt64 = 0 {
            didSet { mirror?.loadedMaintenanceCounter.store(loadedMaintenanceCounter, ordering: .releasing) }
        }
        /// A store shared by writing processes: the log offset through which `working` and
        /// `pending` fold the log (this process's records and the others' it caught up with).
        var workingEnd: UInt64 = 0 {
            didSet { mirror?.workingEnd.store(workingEnd, ordering: .releasing) }
        }
        /// A store shared by writing processes: what a follow reads without taking this lock.
        var mirror: FollowMirror?
        /// A store shared by writing processes: updates and deletes this process's saves dropped
        /// because another process had deleted the model (D11 stage 2, lost updates).
        var droppedChangeCount = 0
        /// The buffers this process's saves encode their records in (reused, TransactionRecord).
        var encodingBuffers = TransactionRecord.EncodingBuffers()
        /// A store shared by writing processes: the decoder the last catch-up fold used (its
        /// table's lookups), reused while `table` is the same.
        var foldDecoder: TransactionRecord.Decoder?

        var bookmarkList: [CheckpointBookmark] { bookmarks.values.sorted { $0.name < $1.name } }
    }

    /// `pid@host` plus a UUID made once per process launch (DECISIONS.md D5).
    public static let processIdentifier: String = {
        let info = ProcessInfo.processInfo
        return "\(info.processIdentifier)@\(info.hostName) \(UUID().uuidString)"
    }()

    /// Opens (or creates) the store the configuration describes and checks its schema against
    /// the stored one. A configuration without a schema opens an existing store with the schema
    /// it stores, for tools without the model types (history, compaction): saves are then refused.
    /// With a `migrationPlan`, the plan's stages run from the version the store records (or the
    /// first the stored schema matches) to the configuration's schema (``SchemaMigrationPlan``).
    public init(_ configuration: LogStoreConfiguration, migrationPlan: (any SchemaMigrationPlan.Type)? = nil) throws {
        let log: Log
        let isReadOnly = !configuration.allowsSave
        do {
            log =
                isReadOnly
                ? try Log.openReadOnly(directory: configuration.directory, options: configuration.logOptions)
                : try Log.open(directory: configuration.directory, options: configuration.logOptions)
        } catch {
            throw LogStoreError.log(error)
        }
        // A store shared by writing processes (D11 stage 2): the open folds and may append (schema
        // additions, a migration) under the turn, from a log made durable to its end first, so
        // the fold is exactly the log when it appends.
        if log.isSharedByWriters {
            do throws(LogError) {
                try log.beginTurn()
            } catch {
                try? log.close()
                throw LogStoreError.log(error)
            }
        }
        defer { log.endTurn() }
        do {
            if log.isSharedByWriters {
                do throws(LogError) { try log.sync() } catch { throw LogStoreError.log(error) }
            }
            // Start from the newest checkpoint (every one is validated first), replay the rest.
            var loaded = try CheckpointFiles(
                log: log, directory: configuration.directory,
                fileSystem: configuration.fileSystem
            ).load(log: log)
            let checkpointOffset = loaded.newest?.header.offset
            var start = Replay.Result()
            if let newest = loaded.newest {
                // The checkpoint's state moves into the replay, which then folds it in place
                // (`Replay.run`): `loaded` lives on (CheckpointState) and must not hold it too.
                loaded.newest?.state = FoldState()
                start = Replay.Result(checkpoint: newest.header, state: newest.state)
            } else if log.startOffset > 0 {
                throw LogStoreError.log(
                    LogError(
                        .corruption,
                        "The log of \(configuration.directory) starts at offset "
                            + "\(log.startOffset) (older history was deleted) but no checkpoint holds the state before it.",
                        file: configuration.directory))
            }
            var replayed = try Replay(log: log, storeIdentifier: log.storeID.uuidString)
                .run(from: consume start, startOffset: checkpointOffset)
            // D11: the schema changes only in a process that opened the store alone (the others'
            // folds would move under them); one that is not alone refuses to open instead.
            let besideOtherWriters = log.isSharedByWriters && !log.wasOpenedAlone
            func refuseSchemaChange(_ what: String) -> LogStoreError {
                LogStoreError.log(
                    LogError(
                        .locked,
                        "The store at \(configuration.directory) needs \(what), and other processes have it open "
                            + "for writing: migrate it while no other process has the store open (open it with "
                            + "these models when it is alone), then open it beside the others.",
                        file: configuration.directory))
            }
            if replayed.pendingMigration != nil {
                guard !besideOtherWriters else { throw refuseSchemaChange("an interrupted migration voided") }
                // A migration cut between its schema record and the transaction completing it:
                // void it now (any record but a transaction does), before a save could follow it
                // or a checkpoint past it could forget it (docs/FORMAT.md §6.7).
                let end = log.visibleEnd
                try Self.append(replayed.table.encoded(), type: .schema, to: log)
                replayed = try Replay(log: log, storeIdentifier: log.storeID.uuidString).run(
                    from: consume replayed, startOffset: end)
            }
            guard let schema = configuration.schema ?? replayed.table.storedSchema else {
                throw LogStoreError.schemaMismatch(
                    entity: "", attribute: nil,
                    reason: "the configuration has no "
                        + "schema and the store stores none yet (open it once with its models)")
            }
            // A read-only store never writes: a migration is for the process that writes the store.
            if configuration.schema != nil, let migrationPlan, !isReadOnly {
                var runner = MigrationRunner(log: log, configuration: configuration, schema: schema)
                if besideOtherWriters { runner.refusal = refuseSchemaChange("a migration") }
                replayed = try runner.run(migrationPlan, from: replayed)
            }
            if configuration.schema != nil, let extended = try replayed.table.extended(toCover: schema) {
                guard !isReadOnly else {
                    throw LogStoreError.schemaMismatch(
                        entity: "", attribute: nil,
                        reason: "the store was opened read-only (allowsSave is false) and the models in code add "
                            + "to its stored schema; open it once for writing to record the additions")
                }
                // Additions and renames in code: one schema record, folded like any other.
                // Beside other writers too: additions are folded by the others (foldOtherWritersLocked).
                let end = log.visibleEnd
                try Self.append(extended.encoded(), type: .schema, to: log)
                replayed = try Replay(log: log, storeIdentifier: log.storeID.uuidString).run(
                    from: consume replayed, startOffset: end)
            }
            let table = replayed.table
            // A replay grew each entity's key table by doubling (8.4 bytes a row at a million,
            // where one made for the count has 6): trimmed once, before it is shared.
            replayed.state.trimIndexes()
            // A read-only store never saves, and its follower replaces the working state
            // wholesale (LogStore+Processes.swift): it keeps no unique index.
            let uniqueIndex = isReadOnly ? UniqueIndex(schema: schema) : UniqueIndex(schema: schema, state: replayed.state)
            self.configuration = configuration
            self.schema = schema
            self.entityProperties = Dictionary(schema.entities.map { ($0.name, $0.properties) }) { first, _ in first }
            self.identifier = log.storeID.uuidString
            self.log = log
            self.saveWriter = SaveWriter(
                beginTurn: { [log] in
                    do throws(LogError) { try log.beginTurn() } catch { return error }
                    return nil
                }, endTurn: { [log] in log.endTurn() })
            self.isReadOnly = isReadOnly
            self.checkpoints = CheckpointState(loaded: loaded, replayedRecordCount: replayed.recordCount)
            self.inner = SleepingMutex(
                level: .storeState,
                Inner(
                    table: table, working: replayed.state, published: replayed.state,
                    uniqueIndex: uniqueIndex, publishedToken: replayed.lastToken,
                    lastTimestampMicroseconds: replayed.lastTimestampMicroseconds,
                    lowWaterMark: loaded.lowWaterMark,
                    lowWaterMarkCheckpointOffset: loaded.lowWaterMarkCheckpointOffset,
                    bookmarks: replayed.bookmarks, foldedEnd: log.visibleEnd,
                    loadedMaintenanceCounter: log.followedMaintenanceCounter, workingEnd: log.visibleEnd))
        } catch {
            try? log.close()
            throw error
        }
        if log.isSharedByWriters {
            inner.withLock { inner in
                inner.mirror = followMirror
                followMirror.workingEnd.store(inner.workingEnd, ordering: .releasing)
                followMirror.loadedMaintenanceCounter.store(inner.loadedMaintenanceCounter, ordering: .releasing)
            }
        }
        if isReadOnly {
            startFollowing(pauseMilliseconds: ChangeWatcher.defaultPauseMilliseconds)
        } else if log.isSharedByWriters {
            // Quietly until a history tail waits (`followForTail`).
            startFollowing(pauseMilliseconds: Self.quietWatchPauseMilliseconds)
        }
        if !isReadOnly {
            // A compaction cut short (a crash, a full disk) left segments wholly at or below L:
            // finish it (in a store shared by writers under MAINTENANCE, when nobody holds it).
            finishCompaction()
        }
    }

    deinit {
        saveWriter.stop()
        try? log.close()
        if configuration.isStoredInMemoryOnly { try? FileManager.default.removeItem(atPath: configuration.directory) }
    }

    /// Whether ``close()`` has not begun.
    var isOpen: Bool { inner.withLock { !$0.closed } }

    /// Throws ``LogError/Code/closed`` once ``close()`` has begun: a closed store answers nothing
    /// from the memory it kept.
    func checkOpen() throws(LogStoreError) {
        guard inner.withLock({ !$0.closed }) else {
            throw .log(LogError(.closed, "The store at \(configuration.directory) is closed.", file: configuration.directory))
        }
    }

    /// Syncs and closes the log; further calls throw. Everything is closed (the log, its syncer,
    /// the directory lock) even when it throws. Throws when the final sync fails, and when the
    /// log failed a sync earlier that no save or sync has reported (in `.batched` or `.none`
    /// durability the syncer's `fdatasync` failed and cut back saves that had returned:
    /// `LogError.Code.syncFailed`).
    public func close() throws {
        inner.withLock { $0.closed = true }
        saveWriter.stop()  // saves queued meanwhile throw `closed`
        changeWatcher.withLock { watch in
            watch.isStopped = true
            return watch.watcher
        }?.cancel()
        tailSignal.close()
        checkpoints.close()  // cancels a running checkpoint and waits for it
        // A running compaction or retention pass (its checkpoint just failed, or it is deleting
        // segments) finishes before the log closes and the lock is released (D8).
        compactionLock.lock()
        compactionLock.unlock()
        do { try log.close() } catch { throw LogStoreError.log(error) }
        // A store only in memory is gone with its last close.
        if configuration.isStoredInMemoryOnly { try? FileManager.default.removeItem(atPath: configuration.directory) }
    }

    /// The token of the newest visible transaction, or `nil` when there is none yet.
    ///
    /// In a read-only store this does not throw: an error following the writing process
    /// (``LogStoreError/Code/reopenRequired``, corruption) is not reported here — the answer is then
    /// the state as last followed. A fetch, history fetch or tail throws it.
    public var currentToken: DefaultHistoryToken? {
        try? followOtherProcess()
        refreshAfterLogFailure()
        return inner.withLock { $0.publishedToken }
    }

    /// After a failed sync the log cut itself back to its durable end. In `.none`/`.batched` mode
    /// saves were published at write, so the published state may hold saves the log no longer
    /// has: fold the log again (once) so that everything sees exactly what the log holds.
    func refreshAfterLogFailure() {
        // A store opened read-only never failed a sync: its log is read-only from the start, and a
        // refold here would race the fold of the writer's new records (followOtherProcess).
        guard !isReadOnly, log.isReadOnly, !inner.withLock({ $0.refoldedAfterFailure }) else { return }
        // From the newest checkpoint: after history deletion the log alone does not hold the state.
        let replayed = try? reader.fold(through: nil, endingAt: log.visibleEnd).result
        inner.withLock { inner in
            guard !inner.refoldedAfterFailure else { return }
            inner.refoldedAfterFailure = true
            if let replayed {
                inner.published = replayed.state
                inner.publishedToken = replayed.lastToken
                inner.bookmarks = replayed.bookmarks
            }
            forgetUnpublished(&inner)
        }
    }

    /// Reads this store's log and checkpoint files (folds from a checkpoint, time travel).
    var reader: StoreReader {
        StoreReader(log: log, directory: configuration.directory, fileSystem: configuration.fileSystem)
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
    /// A store shared by writing processes: updates and deletes of models another process had
    /// deleted, dropped by this process's saves since open (never resurrected).
    public var droppedChangeCount: Int { inner.withLock { $0.droppedChangeCount } }
}
