import Foundation

/// The `MAINTENANCE`, `TURN` and `SYNC` locks of a store shared by several writing processes,
/// taken in that order (D11).
final class SharedWriters: Sendable {
    let maintenance: SharedFileLock
    let turn: SharedFileLock
    let sync: SharedFileLock
    /// Lets go of a parked `TURN` or `SYNC` this process no longer uses.
    private let releaser: ParkedLockReleaser

    private init(maintenance: SharedFileLock, turn: SharedFileLock, sync: SharedFileLock, releaser: ParkedLockReleaser) {
        self.maintenance = maintenance
        self.turn = turn
        self.sync = sync
        self.releaser = releaser
    }

    /// `alone`: this process holds `LOCK` exclusively, so nobody else has `WAKE` mapped — its
    /// words are zeroed (a sleepers' count a killed process left high would cost every release a
    /// wake-up call until then).
    static func open(
        directory: String, fileSystem: any FileSystem, alone: Bool = false,
        wakeSleepNanosecondsMax: UInt64 = WakeChannel.sleepNanosecondsMax
    ) throws(LogError) -> SharedWriters {
        let wake = mapWake(directory: directory, fileSystem: fileSystem)
        if alone { wake?.zero() }
        let releaser = ParkedLockReleaser()
        var opened: [SharedFileLock] = []
        do throws(LogError) {
            for (index, name) in [
                FormatConstants.maintenanceLockFileName, FormatConstants.turnLockFileName,
                FormatConstants.syncLockFileName,
            ].enumerated() {
                opened.append(
                    try SharedFileLock.open(
                        name, directory: directory, fileSystem: fileSystem,
                        wake: wake.map { WakeChannel(mapping: $0, offset: index * FormatConstants.wakeChannelByteCount) },
                        wakeSleepNanosecondsMax: wakeSleepNanosecondsMax,
                        // TURN and SYNC are parked between holders; MAINTENANCE is rare.
                        releaser: index == 0 ? nil : releaser))
            }
        } catch {
            for lock in opened { lock.close() }
            throw error
        }
        releaser.watch([opened[1], opened[2]])
        return SharedWriters(maintenance: opened[0], turn: opened[1], sync: opened[2], releaser: releaser)
    }

    func close() {
        releaser.stop()
        maintenance.close()
        turn.close()
        sync.close()
    }

    /// The `WAKE` file mapped (created in place, grown to its size), or `nil` — where the file
    /// system cannot map it, or anything about the file is wrong — and then waiters retry on a
    /// timer as before: the file only ever saves time, so failing to map it is never an error.
    private static func mapWake(directory: String, fileSystem: any FileSystem) -> SharedMapping? {
        let path = LogFileNames.join(directory, FormatConstants.wakeFileName)
        guard let handle = try? fileSystem.openFile(path, mode: .createOrOpen) else { return nil }
        defer { handle.close() }
        return try? handle.mapShared(byteCount: FormatConstants.wakeFileByteCount)
    }
}

/// Several writing processes, one store (DECISIONS.md D11 stage 2, FORMAT.md §10.2). Only a log
/// opened with ``LogOptions/allowsOtherWriters`` runs any of this (`writers` is set).
///
/// - The **turn** (`beginTurn`/`endTurn`): this process's mutex, then `TURN`; under it, catch-up
///   (`catchUpLocked`) and the writes of one batch; at its end the turn slot states the written end.
/// - **Sync** (`performSharedSync`): one `fdatasync` at a time across processes under `SYNC`; slot 1
///   of the coordination file states the shared durable end, which only the `SYNC` holder moves.
/// - **Reading the others' work** without the turn (`refreshSharedWriter`): the records up to
///   the shared durable end, which nobody rewrites.
extension LogCore {
    // MARK: Opening beside other writers

    /// A writing process that is not alone (another holds `LOCK` shared): it changes nothing on
    /// disk to open — no torn-tail cut, no temp-file removal — and reads the log as a follower does,
    /// under the turn (so nobody writes while it learns where the log ends), then catches up as any
    /// turn does (which zeroes a dead writer's torn record past the published written end).
    static func openBesideWriters(directory: String, options: LogOptions, lock: DirectoryLock) throws(LogError)
        -> LogCore
    {
        let fileSystem = options.fileSystem
        guard !options.repairs else {
            throw LogError(
                .locked,
                "Repairing \(directory) needs the store alone: other processes have it open for writing. Close "
                    + "them first.", file: directory)
        }
        let writers = try SharedWriters.open(directory: directory, fileSystem: fileSystem)
        do throws(LogError) {
            let meta = try readMeta(directory, fileSystem: fileSystem)
            try writers.turn.acquire(for: "open the store beside the other writers")
            defer { writers.turn.release() }
            // Opened for writing: this process publishes durable ends (slot 1) and written ends (the
            // turn slot) like every other writer (a read-only descriptor made those writes fail,
            // unseen: found by the four-process test, whose fetches then missed acknowledged saves).
            let coordination = try CoordinationFile.openForWriting(
                directory: directory, fileSystem: fileSystem, mapsSlots: true)
            guard let slot = coordination.read().flatMap({ $0.storeID == meta.storeID ? $0 : nil }) else {
                coordination.close()
                throw LogError(
                    .corruption,
                    "The store at \(directory) is open for writing in another process, but its coordination file "
                        + "states no durable end: that process is not one that shares the store with other writers.",
                    file: CoordinationFile.path(in: directory))
            }
            guard !slot.isFailed else {
                coordination.close()
                throw LogError(
                    .syncFailed,
                    "An fdatasync failed in a process writing \(directory): the store must be reopened once every "
                        + "process has closed it (the first to open it alone cuts back what was not durable).",
                    file: CoordinationFile.path(in: directory))
            }
            let segmentOffsets: [UInt64]
            let recovered: Recovery.Result
            var recovery = Recovery(
                directory: directory, meta: meta, options: options, writable: false, report: RecoveryReport())
            recovery.publishedEnd = slot.visibleEnd
            do throws(LogError) {
                segmentOffsets = try listDirectory(directory, fileSystem).compactMap(LogFileNames.segmentBaseOffset)
                    .sorted()
                guard !segmentOffsets.isEmpty else {
                    throw LogError(.corruption, "The store at \(directory) has no segment.", file: directory)
                }
                recovered = try recovery.run(segmentOffsets: segmentOffsets)
            } catch {
                coordination.close()
                throw error
            }
            var segments = recovered.segments
            // The last segment is written to: open it again for writing, keeping what the scan noted.
            let last = segments.removeLast()
            let writable: SegmentFile
            do throws(LogError) {
                writable = try recovery.openSegment(baseOffset: last.baseOffset, writable: true)
            } catch {
                for segment in segments + [last] { segment.handle.close() }
                coordination.close()
                throw error
            }
            // The last segment may be one a roller renamed in and was killed before its directory
            // fsync (review12 A1): its file and name are made durable before this process writes
            // into it, as catch-up does for a segment it adopts.
            do throws(FileSystemError) {
                try writable.handle.sync()
                try fileSystem.syncDirectory(directory)
            } catch {
                for segment in segments + [last, writable] { segment.handle.close() }
                coordination.close()
                throw LogError.io(error, "Making the last segment of \(directory) durable before writing into it")
            }
            writable.replaceIndex(last.index)
            last.handle.close()
            segments.append(writable)
            let core = LogCore(
                directory: directory, options: options, meta: meta, report: recovered.report, lock: lock,
                segments: segments, end: recovered.end,
                needsDurableEndMark: recovered.end > writable.baseOffset && recovered.lastRecordType != .durableEndMark,
                writers: writers)
            core.conditionLock.lock()
            core.state.coordination = coordination
            core.state.shared = slot
            core.state.durableEnd = max(min(slot.visibleEnd, recovered.end), writable.baseOffset)
            core.state.syncRequestedEnd = core.state.durableEnd
            core.state.turnHeld = true
            let caughtUp: Result<Void, LogError>
            do throws(LogError) {
                try core.catchUpLocked()
                caughtUp = .success(())
            } catch {
                caughtUp = .failure(error)
            }
            core.state.turnHeld = false
            core.checkInvariants()
            core.conditionLock.unlock()
            if case .failure(let error) = caughtUp {
                for segment in core.state.segments { segment.handle.close() }
                coordination.close()
                throw error
            }
            core.startSyncer()
            return core
        } catch {
            writers.close()
            throw error
        }
    }

    // MARK: The turn

    func beginTurn() throws(LogError) {
        guard let writers else { return }
        try writers.turn.acquire(for: "take its turn to write")
        conditionLock.lock()
        precondition(!state.turnHeld, "one turn at a time in a process")
        state.turnHeld = true
        state.statistics.turnCount += 1
        let kept = writers.turn.keptSinceRelease
        if kept { state.statistics.keptTurnCount += 1 }
        var failure: LogError?
        do throws(LogError) { try catchUpLocked(kept: kept) } catch { failure = reporting(error) }
        if failure != nil {
            state.turnHeld = false
            // The `flock` goes with the slot as it is: what a writer killed in its turn leaves.
            state.turnSlotUnpublished = false
        }
        conditionLock.unlock()
        if let failure {
            writers.turn.release()
            throw failure
        }
    }

    /// A store shared by writers (lock held): whether `TURN` and `SYNC` are kept between this
    /// process's holders (parked, ``SharedFileLock``) — only while no other process's records were
    /// read for ``sharedLocksKeptQuietNanoseconds`` (or ever since the open). While others write,
    /// each release is real: with 4 + 4 savers in 2 processes, keeping them cost 15-25 % of the
    /// saves per second (a process between two tries, not yet counted as a sleeper, found the
    /// lock kept and slept until the keeper's next release).
    var keepsSharedLocksLocked: Bool {
        state.lastForeignRecordsNanoseconds.map { monotonicNanoseconds() &- $0 >= Self.sharedLocksKeptQuietNanoseconds }
            ?? true
    }

    static let sharedLocksKeptQuietNanoseconds: UInt64 = 1_000_000_000

    func endTurn() {
        guard let writers else { return }
        conditionLock.lock()
        letGoOfTurnLocked(writers)
        conditionLock.unlock()
    }

    /// Ends a turn (lock and turn held; returns with the lock held). `TURN` is kept — parked —
    /// while no other process waits for it (``keepsSharedLocksLocked``, ``SharedFileLock/park()``):
    /// the next turn here costs no `flock` and no catch-up, and the turn slot is left unwritten —
    /// nobody else reads it while this process holds the `flock` — until just before the `flock`
    /// is really let go (``publishTurnSlotBeforeParkedRelease(mayWait:)``, by the releaser's
    /// thread or at close). Otherwise the turn slot is written and `TURN` released. A slot left
    /// unwritten is what a writer killed between its record's `pwrite` and the slot's leaves
    /// (D11's crash argument, step 3): whoever takes `TURN` next adopts the whole records past
    /// it, and never cuts one under slot 1's durable end. One `pwrite` a save less for a lone
    /// writer.
    ///
    /// `caughtUp`: false after a catch-up that threw — this process's view of the log may be
    /// behind the turn slot it read, so it neither keeps `TURN` (a kept turn would skip the
    /// catch-up it still needs) nor writes the slot (it could move it back): the `flock` goes
    /// with the slot as it is (review of 4989886, finding 1). Nor is `TURN` kept while the slot
    /// names a later segment than this process's last (a roll whose creation failed, ENOSPC):
    /// the slot is put right at once (finding 3).
    func letGoOfTurnLocked(_ writers: SharedWriters, caughtUp: Bool = true) {
        precondition(state.turnHeld, "a turn ends only once begun")
        state.turnHeld = false
        if caughtUp && !state.isClosed && state.failure == nil && !state.isFailing && keepsSharedLocksLocked
            && state.publishedTurnBase == state.segments.last!.baseOffset && writers.turn.park()
        {
            // The releaser's hook needs this lock to write the slot: it cannot run before this.
            if state.publishedTurnEnd != state.writtenEnd { state.turnSlotUnpublished = true }
            return
        }
        state.turnHeld = true
        // A log closed during the turn (an open that failed) closed the coordination file; the
        // syncer's last pass at close (a durable-end mark) runs before it does.
        if caughtUp && !state.coordinationClosed {
            do throws(LogError) { try publishTurnSlotLocked() } catch {
                // The slot may be torn: the next turn holder refuses it (an error, not a guess),
                // and every process stops.
                failStopShared(error)
            }
        }
        state.turnSlotUnpublished = false
        state.turnHeld = false
        conditionLock.unlock()
        writers.turn.release()
        conditionLock.lock()
    }

    /// `TURN` is parked and about to be let go for real (its mutex held, on the releaser's thread
    /// or at close): the turn slot this process's parked turns left unwritten is written now, so
    /// whoever takes `TURN` next reads this process's written end.
    ///
    /// Returns `false`, doing nothing, when the log's lock is busy and `mayWait` is false: the
    /// releaser's thread does not wait for a holder (``ParkedLockReleaser``) until the `flock` has
    /// been held for the bound, and the lock stays parked until its next look.
    /// (A failed slot write still fail-stops the process from here, waiting for `SYNC` to mark the
    /// store failed: a coordination file whose `pwrite`s fail stops every process anyway.)
    func publishTurnSlotBeforeParkedRelease(mayWait: Bool) -> Bool {
        if mayWait { conditionLock.lock() } else if !conditionLock.tryLock() { return false }
        defer { conditionLock.unlock() }
        guard state.turnSlotUnpublished else { return true }
        state.turnSlotUnpublished = false
        guard !state.coordinationClosed, !state.turnHeld, state.failure == nil, !state.isFailing else { return true }
        state.turnHeld = true
        defer { state.turnHeld = false }
        do throws(LogError) { try publishTurnSlotLocked() } catch { failStopShared(error) }
        return true
    }

    /// Writes the turn slot (lock and turn held) when the written end or the last segment moved
    /// since it was last read or written. `lastSegmentBase` is a roll's new base, published before
    /// the segment is created.
    func publishTurnSlotLocked(lastSegmentBase: UInt64? = nil) throws(LogError) {
        guard let coordination = state.coordination else { return }
        precondition(state.turnHeld, "the turn slot is written under the turn")
        let base = lastSegmentBase ?? state.segments.last!.baseOffset
        guard state.publishedTurnEnd != state.writtenEnd || state.publishedTurnBase != base else {
            state.turnSlotUnpublished = false
            return
        }
        state.turnCounter &+= 1
        try coordination.writeTurn(
            TurnSlot(
                storeID: meta.storeID, writtenEnd: state.writtenEnd, lastSegmentBaseOffset: base,
                turnCounter: state.turnCounter))
        state.publishedTurnEnd = state.writtenEnd
        state.publishedTurnBase = base
        state.turnSlotUnpublished = false
    }

    /// The failure every process of a shared store reports once one of them failed an `fdatasync`.
    private var failedElsewhere: LogError {
        LogError(
            .syncFailed,
            "An fdatasync failed in a process writing \(directory) (its coordination file is marked failed): nothing "
                + "past the durable end it published is acknowledged. Every process must reopen the store.",
            file: CoordinationFile.path(in: directory))
    }

    /// Catch-up (lock and turn held): reads every record other processes appended since this
    /// process's written end, opening the segments they rolled to, and moves the written end
    /// past them. A record that does not check out before the published written end W is
    /// corruption; at or past W it is the torn write of a process killed in its turn, zeroed here
    /// before anything is written over it. Learns the shared durable end too (and a failure).
    ///
    /// `closing`: the syncer's last pass at close (a durable-end mark), which runs after
    /// `isClosed` is set and before the files close.
    ///
    /// `kept`: this process held `TURN` since its previous turn (parked, ``SharedFileLock``):
    /// nobody else appended, rolled or rewrote the turn slot meanwhile, and only slot 1 is read
    /// (the others' `fdatasync`s, and a failure, may have moved it).
    func catchUpLocked(closing: Bool = false, kept: Bool = false) throws(LogError) {
        guard let coordination = state.coordination else { return }
        if !closing {
            try checkWritable()
        } else if state.isFailing || state.failure != nil {
            throw LogError(.readOnly, "The log failed: no durable-end mark at close.", file: directory)
        }
        precondition(state.turnHeld, "catch-up runs under the turn")
        var sharedDurableEnd: UInt64?
        if let slot = coordination.read(), slot.storeID == meta.storeID {
            if slot.isFailed || (state.shared.map { $0.epoch != slot.epoch } ?? false) {
                let failure = failedElsewhere
                failStop(failure, cutsAtWrittenEnd: false)
                throw failure
            }
            sharedDurableEnd = slot.visibleEnd
            state.shared = slot
        }
        // A kept turn checks that the turn slot is still the one this process published last (a
        // mapped read: ~20 loads; turns that ended parked wrote none, so it may state an earlier
        // written end than this process's own); anything else — a `flock` lost some way this
        // process did not see — means a full catch-up (review of b7bde05, finding 6).
        if kept, let turn = coordination.readTurn(), turn.storeID == meta.storeID,
            turn.turnCounter == state.turnCounter, turn.writtenEnd == state.publishedTurnEnd,
            turn.lastSegmentBaseOffset == state.publishedTurnBase
        {
            if let sharedDurableEnd { learnDurableEndLocked(min(sharedDurableEnd, state.writtenEnd)) }
            checkInvariants()
            return
        }
        let turn = try coordination.readTurnChecked(in: directory)
        if let turn, turn.storeID != meta.storeID {
            throw LogError(
                .corruption,
                "The turn slot of \(directory)'s coordination file names another store (\(turn.storeID)).",
                file: CoordinationFile.path(in: directory), offset: TurnSlot.fileOffset)
        }
        // Every record before the shared durable end D is whole and durable: damage below it is
        // never a dead writer's torn write (review of eec4ccf, finding 6).
        let publishedEnd = max(turn?.writtenEnd ?? state.writtenEnd, sharedDurableEnd ?? 0)
        let publishedBase = turn?.lastSegmentBaseOffset ?? state.segments.last!.baseOffset
        var offset = state.writtenEnd
        var caughtUp: UInt64 = 0
        var lastType: RecordType?
        // Bounded: each pass reads a record, opens a later segment, or ends the scan.
        scan: while true {
            let segment = state.segments.last!
            var scanner = SegmentScanner(
                segment: segment,
                position: SegmentScanner.filePosition(logicalOffset: offset, baseOffset: segment.baseOffset),
                firstReadByteCount: 4096)
            // Bounded by the segment's length: each record moves the scanner forward.
            while true {
                switch try scanner.next(decodesPayload: false) {
                case .record(let record):
                    if record.offset >= segment.endOffset { segment.note(record) }
                    offset = record.endOffset
                    caughtUp += 1
                    lastType = record.type
                    continue
                case .end:
                    if publishedBase > segment.baseOffset {
                        try openRolledSegment(at: offset, publishedBase: publishedBase)
                        movePastRolledSegment(to: offset)
                        continue scan
                    }
                    // No turn slot yet: a segment starting here is the next one all the same (a
                    // writer never appends at offsets another segment covers).
                    if turn == nil, offset > segment.baseOffset, try segmentExists(at: offset) {
                        try openRolledSegment(at: offset, publishedBase: offset)
                        movePastRolledSegment(to: offset)
                        continue scan
                    }
                    guard offset >= publishedEnd else {
                        try checkNotFailedElsewhere(coordination)
                        throw LogError.corruption(
                            segment.path, offset: offset,
                            "no record at offset \(offset), before the written end another writer published "
                                + "(\(publishedEnd))")
                    }
                case .bad(let reason, _):
                    guard offset >= publishedEnd else {
                        try checkNotFailedElsewhere(coordination)
                        throw LogError.corruption(
                            segment.path, offset: offset,
                            "\(reason), before the written end another writer published (\(publishedEnd))")
                    }
                    try zeroDeadWriterTail(segment, from: offset)
                case .unsupported(let reason):
                    throw LogError.corruption(segment.path, offset: offset, reason)
                }
                break scan
            }
        }
        state.writtenEnd = offset
        // Only once the scan reached them: a catch-up that threw leaves this process's view as
        // it was, and a kept turn's check then never matches a slot it did not catch up with
        // (review of 4989886, finding 1).
        if let turn {
            state.turnCounter = turn.turnCounter
            state.publishedTurnEnd = turn.writtenEnd
            state.publishedTurnBase = turn.lastSegmentBaseOffset
        }
        state.statistics.caughtUpRecordCount += caughtUp
        if caughtUp > 0 { state.lastForeignRecordsNanoseconds = monotonicNanoseconds() }
        // Whoever read the log's last records last takes charge of marking them durable (D12): a
        // mark read last needs none (and this process's own pending one is then done too).
        if let lastType { takeChargeOfMarking(after: lastType) }
        if let sharedDurableEnd { learnDurableEndLocked(min(sharedDurableEnd, offset)) }
        // A roll syncs the segments before the new one (the roller published that durable end).
        learnDurableEndLocked(state.segments.last!.baseOffset)
        checkInvariants()
    }

    /// Catch-up learnt that everything before `end` is durable (lock and turn held): another
    /// process's `fdatasync` (slot 1), or a roll, covered it. The durable end moves, no sync is
    /// asked for below it, and — when it moved — the waiters it covers are told now: the syncer
    /// then has nothing left to sync for them, and a waiter registered with
    /// ``whenDurable(endOffset:_:)`` would otherwise wait for this process's next sync (review of
    /// 6a22b5e, finding 1). Only when it moved: a kept turn's catch-up runs at every save, and a
    /// broadcast there would wake every thread waiting for durability for nothing.
    private func learnDurableEndLocked(_ end: UInt64) {
        let moved = end > state.durableEnd
        state.durableEnd = max(state.durableEnd, end)
        state.syncRequestedEnd = max(state.syncRequestedEnd, state.durableEnd)
        guard moved else { return }
        resumeAsyncWaiters()
        conditionLock.broadcastWaiters()
    }

    /// This process read the log's last records (lock held), the last of type `lastType`: it
    /// marks them durable when idle unless that record is a mark (D12, as built for a shared
    /// store: whoever reads the last records takes charge of them). The syncer may sleep without
    /// a deadline: it is woken to learn that a mark will be due.
    private func takeChargeOfMarking(after lastType: RecordType) {
        let needs = lastType != .durableEndMark
        if needs && !state.needsDurableEndMark { conditionLock.signalSyncer() }
        state.needsDurableEndMark = needs
        if needs { state.lastWriteNanoseconds = monotonicNanoseconds() }
    }

    /// Catch-up reached the end of the last segment it knows while the turn slot names a later
    /// one: another process rolled. The next segment must start exactly here; when none is in the
    /// directory and the slot's base is exactly here, the roller died between publishing the base
    /// and renaming the segment in, and this process creates it.
    private func openRolledSegment(at offset: UInt64, publishedBase: UInt64) throws(LogError) {
        let known = state.segments.last!.baseOffset
        let bases = try Self.listDirectory(directory, fileSystem).compactMap(LogFileNames.segmentBaseOffset)
            .filter { $0 > known && $0 <= publishedBase }.sorted()
        let segment: SegmentFile
        if let first = bases.first {
            // This process fell behind a history deletion: its own last segment and the next one
            // were deleted (a prefix goes) before it read the records they held.
            if first > offset, try !segmentExists(at: known) {
                throw LogError(
                    .reopenRequired,
                    "Another process writing \(directory) deleted history this process had not read yet (the "
                        + "records from offset \(offset) on). Open the store again.", file: directory, offset: offset)
            }
            guard first == offset else {
                throw LogError.corruption(
                    path(LogFileNames.segment(first)), offset: first,
                    "segment \(LogFileNames.segment(first)) follows segment \(LogFileNames.segment(known)), which ends "
                        + "at \(offset)")
            }
            let recovery = Recovery(
                directory: directory, meta: meta, options: options, writable: true, report: RecoveryReport())
            segment = try recovery.openSegment(baseOffset: first, writable: true)
            // Another process created it, and may have been killed between its rename and its
            // directory fsync: this process writes into it only once the file and its name are
            // durable (rare — once per segment another process rolled to — and cheap).
            do throws(FileSystemError) {
                try segment.handle.sync()
                try fileSystem.syncDirectory(directory)
            } catch {
                segment.handle.close()
                let failure = LogError(
                    .syncFailed,
                    "Making segment \(LogFileNames.segment(first)), which another writer created, durable failed: "
                        + "\(error). The log is read-only until reopened.", file: segment.path, underlying: error)
                failStopShared(failure)
                throw failure
            }
        } else if publishedBase == offset {
            do {
                segment = try Self.createSegment(
                    directory: directory, storeID: meta.storeID, baseOffset: offset, fileSystem: fileSystem)
            } catch {
                let failure = LogError(
                    .syncFailed,
                    "Creating segment \(LogFileNames.segment(offset)), which a writer that died had announced, "
                        + "failed: \(error). The log is read-only until reopened.",
                    file: path(LogFileNames.segment(offset)), underlying: error)
                // A half-committed file (renamed, directory not synced) must not be adopted by
                // the next turn holder while the others go on acknowledging: the shared failure.
                failStopShared(failure)
                throw failure
            }
        } else {
            throw LogError.corruption(
                path(LogFileNames.segment(publishedBase)), offset: publishedBase,
                "a writer published segment \(LogFileNames.segment(publishedBase)) as the last, but it is not in the "
                    + "directory and the log ends at \(offset)")
        }
        state.segments.append(segment)
        state.preallocatedPosition = UInt64(FormatConstants.segmentHeaderByteCount)
    }

    /// Catch-up opened the segment starting at `base` (lock and turn held): the written end moves
    /// to it at once, so a scan that throws later leaves no written end inside an older segment
    /// (review12 B5). Everything before it is durable: the roller synced it before the roll.
    private func movePastRolledSegment(to base: UInt64) {
        state.writtenEnd = base
        learnDurableEndLocked(base)
    }

    /// Before catch-up reports damage (lock and turn held): slot 1 read again — a failed
    /// `fdatasync` elsewhere may have cut the log back meanwhile (review12 B4), which is that
    /// failure, not corruption.
    private func checkNotFailedElsewhere(_ coordination: CoordinationFile) throws(LogError) {
        guard let slot = coordination.read(), slot.storeID == meta.storeID else { return }
        if slot.isFailed || (state.shared.map { $0.epoch != slot.epoch } ?? false) {
            let failure = failedElsewhere
            failStop(failure, cutsAtWrittenEnd: false)
            throw failure
        }
    }

    /// Whether the directory holds a segment starting at `offset`.
    private func segmentExists(at offset: UInt64) throws(LogError) -> Bool {
        do { return try fileSystem.kind(of: path(LogFileNames.segment(offset))) != nil } catch {
            throw LogError.io(error, "Looking for segment \(LogFileNames.segment(offset))")
        }
    }

    /// A writer killed in its turn left a torn record at `offset` (at or past the published
    /// written end; nobody else writes while this process holds the turn): zeros over every
    /// non-zero byte from there to one maximal record further. No `fdatasync` here: nothing is
    /// acknowledged until an `fdatasync` of this file covers the next record, and that one
    /// covers these zeros too.
    private func zeroDeadWriterTail(_ segment: SegmentFile, from offset: UInt64) throws(LogError) {
        let start = SegmentScanner.filePosition(logicalOffset: offset, baseOffset: segment.baseOffset)
        let size: UInt64
        do { size = try segment.handle.size() } catch { throw LogError.io(error, "Reading the size of \(segment.path)") }
        let limit = min(
            size, start + UInt64(FormatConstants.recordHeaderByteCount) + UInt64(FormatConstants.recordByteCountMax))
        let chunk: UInt64 = 64 * 1024
        var position = start
        var zeroed: UInt64 = 0
        var bytes = [UInt8](repeating: 0, count: Int(chunk))
        // Bounded by `limit`: each pass moves one chunk.
        while position < limit {
            let count = min(chunk, limit - position)
            do {
                let read = try segment.handle.read(into: &bytes, range: 0..<Int(count), at: position)
                if bytes[0..<read].contains(where: { $0 != 0 }) {
                    try ZeroFill.write(segment.handle, from: position, byteCount: UInt64(read))
                    zeroed += UInt64(read)
                }
            } catch {
                let failure = LogError.io(error, "Zeroing the torn record a writer that died left at offset \(offset)")
                failStopShared(failure)
                throw failure
            }
            position += count
        }
        state.statistics.deadWriterTailsCleaned += 1
        state.statistics.deadWriterBytesZeroed += zeroed
    }

    // MARK: Failure

    /// Fail-stop of a shared store after a failure whose durability is unknown (a roll's or an
    /// adopted segment's fsync, a segment creation): slot 1 is marked failed with a new epoch
    /// under `SYNC`, so no other process acknowledges anything more, then this process fails
    /// stop. Lock held on entry and exit, released while it waits for `SYNC`.
    func failStopShared(_ failure: LogError, cutsAtWrittenEnd: Bool = false) {
        guard let writers, state.failure == nil, !state.isFailing else {
            return failStop(failure, cutsAtWrittenEnd: cutsAtWrittenEnd)
        }
        let coordination = state.coordination
        let known = state.shared
        let durableEnd = state.durableEnd
        let base = state.segments.last!.baseOffset
        conditionLock.unlock()
        var marked = false
        if (try? writers.sync.acquire(for: "mark the store failed")) != nil {
            marked = markSlotFailed(
                coordination, slot: coordination?.read().flatMap { $0.storeID == meta.storeID ? $0 : nil },
                known: known, durableEnd: durableEnd, base: base)
            writers.sync.release()
        }
        conditionLock.lock()
        failStop(
            marked
                ? failure
                : LogError(
                    failure.code,
                    failure.message + " Marking the coordination file failed did not succeed either: other "
                        + "processes writing the store may not have learnt of this failure.",
                    file: failure.file, offset: failure.offset, underlying: failure.underlying),
            cutsAtWrittenEnd: cutsAtWrittenEnd)
    }

    /// Writes slot 1 marked failed with a new epoch (`SYNC` held): the slot as read, or — when it
    /// could not be read — the last one this process knew, or a fresh one; every process reading
    /// it stops acknowledging. Returns whether the write succeeded.
    func markSlotFailed(
        _ coordination: CoordinationFile?, slot: SharedEnd?, known: SharedEnd?, durableEnd: UInt64, base: UInt64
    ) -> Bool {
        guard let coordination else { return false }
        var failed =
            slot ?? known
            ?? SharedEnd(
                storeID: meta.storeID, epoch: 0, changeCounter: 0, lastSegmentBaseOffset: base, visibleEnd: durableEnd)
        failed.epoch &+= 1
        failed.isFailed = true
        failed.changeCounter &+= 1
        do throws(LogError) {
            try coordination.writeChecked(failed)
            return true
        } catch {
            return false
        }
    }

    // MARK: Sync

    private enum SharedSyncOutcome {
        case durable(end: UInt64, synced: Bool, slot: SharedEnd?)
        case failedElsewhere
        case failed(LogError, cutBackTo: UInt64)
        case lockTimeout(LogError)
        /// Synced, but the durable end could not be published in slot 1: nothing is acknowledged.
        case unpublished(LogError)
    }

    /// ``performSync(through:)`` of a shared store (lock held on entry and exit, released while it
    /// waits for `SYNC` and syncs). Under `SYNC`: a published durable end D that already covers
    /// `target` is taken as is (another process's `fdatasync` covered it); otherwise E is read from
    /// the turn slot (when it names this process's last segment; else this process's own written
    /// end) *before* the `fdatasync` of that segment, and D = max(D, E) is published after it.
    /// A failure marks slot 1 failed (new epoch) and cuts the segment back to the shared durable
    /// end before `SYNC` is released.
    func performSharedSync(through target: UInt64, writers: SharedWriters) {
        precondition(!state.syncInProgress, "one fdatasync at a time")
        state.syncInProgress = true
        let segment = state.segments.last!
        let ownEnd = state.writtenEnd
        let ownDurableEnd = state.durableEnd
        let known = state.shared
        let coordination = state.coordination
        let keepsSync = keepsSharedLocksLocked
        conditionLock.unlock()
        let outcome = sharedSync(
            target: target, segment: segment, ownEnd: ownEnd, ownDurableEnd: ownDurableEnd, known: known,
            coordination: coordination, writers: writers, keepsSync: keepsSync)
        conditionLock.lock()
        state.syncInProgress = false
        if !state.asyncWaiters.isEmpty || state.isClosed { conditionLock.signalSyncer() }
        switch outcome {
        case .durable(let end, let synced, let slot):
            state.durableEnd = max(state.durableEnd, min(end, state.writtenEnd))
            // A slot read without SYNC (covered elsewhere) may be older than one another thread
            // of this process stored meanwhile (a refresh, a catch-up): slot 1's change counter
            // grows with every write of it in an epoch, so the older one is not taken (its
            // maintenance counter would go back and the low-water mark be reloaded for nothing).
            if let slot, state.shared.map({ $0.epoch != slot.epoch || slot.changeCounter >= $0.changeCounter }) ?? true {
                state.shared = slot
            }
            checkInvariants()
            state.lastSyncNanoseconds = monotonicNanoseconds()
            if synced { state.statistics.syncCount += 1 } else { state.statistics.syncsCoveredElsewhere += 1 }
            resumeAsyncWaiters()
            conditionLock.broadcastWaiters()
        case .failedElsewhere:
            failStop(failedElsewhere, cutsAtWrittenEnd: false)
        case .failed(let failure, let cut):
            if cut >= segment.baseOffset, segment === state.segments.last! {
                state.writtenEnd = min(state.writtenEnd, cut)
                state.preallocatedPosition = SegmentScanner.filePosition(
                    logicalOffset: state.writtenEnd, baseOffset: segment.baseOffset)
            }
            failStop(failure, cutsAtWrittenEnd: false)
        case .lockTimeout(let failure):
            failStop(failure, cutsAtWrittenEnd: false)
        case .unpublished(let failure):
            failStop(failure, cutsAtWrittenEnd: false)
        }
    }

    private func sharedSync(
        target: UInt64, segment: SegmentFile, ownEnd: UInt64, ownDurableEnd: UInt64, known: SharedEnd?,
        coordination: CoordinationFile?, writers: SharedWriters, keepsSync: Bool
    ) -> SharedSyncOutcome {
        // While another process holds SYNC, its fdatasync may cover `target` (it syncs what every
        // process wrote before it began): a published durable end D ≥ target in a sound slot of
        // the known epoch is durable — a failed sync anywhere cuts back to D, never below — so
        // the wait ends there, without SYNC. Else the other process, awake and with its next
        // records ready, could take SYNC again for its next sync before this one's next try,
        // and the saves waiting here would wait for that one too.
        let coveredElsewhere: SharedEnd?
        do throws(LogError) {
            coveredElsewhere = try writers.sync.acquire(for: "make its saves durable") { () -> SharedEnd? in
                guard let slot = coordination?.read(), slot.storeID == meta.storeID, !slot.isFailed,
                    known.map({ $0.epoch == slot.epoch }) ?? false, slot.visibleEnd >= target
                else { return nil }
                return slot
            }
        } catch {
            return .lockTimeout(error)
        }
        if let coveredElsewhere { return .durable(end: coveredElsewhere.visibleEnd, synced: false, slot: coveredElsewhere) }
        // Kept while no other process waits for it (SharedFileLock, parked): slot 1 moves only
        // under SYNC, so while this process keeps it nobody else rewrites it.
        defer { writers.sync.release(keeping: keepsSync) }
        let slot = coordination?.read().flatMap { $0.storeID == meta.storeID ? $0 : nil } ?? known
        if let slot, slot.isFailed || (known.map { $0.epoch != slot.epoch } ?? false) { return .failedElsewhere }
        let published = slot?.visibleEnd ?? 0
        if published >= target { return .durable(end: published, synced: false, slot: slot) }
        // E is read before the fdatasync begins, from the segment file it syncs (D11 "per inode").
        var end = ownEnd
        if let turn = coordination?.readTurn(), turn.storeID == meta.storeID,
            turn.lastSegmentBaseOffset == segment.baseOffset
        {
            end = max(end, turn.writtenEnd)
        }
        do throws(FileSystemError) {
            try segment.handle.syncData()
        } catch {
            let cut = max(published, ownDurableEnd)
            // Written even when the slot could not be read (a fresh one): the others must learn.
            let marked = markSlotFailed(
                coordination, slot: slot, known: known, durableEnd: ownDurableEnd, base: segment.baseOffset)
            // The cut-back, before SYNC is released: nothing another process had acknowledged
            // (everything up to the shared durable end stays); the truncation drops the cached
            // pages, so no open in this boot reads bytes that never reached the disk.
            if cut >= segment.baseOffset {
                try? segment.handle.truncate(
                    toByteCount: SegmentScanner.filePosition(logicalOffset: cut, baseOffset: segment.baseOffset))
                try? segment.handle.sync()
            }
            return .failed(
                LogError(
                    .syncFailed,
                    "fdatasync failed: \(error). Records not yet durable were cut back and "
                        + (marked
                            ? "every process writing the store was told"
                            : "marking the coordination file failed did not succeed: other processes may not know")
                        + "; the log is read-only until reopened.", file: segment.path,
                    offset: cut, underlying: error), cutBackTo: cut)
        }
        // Checked after the fdatasync, before publishing or acknowledging (D11).
        var after = coordination?.read().flatMap { $0.storeID == meta.storeID ? $0 : nil } ?? slot
        if let current = after, current.isFailed || (known.map { $0.epoch != current.epoch } ?? false) {
            return .failedElsewhere
        }
        // Acknowledged only once slot 1 states the durable end (D11): an unreadable slot or a
        // failed write acknowledges nothing — a later failed fdatasync elsewhere cuts back to the
        // published end, which would drop records acknowledged here.
        guard var current = after, let coordination else {
            let failure = LogError(
                .syncFailed,
                "The coordination file's slot of \(directory) could not be read after an fdatasync: the durable end "
                    + "cannot be published, so nothing is acknowledged; the log is read-only until reopened.",
                file: CoordinationFile.path(in: directory))
            _ = markSlotFailed(
                coordination, slot: nil, known: known, durableEnd: ownDurableEnd, base: segment.baseOffset)
            return .unpublished(failure)
        }
        if end > current.visibleEnd {
            current.visibleEnd = end
            current.lastSegmentBaseOffset = segment.baseOffset
            current.changeCounter &+= 1
            do throws(LogError) { try coordination.writeChecked(current) } catch {
                _ = markSlotFailed(
                    coordination, slot: after, known: known, durableEnd: ownDurableEnd, base: segment.baseOffset)
                return .unpublished(
                    LogError(
                        .syncFailed,
                        "Publishing the durable end in the coordination file failed (\(error.message)): nothing is "
                            + "acknowledged; the log is read-only until reopened.", file: error.file,
                        underlying: error.underlying))
            }
            after = current
        }
        return .durable(end: max(end, current.visibleEnd), synced: true, slot: current)
    }

    // MARK: Reading the others' work without the turn

    /// A writer of a shared store: moves the durable end to the shared one, reading and checking
    /// first the records up to it that this process had not caught up with (they are durable and
    /// complete: nobody rewrites them). One `pread` when nothing is new.
    func refreshSharedWriter() throws(LogError) -> Bool {
        guard writers != nil else { return false }
        conditionLock.lock()
        defer { conditionLock.unlock() }
        guard !state.isClosed, state.failure == nil, !state.isFailing, let coordination = state.coordination,
            let slot = coordination.read(), slot.storeID == meta.storeID
        else { return false }
        if slot.isFailed || (state.shared.map { $0.epoch != slot.epoch } ?? false) {
            let failure = failedElsewhere
            failStop(failure, cutsAtWrittenEnd: false)
            throw failure
        }
        // Another process moved the history low-water mark (``Log/publishMaintenance()``).
        state.shared?.maintenanceCounter = slot.maintenanceCounter
        guard slot.visibleEnd > state.durableEnd else { return false }
        if slot.visibleEnd > state.writtenEnd {
            let segmentCount = state.segments.count
            do throws(LogError) {
                try openSegments(through: slot.lastSegmentBaseOffset, writable: true)
                // Whoever reads the log's last records takes charge of marking them (D12), as
                // catch-up does: a mark read last needs none.
                if let lastType = try checkRecords(from: state.writtenEnd, through: slot.visibleEnd) {
                    takeChargeOfMarking(after: lastType)
                }
            } catch {
                for segment in state.segments[segmentCount...] { segment.handle.close() }
                state.segments.removeSubrange(segmentCount...)
                throw error
            }
            if state.segments.count > segmentCount {
                state.preallocatedPosition = UInt64(FormatConstants.segmentHeaderByteCount)
            }
            state.writtenEnd = slot.visibleEnd
            // Records another process wrote, read outside a turn (its next catch-up finds none).
            state.lastForeignRecordsNanoseconds = monotonicNanoseconds()
        }
        state.durableEnd = slot.visibleEnd
        state.syncRequestedEnd = max(state.syncRequestedEnd, state.durableEnd)
        state.shared = slot
        checkInvariants()
        resumeAsyncWaiters()
        conditionLock.broadcastWaiters()
        return true
    }
}
