import Foundation
import Synchronization

/// The log's shared state and the operations on it. ``Log`` is the public face; the syncer
/// thread holds the core (not the ``Log``), so dropping the last ``Log`` reference closes it.
///
/// `@unchecked Sendable`: every mutable field lives in `state`, which is read and written only
/// while `conditionLock` is held; the other fields are constants.
final class LogCore: @unchecked Sendable {
    let directory: String
    let options: LogOptions
    let meta: StoreMeta
    let recoveryReport: RecoveryReport
    let fileSystem: any FileSystem
    /// `nil` for a read-only open.
    let directoryLock: DirectoryLock?
    /// A store shared by several writing processes (``LogOptions/allowsOtherWriters``): its
    /// `TURN` and `SYNC` locks. `nil` otherwise: nothing of D11 stage 2 runs.
    let writers: SharedWriters?

    /// The dictionary of the last segment as last seen under the lock: appends compress against it
    /// before taking the lock, and check under it that their segment has it.
    let compressionDictionary = Mutex<RecordDictionary?>(nil)
    /// Which payloads are offered to LZ4 while payloads keep coming out no smaller.
    let compressionBackoff = CompressionBackoff()

    let conditionLock = ConditionLock()
    /// Guarded by `conditionLock`.
    var state: State

    struct State {
        /// Oldest first; the last one is written to.
        var segments: [SegmentFile]
        /// End of the completed writes.
        var writtenEnd: UInt64
        /// End of what an `fdatasync` covered.
        var durableEnd: UInt64
        /// The highest end a waiter asked to be made durable.
        var syncRequestedEnd: UInt64
        /// Set by a failed sync (or a failed write): the log is read-only from then on.
        var failure: LogError?
        /// A caller was told of `failure` (a write, sync or wait threw it, or an error naming it):
        /// until then ``LogCore/close()`` throws it. A sync failing on the syncer thread, in the
        /// background of `.batched` or `.none` mode, cuts back saves that were acknowledged and
        /// tells nobody; a `close()` returning normally would call them durable.
        var failureReported = false
        var isReadOnly: Bool
        var isClosed = false
        var syncerExited = true
        var isRolling = false
        /// An `fdatasync` is running (on the syncer, or on a blocking waiter leading it).
        var syncInProgress = false
        /// A fail-stop is under way: no new write or sync may start.
        var isFailing = false
        /// The fail-stop could not cut the log back: the lock is kept until the process exits,
        /// so no open in this boot can read the undurable bytes still in the page cache.
        var cutBackFailed = false
        /// File position in the last segment up to which zeros have been written ahead.
        var preallocatedPosition: UInt64
        /// While the syncer zero-fills outside the lock, writers must not write at or past this.
        var zeroFillStart: UInt64?
        var preallocationRetryNanoseconds: UInt64 = 0
        var lastSyncNanoseconds: UInt64 = 0
        /// When the last record was written (monotonic clock), for the idle durable-end mark.
        var lastWriteNanoseconds: UInt64 = 0
        /// The newest record of the last segment is not a durable-end mark: the next idle moment
        /// (or close) appends one once everything is durable (FORMAT.md §6.6).
        var needsDurableEndMark = false
        var asyncWaiters: [AsyncWaiter] = []
        var pendingIndexWrites: [SegmentFile] = []
        /// The payloads this writer appended last, newest at the end: the bytes of the next segment
        /// dictionary it makes (FORMAT.md §6.8).
        var dictionarySamples = DictionarySamples()
        /// The base offset of the segment whose index the syncer is writing (outside the lock).
        var indexWriteInFlight: UInt64?
        var statistics = LogStatistics()
        /// The coordination file (D11): the writer publishes its visible end through it; a
        /// read-only open follows it (`nil` until a writer of this version created it).
        var coordination: CoordinationFile?
        /// The slot the writer last published, or the one a reader last followed.
        var shared: SharedEnd?
        /// A reader: the bytes of `shared`, compared with the file's before anything is decoded.
        var sharedBytes: [UInt8] = []
        /// Writer, non-synchronous modes: the visible end moved since the last publication, which
        /// waits until ``LogCore/sharedPublishIntervalNanoseconds`` has passed since the one before.
        var sharedPublishPending = false
        var lastSharedPublishNanoseconds: UInt64 = 0
        /// A shared store: a thread of this process holds the turn (and has caught up).
        var turnHeld = false
        /// The coordination file is closed (or about to be, at close): nothing more is written to it.
        var coordinationClosed = false
        /// This process keeps `TURN`'s `flock` (parked, or taken parked) and its parked turns left
        /// the turn slot behind its written end: the slot is written before the `flock` goes
        /// (``LogCore/publishTurnSlotBeforeParkedRelease(mayWait:)``, close). Cleared whenever the
        /// slot is written or the `flock` is let go.
        var turnSlotUnpublished = false
        /// A shared store: the turn slot this process last published or read.
        var turnCounter: UInt64 = 0
        /// A shared store: the written end and last base the turn slot states, as last read or written.
        var publishedTurnEnd: UInt64 = 0
        var publishedTurnBase: UInt64 = 0
        /// A shared store: when this process last read records another process wrote — at a
        /// turn's catch-up or a refresh (monotonic nanoseconds; `nil`: not since the open).
        var lastForeignRecordsNanoseconds: UInt64?
    }

    /// The rules the state keeps, checked (lock held) after every transition by
    /// ``checkInvariants()``:
    ///
    /// 1. `durableEnd ≤ writtenEnd`, and the last segment starts at or before `durableEnd`: a roll
    ///    syncs the old segment before the new one takes writes, so unsynced bytes are only ever
    ///    in the last segment.
    /// 2. Segments exist and their base offsets increase.
    /// 3. `failure` set ⇒ `isFailing` set and the log was cut back: `writtenEnd == durableEnd`.
    ///    `cutBackFailed` ⇒ `isFailing`. `isFailing` without `failure` only while the fail-stop
    ///    waits for a running `fdatasync`.
    /// 4. A read-only open never writes: `writtenEnd == durableEnd`, no roll, no sync, no zero-fill.
    /// 5. `zeroFillStart` set ⇒ no roll is running, and it lies at or past the write position in
    ///    the last segment (writers wait rather than write into the chunk being zeroed).
    ///
    /// And when ``close()`` has waited: the syncer has exited and no sync, roll or zero-fill runs
    /// (a roll may still finish after `isClosed` is set; close waits for it).
    func checkInvariants() {
        precondition(
            state.durableEnd <= state.writtenEnd,
            "durable end \(state.durableEnd) past written end \(state.writtenEnd)")
        let last = state.segments.last!
        precondition(
            last.baseOffset <= state.durableEnd,
            "unsynced bytes before the last segment (base \(last.baseOffset), durable \(state.durableEnd))")
        assert(
            zip(state.segments, state.segments.dropFirst()).allSatisfy { $0.baseOffset < $1.baseOffset },
            "segment base offsets must increase")
        if state.failure != nil {
            precondition(state.isFailing, "a failure is recorded only by a fail-stop")
            // A shared store cuts back to the shared durable end, which this process may not have
            // read up to: it keeps its durable end, and shows only that.
            precondition(
                writers != nil || state.writtenEnd == state.durableEnd, "a failed log is cut back to its durable end")
        }
        precondition(!state.cutBackFailed || state.isFailing, "a cut-back happens only in a fail-stop")
        if state.isReadOnly {
            precondition(
                state.writtenEnd == state.durableEnd && !state.isRolling && !state.syncInProgress
                    && state.zeroFillStart == nil, "a read-only log never writes")
        }
        if let start = state.zeroFillStart {
            precondition(!state.isRolling, "no zero-fill during a roll")
            let position = SegmentScanner.filePosition(logicalOffset: state.writtenEnd, baseOffset: last.baseOffset)
            precondition(start >= position, "zero-fill at \(start) behind the write position \(position)")
        }
    }

    /// A waiter that does not block a thread: `resume` runs once, on the thread that finds its
    /// record durable (or the log failed or closed) with the log's lock held — it must not block
    /// or call the log.
    struct AsyncWaiter {
        var endOffset: UInt64
        var resume: @Sendable (Result<Void, LogError>) -> Void
    }

    init(
        directory: String, options: LogOptions, meta: StoreMeta, report: RecoveryReport,
        lock: DirectoryLock?, segments: [SegmentFile], end: UInt64, needsDurableEndMark: Bool = false,
        writers: SharedWriters? = nil
    ) {
        self.writers = writers
        self.directory = directory
        self.options = options
        self.meta = meta
        self.recoveryReport = report
        self.fileSystem = options.fileSystem
        self.directoryLock = lock
        let lastPosition = SegmentScanner.filePosition(logicalOffset: end, baseOffset: segments.last!.baseOffset)
        state = State(
            segments: segments, writtenEnd: end, durableEnd: end, syncRequestedEnd: end,
            isReadOnly: lock == nil, preallocatedPosition: lastPosition)
        state.needsDurableEndMark = needsDurableEndMark && lock != nil
        state.lastWriteNanoseconds = monotonicNanoseconds()
        writers?.turn.setBeforeParkedRelease { [weak self] mayWait in
            self?.publishTurnSlotBeforeParkedRelease(mayWait: mayWait) ?? true
        }
    }

    /// Starts the syncer thread (writers only).
    func startSyncer() {
        state.syncerExited = false
        let thread = Thread { [self] in runSyncer() }
        thread.name = "LogStore syncer"
        thread.start()
    }

    var isReadOnly: Bool { conditionLock.withLock { state.isReadOnly || state.failure != nil } }
    var writtenEnd: UInt64 { conditionLock.withLock { state.writtenEnd } }
    var durableEnd: UInt64 { conditionLock.withLock { state.durableEnd } }
    var visibleEnd: UInt64 { conditionLock.withLock { visibleEndLocked } }
    var startOffset: UInt64 { conditionLock.withLock { state.segments.first!.baseOffset } }
    var statistics: LogStatistics { conditionLock.withLock { state.statistics } }
    var segmentBaseOffsets: [UInt64] { conditionLock.withLock { state.segments.map(\.baseOffset) } }

    /// In synchronous mode readers see only durable records; in the other modes they see
    /// completed writes (which a crash may lose: documented with the modes). After a failed
    /// sync the log was cut back to the durable end, so that is all there is.
    var visibleEndLocked: UInt64 {
        if state.failure != nil || options.durability == .synchronous { return state.durableEnd }
        return state.writtenEnd
    }

    func path(_ name: String) -> String { LogFileNames.join(directory, name) }

    /// `error`, about to be thrown to a caller (lock held): when the log has failed, that caller
    /// now knows (``close()`` then does not throw the failure again). Not for an error the
    /// syncer thread swallows (its catch-up before a zero-fill in a shared store): nobody hears it.
    func reporting(_ error: LogError) -> LogError {
        if state.failure != nil || state.isFailing { state.failureReported = true }
        return error
    }

    func close() throws(LogError) {
        conditionLock.lock()
        if state.isClosed {
            conditionLock.unlock()
            return
        }
        state.isClosed = true
        let reportedBefore = state.failure != nil && state.failureReported
        conditionLock.signalSyncer()
        // A roll creates files with the lock released: the directory lock must outlive it.
        while !state.syncerExited || state.isRolling || state.syncInProgress { conditionLock.waitWaiter() }
        checkInvariants()
        precondition(state.zeroFillStart == nil, "the syncer exited with a zero-fill running")
        let cutBackFailed = state.cutBackFailed
        let failure = state.failure
        let waiters = state.asyncWaiters
        state.asyncWaiters = []
        conditionLock.unlock()
        for waiter in waiters {
            waiter.resume(.failure(failure ?? LogError(.closed, "The log was closed.")))
        }
        // A `TURN` still parked is let go while the coordination file is open: its turn slot is
        // written first (publishTurnSlotBeforeParkedRelease). When another thread holds its mutex
        // (the releaser looking, or a save that took it parked), this process still holds the
        // `flock` — nobody else writes — and the slot is written here, under the log's lock,
        // before the file closes, unless that thread let the `flock` go first: a save's turn
        // that fails `closed` (its catch-up's first check) releases it with the slot as it is,
        // what a writer killed in its turn leaves — below slot 1's durable end after the final
        // sync, so the next holder adopts nothing unacknowledged and cuts nothing (review of
        // eb0cf20, finding 1). Nothing is written to the file after.
        writers?.turn.releaseIfParked()
        for segment in conditionLock.withLock({ state.segments }) { segment.handle.close() }
        conditionLock.withLock {
            if state.turnSlotUnpublished && state.failure == nil && !state.isFailing {
                let held = state.turnHeld
                state.turnHeld = true
                // A failure here leaves the slot as a writer killed in its turn leaves it (or torn:
                // the next holder refuses it); close has nobody to tell.
                try? publishTurnSlotLocked()
                state.turnHeld = held
            }
            state.turnSlotUnpublished = false
            state.coordinationClosed = true
            return state.coordination
        }?.close()
        writers?.turn.setBeforeParkedRelease(nil)
        writers?.close()
        if cutBackFailed, let directoryLock {
            // The page cache may still hold bytes that were never durable: keep the store locked
            // (and registered) for the rest of this process, so nothing here reads them as data.
            DirectoryLock.keepUntilExit(directoryLock)
        } else {
            directoryLock?.release()
        }
        // Everything is closed and the lock released (or kept, above) before the throw: a close
        // that throws leaves nothing open. A failure is thrown unless a caller was told of it
        // before this close began — the final sync's own failure, and a background sync's that
        // no save, sync or wait has thrown yet (its cut-back removed acknowledged saves, and
        // returning would call them durable).
        if let failure, !reportedBefore { throw failure }
    }
}

/// The newest payload bytes a writer appended, up to a bound (amortised: trimmed at twice it).
/// One payload gives at most a quarter of it (its start): a large blob — often incompressible —
/// would otherwise make the whole dictionary, and the small records after it would find nothing
/// to match.
struct DictionarySamples {
    private(set) var bytes: [UInt8] = []

    /// Keeps up to a quarter of `byteCount` from the payload's start. Not generic: called from
    /// the generic write path, a generic `prefix` and `append(contentsOf:)` looked up type
    /// metadata on every record (~3.7 % of a P3-ctx save).
    mutating func append(_ payload: UnsafeRawBufferPointer, keeping byteCount: Int) {
        guard byteCount > 0 else { return }
        bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: payload.prefix(max(1, byteCount / 4))))
        if bytes.count > 2 * byteCount { bytes.removeFirst(bytes.count - byteCount) }
    }

    mutating func append(_ payload: some Collection<UInt8>, keeping byteCount: Int) {
        guard byteCount > 0 else { return }
        let appended: Bool? = payload.withContiguousStorageIfAvailable {
            append(UnsafeRawBufferPointer($0), keeping: byteCount)
            return true
        }
        if appended == nil {
            Array(payload.prefix(max(1, byteCount / 4))).withUnsafeBytes { append($0, keeping: byteCount) }
        }
    }

    /// The newest `byteCount` bytes (fewer if fewer were appended).
    func newest(_ byteCount: Int) -> ArraySlice<UInt8> { bytes.suffix(byteCount) }

    var count: Int { bytes.count }
}
