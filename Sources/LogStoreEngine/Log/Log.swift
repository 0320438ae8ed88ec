import Foundation

/// An append-only log of checksummed, optionally LZ4-compressed records in a store directory.
///
/// The log knows nothing of models: it stores byte payloads tagged with a ``RecordType`` and
/// gives each one a logical offset. Appends are two-phase: ``write(_:type:)`` assigns the offset
/// and writes the bytes; ``waitUntilDurable(_:)`` returns once an `fdatasync` covers them.
/// ``append(_:type:)`` does both as the ``Durability`` option says. A dedicated syncer thread runs
/// every `fdatasync`, so appends from many threads share one.
///
/// ```swift
/// let log = try Log.open(directory: "/var/lib/app/store")
/// let position = try log.append(Array("hello".utf8))
/// var records = try log.records(from: position.offset)
/// while let record = try records.next() { print(record.offset, record.payload.count) }
/// try log.close()
/// ```
///
/// Opening takes an exclusive `flock` on the directory's `LOCK` file and recovers the log (see
/// ``RecoveryReport``); ``openReadOnly(directory:fileSystem:)`` opens beside a live writer and
/// changes nothing on disk.
public final class Log: Sendable {
    let core: LogCore

    init(core: LogCore) {
        self.core = core
    }

    deinit { try? core.close() }

    /// Opens the store in `directory` for writing, creating it when missing (unless
    /// ``LogOptions/createsIfMissing`` is false), and recovers it.
    public static func open(directory: String, options: LogOptions = LogOptions()) throws(LogError) -> Log {
        Log(core: try LogCore.open(directory: directory, options: options))
    }

    /// Opens the store without taking its lock: nothing on disk changes, a damaged tail record
    /// is treated as the end, and every append throws ``LogError/Code/readOnly``.
    public static func openReadOnly(directory: String, fileSystem: any FileSystem = PosixFileSystem()) throws(LogError)
        -> Log
    {
        var options = LogOptions()
        options.fileSystem = fileSystem
        return Log(core: try LogCore.openReadOnly(directory: directory, options: options))
    }

    /// The store's identity, creation time and format version.
    public var meta: StoreMeta { core.meta }
    /// The store's UUID.
    public var storeID: UUID { core.meta.storeID }
    /// The directory the log lives in.
    public var directory: String { core.directory }
    /// What recovery found and did when the log was opened.
    public var recoveryReport: RecoveryReport { core.recoveryReport }
    /// Whether appends are refused (opened read-only, or after a failed sync).
    public var isReadOnly: Bool { core.isReadOnly }
    /// The options the log was opened with.
    public var options: LogOptions { core.options }

    /// Assigns the next offset to a record and writes it. The record is not yet durable, and in
    /// ``Durability/synchronous`` mode not yet visible to readers; pass the result to
    /// ``waitUntilDurable(_:)``.
    @discardableResult
    public func write(_ payload: some Collection<UInt8>, type: RecordType = .data) throws(LogError) -> LogPosition {
        try core.write(payload, type: type)
    }

    /// Returns once an `fdatasync` covers everything up to `position`.
    public func waitUntilDurable(_ position: LogPosition) throws(LogError) {
        try core.waitUntilDurable(endOffset: position.endOffset)
    }

    /// Runs `body` once an `fdatasync` covers everything up to `position` (or the log failed or
    /// closed: then with the error), without blocking a thread: at once when it does already,
    /// else on the thread whose sync (or catch-up) finds it durable — with the log's lock held
    /// (at close, without it): `body` must not block or call the log (signal a semaphore, resume
    /// a continuation). `package`: a body that calls the log deadlocks.
    package func whenDurable(_ position: LogPosition, _ body: @escaping @Sendable (Result<Void, LogError>) -> Void) {
        core.whenDurable(endOffset: position.endOffset, body)
    }

    /// Suspends until an `fdatasync` covers everything up to `position`, without blocking a thread.
    /// `nonisolated(nonsending)`: it registers with the syncer on the caller's actor and resumes
    /// there (no round trip through the cooperative pool).
    public nonisolated(nonsending) func waitUntilDurable(_ position: LogPosition) async throws(LogError) {
        try await core.waitUntilDurableAsync(endOffset: position.endOffset)
    }

    /// Writes a record and, in ``Durability/synchronous`` mode, waits until it is durable.
    @discardableResult
    public func append(_ payload: some Collection<UInt8>, type: RecordType = .data) throws(LogError) -> LogPosition {
        let position = try core.write(payload, type: type)
        if core.options.durability == .synchronous { try core.waitUntilDurable(endOffset: position.endOffset) }
        return position
    }

    /// `append` that suspends instead of blocking while it waits for durability.
    @discardableResult
    public func append(_ payload: some Collection<UInt8>, type: RecordType = .data) async throws(LogError)
        -> LogPosition
    {
        let position = try core.write(payload, type: type)
        if core.options.durability == .synchronous {
            try await core.waitUntilDurableAsync(endOffset: position.endOffset)
        }
        return position
    }

    /// Makes everything written so far durable. Throws the failure if the log has failed.
    public func sync() throws(LogError) {
        try core.sync(through: nil)
    }

    /// Makes everything up to the logical offset `endOffset` durable (for example before a
    /// checkpoint at that offset). Throws if the log failed or was cut back below it.
    public func sync(through endOffset: UInt64) throws(LogError) {
        try core.sync(through: endOffset)
    }

    /// The logical offset of the first retained record.
    public var startOffset: UInt64 { core.startOffset }
    /// The end of what readers see: the durable end in ``Durability/synchronous`` mode, otherwise
    /// the end of the completed writes.
    public var visibleEnd: UInt64 { core.visibleEnd }
    /// The end of the records an `fdatasync` has covered.
    public var durableEnd: UInt64 { core.durableEnd }
    /// The end of the completed writes (durable or not): where the next record will start.
    public var writtenEnd: UInt64 { core.writtenEnd }
    /// Counts of appends and syncs since open.
    public var statistics: LogStatistics { core.statistics }
    /// The base offsets of the segments, oldest first.
    public var segmentBaseOffsets: [UInt64] { core.segmentBaseOffsets }

    /// The records from `offset` (or the first record after it, when `offset` falls inside one)
    /// up to the visible end as of this call. Durable-end marks (FORMAT.md §6.6) and segment
    /// dictionaries (§6.8), the log's own bookkeeping, are skipped unless `includingMarks` is true.
    public func records(from offset: UInt64, includingMarks: Bool = false) throws(LogError) -> LogIterator {
        try core.iterator(from: offset, includesMarks: includingMarks)
    }

    /// The first record starting at or after `offset`, or `nil` at the visible end. Durable-end
    /// marks (FORMAT.md §6.6) and segment dictionaries (§6.8) are skipped unless `includingMarks` is true, which asks what
    /// truly starts there (for example whether an offset is a record boundary).
    public func firstRecord(atOrAfter offset: UInt64, includingMarks: Bool = false) throws(LogError) -> LogRecord? {
        var iterator = try core.iterator(from: offset, includesMarks: includingMarks)
        return try iterator.next()
    }

    /// Deletes, oldest first, every segment whose records all end at or before `endOffset` —
    /// never the last one — and returns the deleted segments' base offsets. History compaction
    /// calls this after a checkpoint covers `endOffset`; the log then starts at a later offset.
    /// Each deletion is made durable (directory fsync) before the next one starts.
    @discardableResult
    public func deleteSegments(endingAtOrBefore endOffset: UInt64) throws(LogError) -> [UInt64] {
        try core.deleteSegments(endingAtOrBefore: endOffset)
    }

    /// Syncs what was written, stops the syncer, closes the files and releases the lock — all of
    /// it even when it throws. Throws ``LogError/Code/syncFailed`` if the final sync fails (the
    /// log was then cut back to its durable end), and the log's failure if an earlier one that
    /// no call has thrown yet happened: a sync on the syncer thread (`.batched`, `.none`) that
    /// failed and cut back records whose writes had returned.
    public func close() throws(LogError) {
        try core.close()
    }
}

/// Counts since the log was opened.
public struct LogStatistics: Sendable, Equatable {
    /// Records written.
    public var appendCount: UInt64 = 0
    /// `fdatasync` calls the syncer completed for records (preallocation rides on these).
    public var syncCount: UInt64 = 0
    /// Segment rolls.
    public var rollCount: UInt64 = 0
    /// Bytes of records written (headers included), durable-end marks included.
    public var byteCount: UInt64 = 0
    /// Payload bytes of the appended records as given (before compression), and as stored
    /// (compressed when that made them smaller: FORMAT.md §6.3, §6.8). Segment dictionaries
    /// count in both.
    public var payloadByteCount: UInt64 = 0
    public var storedPayloadByteCount: UInt64 = 0
    /// Durable-end marks the log appended (FORMAT.md §6.6); not counted in ``appendCount``.
    public var markCount: UInt64 = 0
    /// Times the syncer thread woke from a wait (a diagnostic: an idle log wakes it about once per
    /// ``LogOptions/durableEndMarkDelay`` at most, never in a loop).
    public var syncerWakeCount: UInt64 = 0
    /// A store shared by several writers: turns this process took (D11 stage 2).
    public var turnCount: UInt64 = 0
    /// Of those, turns taken with `TURN` kept since this process's previous turn (parked: no
    /// `flock`, no catch-up; nobody else wrote in between).
    public var keptTurnCount: UInt64 = 0
    /// A store shared by several writers: records of other processes this one caught up with.
    public var caughtUpRecordCount: UInt64 = 0
    /// A store shared by several writers: `fdatasync`s another process's made unnecessary (its
    /// published durable end already covered what this one waited for).
    public var syncsCoveredElsewhere: UInt64 = 0
    /// A store shared by several writers: torn records of a writer that died mid-write, zeroed
    /// by this process's turn before it wrote (D11 "dead writers").
    public var deadWriterTailsCleaned: UInt64 = 0
    /// Bytes those cleanings zeroed.
    public var deadWriterBytesZeroed: UInt64 = 0

    /// Records written per completed sync.
    public var appendsPerSync: Double { syncCount == 0 ? 0 : Double(appendCount) / Double(syncCount) }
}

// MARK: Several processes (DECISIONS.md D11)

extension Log {
    /// Opens the store without taking its lock, with `options` (its file system, and the
    /// durability the reads assume); see ``openReadOnly(directory:fileSystem:)``.
    public static func openReadOnly(directory: String, options: LogOptions) throws(LogError) -> Log {
        Log(core: try LogCore.openReadOnly(directory: directory, options: options))
    }

    /// A read-only log: learns whether the process writing the store published a later visible
    /// end and, if so, checks the new records and shows them. Returns whether anything is new.
    /// When nothing is, this costs one `pread` of the coordination file. A log opened for writing
    /// is the only writer and returns `false`.
    ///
    /// Throws ``LogError/Code/reopenRequired`` when the writer repaired the store or cut it back
    /// in a mode where this log may have shown the records it cut, and
    /// ``LogError/Code/corruption`` when a record before the published end does not check out.
    @discardableResult
    public func refresh() throws(LogError) -> Bool {
        try core.followShared()
    }

    /// The writer moved something readers keep apart from the records (the history low-water
    /// mark, recorded in a checkpoint): bumps the coordination file's maintenance counter, so
    /// read-only processes reload it (``followedMaintenanceCounter``). Does nothing read-only.
    ///
    /// In a store shared by several writing processes the other writers follow it too; there it
    /// throws when slot 1 cannot be read or written (they then learn of the new mark only when
    /// they take the maintenance lock or open the store).
    public func publishMaintenance() throws(LogError) {
        try core.publishMaintenance()
    }

    /// A store shared by several writing processes: drops from this process's list the segments
    /// whose records all end at or before `endOffset` (never the last), which another process
    /// deleted by moving the history low-water mark. Nothing on disk changes; a reader that holds
    /// one keeps its descriptor until it is done, and the descriptor closes with the last of them.
    public func forgetSegments(endingAtOrBefore endOffset: UInt64) throws(LogError) {
        _ = try core.takeSegments(endingAtOrBefore: endOffset)
    }

    /// Whether this log was opened for writing (it holds `LOCK`, exclusive or — a store shared by
    /// writers — shared); a log opened read-only beside a writer does not.
    public var holdsLock: Bool { core.directoryLock != nil }

    /// Whether several processes may write this store (``LogOptions/allowsOtherWriters``).
    public var isSharedByWriters: Bool { core.writers != nil }

    /// Whether this process was the only one with the store open when it opened it (a store
    /// not shared by writers always is). Only such a process changes the schema (D11).
    public var wasOpenedAlone: Bool { core.directoryLock?.wasAlone ?? true }

    /// A store shared by several writing processes (D11 stage 2): takes this process's turn —
    /// the in-process mutex, then `TURN` (at most 30 s) — and catches up with every record the
    /// others appended since this process's written end: records before their published written
    /// end must check out (else corruption); a torn record a writer that died left past it is
    /// zeroed. Every ``write(_:type:)`` of a shared store happens between this and ``endTurn()``,
    /// on the same thread. Does nothing in a store not shared.
    public func beginTurn() throws(LogError) {
        try core.beginTurn()
    }

    /// A store shared by writers: how long ago this process last read records another process
    /// wrote, at a turn's catch-up or a refresh (`nil`: never since the open, or not shared).
    /// Nanoseconds.
    package var nanosecondsSinceOtherWritersWrote: UInt64? {
        core.conditionLock.withLock { core.state.lastForeignRecordsNanoseconds.map { monotonicNanoseconds() - $0 } }
    }

    /// A store shared by writers: the turn slot as this process last read or wrote it — its
    /// counter, written end and last segment's base (tests: a catch-up that throws leaves it).
    package var turnSlotSeen: (counter: UInt64, writtenEnd: UInt64, lastSegmentBase: UInt64) {
        core.conditionLock.withLock {
            (core.state.turnCounter, core.state.publishedTurnEnd, core.state.publishedTurnBase)
        }
    }

    /// Publishes the written end in the turn slot and releases the turn.
    public func endTurn() {
        core.endTurn()
    }

    /// A store shared by several writing processes (D11): takes the maintenance lock — this
    /// process's mutex, then `MAINTENANCE` — under which one process at a time writes a
    /// checkpoint and prunes the older ones. Taken before the turn, never while this thread holds
    /// it. With `waits`, waits at most 30 s (then ``LogError/Code/locked``, naming `what`);
    /// without, returns `false` at once when another thread or process holds it. In a store not
    /// shared it takes nothing and returns `true` (the store's own bookkeeping orders checkpoints).
    public func beginMaintenance(waits: Bool, for what: String) throws(LogError) -> Bool {
        guard let writers = core.writers else { return true }
        guard waits else { return writers.maintenance.tryAcquire() }
        try writers.maintenance.acquire(for: what)
        return true
    }

    /// Releases the maintenance lock (on the thread that took it).
    public func endMaintenance() {
        core.writers?.maintenance.release()
    }

    /// A writer of a shared store, without the turn: learns the shared durable end from the
    /// coordination file and reads (and checks) the records up to it that other processes wrote.
    /// Returns whether the durable end moved. One `pread` when nothing is new.
    @discardableResult
    public func refreshFromOtherWriters() throws(LogError) -> Bool {
        try core.refreshSharedWriter()
    }

    /// A writer of a shared store: the records from `offset` up to the written end as this process
    /// knows it (others' records caught up with included, durable or not).
    public func recordsThroughWrittenEnd(from offset: UInt64) throws(LogError) -> LogIterator {
        try core.iteratorThroughWrittenEnd(from: offset)
    }

    /// A read-only log: the writer's maintenance counter as of the last ``refresh()`` (or the open).
    public var followedMaintenanceCounter: UInt64 { core.followedMaintenanceCounter }

    /// Calls `onChange` on a thread of its own whenever the writing process may have published
    /// new records (inotify on Linux, a look every 10 ms elsewhere or on a simulated file system);
    /// `onChange` typically calls ``refresh()``. Keep the watcher: releasing it, or calling
    /// ``ChangeWatcher/cancel()``, stops it.
    /// `pauseMilliseconds`: with inotify, the pause after each call in which further changes are
    /// gathered into the next one.
    public func watchForChanges(
        pauseMilliseconds: Int = ChangeWatcher.defaultPauseMilliseconds, _ onChange: @escaping @Sendable () -> Void
    ) -> ChangeWatcher {
        ChangeWatcher(
            directory: directory, fileName: FormatConstants.coordinationFileName,
            usesInotify: core.fileSystem is PosixFileSystem, pauseMilliseconds: pauseMilliseconds, onChange: onChange)
    }
}
