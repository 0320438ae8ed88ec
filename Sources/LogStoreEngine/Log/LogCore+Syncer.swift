import Foundation
extension LogCore {
    /// The syncer thread's loop. In order of priority: an `fdatasync` for anyone waiting (or a
    /// batched interval that ran out, or the final sync at close); a durable-end mark once idle
    /// (or at close); zeros written ahead of the write position; index files of sealed segments.
    /// Otherwise it sleeps.
    func runSyncer() {
        conditionLock.lock()
        while true {
            if state.failure == nil, !state.isFailing, !state.syncInProgress, let target = syncTarget() {
                performSync(through: target)
                continue
            }
            if sharedPublishDelayNanoseconds == 0 {
                publishSharedLocked()
                continue
            }
            if isDurableEndMarkDue {
                writeDurableEndMark()
                continue
            }
            // At close, wait for a leader's sync to finish before the files may be closed.
            if state.isClosed && state.pendingIndexWrites.isEmpty && !state.syncInProgress {
                state.syncerExited = true
                conditionLock.broadcastWaiters()
                conditionLock.unlock()
                return
            }
            if needsPreallocation {
                preallocateChunk()
                continue
            }
            if !state.pendingIndexWrites.isEmpty {
                let segment = state.pendingIndexWrites.removeFirst()
                state.indexWriteInFlight = segment.baseOffset
                conditionLock.unlock()
                writeIndexFile(of: segment)
                conditionLock.lock()
                state.indexWriteInFlight = nil
                conditionLock.broadcastWaiters()  // a compaction may wait to delete this segment
                continue
            }
            conditionLock.waitSyncer(timeoutNanoseconds: sleepNanoseconds())
            state.statistics.syncerWakeCount += 1
        }
    }

    /// What the next sync must cover, if one is due (lock held).
    private func syncTarget() -> UInt64? {
        guard state.writtenEnd > state.durableEnd else { return nil }
        if state.syncRequestedEnd > state.durableEnd || state.isClosed || isBatchedSyncDue { return state.writtenEnd }
        return nil
    }

    var isBatchedSyncDue: Bool {
        guard case .batched(let interval) = options.durability, state.writtenEnd > state.durableEnd else {
            return false
        }
        return monotonicNanoseconds() - state.lastSyncNanoseconds >= interval.nanoseconds
    }

    func sleepNanoseconds() -> UInt64? {
        var timeout: UInt64?
        if state.needsDurableEndMark, state.failure == nil, !state.isFailing, !state.isReadOnly,
            let delay = options.durableEndMarkDelay?.nanoseconds
        {
            // Not due (else it would have been written): either its time has not come, or it is
            // overdue but blocked (unsynced bytes in `.none` mode, a sync, roll or zero-fill under
            // way). Blocked, look again after another delay instead of spinning on a zero timeout
            // (a leader's sync does not wake the syncer, so such a mark may come up to two delays
            // after the last write).
            let elapsed = monotonicNanoseconds() - state.lastWriteNanoseconds
            timeout = delay > elapsed ? delay - elapsed : delay
        }
        // While another thread's sync (or a fail-stop waiting for it) runs, the syncer cannot
        // start one: the end of that sync wakes it (performSync) instead of a zero timeout.
        if case .batched(let interval) = options.durability, state.writtenEnd > state.durableEnd,
            !state.syncInProgress, !state.isFailing
        {
            let elapsed = monotonicNanoseconds() - state.lastSyncNanoseconds
            let untilSync = interval.nanoseconds > elapsed ? interval.nanoseconds - elapsed : 0
            timeout = min(timeout ?? untilSync, untilSync)
        }
        if let untilPublish = sharedPublishDelayNanoseconds {
            timeout = min(timeout ?? untilPublish, untilPublish)
        }
        let now = monotonicNanoseconds()
        if state.preallocationRetryNanoseconds > now {
            // A failed zero-fill waits this long before it is tried again (reset on success).
            let untilRetry = state.preallocationRetryNanoseconds - now
            timeout = min(timeout ?? untilRetry, untilRetry)
        }
        return timeout
    }

    /// One `fdatasync` of the last segment (lock held on entry and exit, released during the
    /// call); everything written before it started is durable when it returns. Unsynced bytes are
    /// only ever in the last segment: a roll syncs the old segment before the new one takes
    /// writes. At most one runs at a time (`syncInProgress`), on the syncer or on a blocking
    /// waiter that leads it.
    func performSync(through target: UInt64) {
        if let writers { return performSharedSync(through: target, writers: writers) }
        precondition(!state.syncInProgress, "one fdatasync at a time")
        state.syncInProgress = true
        let handle = state.segments.last!.handle
        conditionLock.unlock()
        let result: Result<Void, FileSystemError>
        do { result = .success(try handle.syncData()) } catch { result = .failure(error) }
        conditionLock.lock()
        state.syncInProgress = false
        // Wake the syncer only when it has work queued behind this sync (async waiters, close):
        // blocking waiters lead their own next sync, and a needless wake-up costs a context switch.
        // In batched mode, bytes written during this sync need the syncer's deadline set again;
        // in `.none` mode a background sync requested meanwhile (at half the unsynced bound) would
        // otherwise wait for a writer to stall at the bound.
        let batched: Bool = if case .batched = options.durability { true } else { false }
        if !state.asyncWaiters.isEmpty || state.isClosed || (batched && state.writtenEnd > target)
            || (options.durability == .none && state.syncRequestedEnd > target)
        {
            conditionLock.signalSyncer()
        }
        switch result {
        case .success:
            // After the sync: it covered at most what was written when it started.
            precondition(target <= state.writtenEnd || state.failure != nil, "a sync past the written end")
            state.durableEnd = max(state.durableEnd, target)
            checkInvariants()
            publishSharedLocked()
            state.lastSyncNanoseconds = monotonicNanoseconds()
            state.statistics.syncCount += 1
            resumeAsyncWaiters()
            conditionLock.broadcastWaiters()
        case .failure(let error):
            failStop(
                LogError(
                    .syncFailed,
                    "fdatasync failed: \(error). Records not yet durable were cut back; "
                        + "the log is read-only until reopened.", file: handle.path, offset: state.durableEnd,
                    underlying: error))
        }
    }

    /// Fail-stop (lock held): cut the last segment back to the durable end (ftruncate and fsync; D2 "Changed")
    /// before anyone in this process learns of the failure, then refuse appends until reopened.
    /// Read-only processes learn of it first (the coordination slot's epoch moves before the
    /// cut-back), so none mistakes the records vanishing under it for damage. A failed sync is
    /// never retried: the kernel may have dropped the dirty pages and would report success.
    func failStop(_ failure: LogError, cutsAtWrittenEnd: Bool = true) {
        guard state.failure == nil, !state.isFailing else {
            // Another thread is failing the log and may be waiting for the sync this caller just
            // finished (`syncInProgress` went false without a broadcast): wake it.
            conditionLock.broadcastWaiters()
            return
        }
        state.isFailing = true
        // A leader's fdatasync may be running: let it finish first. What it covers is durable, so
        // the cut-back starts from the true durable end, and no second sync ever runs beside it.
        while state.syncInProgress { conditionLock.waitWaiter() }
        if writers != nil {
            // A store shared by writers: records past this process's durable end may be other
            // processes' (a failed sync cut back to the shared durable end under SYNC already). A
            // failed write under the turn removes only what it wrote past the written end.
            if cutsAtWrittenEnd && state.turnHeld {
                let segment = state.segments.last!
                let from = SegmentScanner.filePosition(logicalOffset: state.writtenEnd, baseOffset: segment.baseOffset)
                do {
                    try segment.handle.truncate(toByteCount: from)
                    try segment.handle.sync()
                } catch {
                    state.cutBackFailed = true
                }
                state.preallocatedPosition = from
            }
            state.durableEnd = min(state.durableEnd, state.writtenEnd)
            state.failure = failure
            checkInvariants()
            resumeAsyncWaiters()
            conditionLock.broadcastWaiters()
            return
        }
        publishFailingLocked()
        let segment = state.segments.last!
        let from = SegmentScanner.filePosition(
            logicalOffset: max(state.durableEnd, segment.baseOffset),
            baseOffset: segment.baseOffset)
        // Truncate rather than zero-fill: truncation also drops the cached pages, so even if the
        // sync below fails, no open in this boot can read the undurable bytes (fsyncgate). It also
        // removes whatever part of a failed write reached the file past the written end.
        do {
            try segment.handle.truncate(toByteCount: from)
            try segment.handle.sync()
        } catch {
            state.cutBackFailed = true
        }
        state.preallocatedPosition = from
        state.writtenEnd = state.durableEnd
        state.failure = failure
        checkInvariants()
        publishSharedLocked()  // nothing when the slot published before the cut-back still holds
        resumeAsyncWaiters()
        conditionLock.broadcastWaiters()
    }

    /// Resumes (lock held) every async waiter whose record is durable, or all of them on failure.
    func resumeAsyncWaiters() {
        guard !state.asyncWaiters.isEmpty else { return }
        var remaining: [AsyncWaiter] = []
        for waiter in state.asyncWaiters {
            if state.durableEnd >= waiter.endOffset {
                waiter.resume(.success(()))
            } else if let failure = state.failure {
                waiter.resume(.failure(reporting(failure)))
            } else {
                remaining.append(waiter)
            }
        }
        state.asyncWaiters = remaining
    }

    /// Whether a durable-end mark should be appended now (lock held): the newest record is not a
    /// mark, everything written is durable (the mark states it, D12), nothing else is under way,
    /// and either the log is closing or no record came for ``LogOptions/durableEndMarkDelay``.
    var isDurableEndMarkDue: Bool {
        // A synchronous store shared by writers decides on the durable end after catching up under
        // the turn (another process's sync may have covered what this one's view still calls
        // unsynced); in `.none`/`.batched` its own unsynced records wait for a sync first, as alone
        // (else the syncer would take the turn every delay until one came).
        guard state.needsDurableEndMark, state.failure == nil, !state.isFailing, !state.isReadOnly,
            !state.isRolling, !state.syncInProgress, state.zeroFillStart == nil,
            (writers != nil && options.durability == .synchronous) || state.writtenEnd == state.durableEnd
        else { return false }
        if state.isClosed { return true }
        guard let delay = options.durableEndMarkDelay?.nanoseconds else { return false }
        return monotonicNanoseconds() - state.lastWriteNanoseconds >= delay
    }

    /// Appends a durable-end mark (lock held) and asks for the sync that makes it durable. It
    /// states D = its own offset: every record before it is durable. It goes in the last segment
    /// even when that takes the segment past `segmentByteCountMax` by its 32 bytes (FORMAT.md
    /// §5.3): skipped there, the last records of a full segment — an oversized record alone in
    /// its segment, say — stayed unstated at close, and rot in them was cut as a torn tail (found
    /// by the simulator, `SimulatorTests`). A full disk skips it (it is bookkeeping, not data);
    /// any other write error is fail-stop, as for any record.
    private func writeDurableEndMark() {
        if let writers { return writeSharedDurableEndMark(writers) }
        writeDurableEndMarkLocked()
    }

    /// A store shared by writers (lock held on entry and exit): the mark is a record like any
    /// other, written under the turn after catching up, and only when the shared durable end
    /// (slot 1, read by the catch-up) covers everything written by every process — then it truly
    /// states that every record before it is durable. A busy turn means another process (or a
    /// save here) is writing: look again after another delay (at close, give up: the writer of
    /// the later records marks them). Unlike a save it does not wait for `TURN`.
    private func writeSharedDurableEndMark(_ writers: SharedWriters) {
        let closing = state.isClosed
        conditionLock.unlock()
        // At close, wait a little: the turn is often held by another process's open or
        // preallocation, with no later record coming to be marked by anyone else.
        // Tries, not `acquire`: the closing thread may hold the turn's mutex itself (a store
        // whose open fails inside its turn closes the log there), and `acquire` waits for the
        // mutex without a bound (review of eec4ccf, finding 3).
        var acquired = writers.turn.tryAcquire()
        if closing {
            let deadline = monotonicNanoseconds() + 1_000_000_000
            // Bounded: 1 s of tries 1 ms apart.
            while !acquired && monotonicNanoseconds() < deadline {
                usleep(1_000)
                acquired = writers.turn.tryAcquire()
            }
        }
        conditionLock.lock()
        guard acquired else {
            if state.isClosed { state.needsDurableEndMark = false } else {
                state.lastWriteNanoseconds = monotonicNanoseconds()
            }
            return
        }
        precondition(!state.turnHeld, "the turn's mutex was free")
        state.turnHeld = true
        // Kept (parked) or not, as a save's turn: the slot is written before `TURN` really goes.
        var caughtUp = false
        defer { letGoOfTurnLocked(writers, caughtUp: caughtUp) }
        caughtUp = (try? catchUpLocked(closing: closing, kept: writers.turn.keptSinceRelease)) != nil
        // A failed catch-up failed the log (or names damage the next turn reports): no mark.
        guard caughtUp else {
            state.needsDurableEndMark = false
            return
        }
        // Others wrote since and their records are not durable here yet: a sync first (one
        // without an fdatasync when another process's covered them already), then look again
        // after another delay. (A mark read last by the catch-up needs no other.)
        guard state.needsDurableEndMark, isDurableEndMarkDue, state.writtenEnd == state.durableEnd else {
            if state.isClosed { state.needsDurableEndMark = false } else {
                state.lastWriteNanoseconds = monotonicNanoseconds()
                // `.none` and `.batched` sync on their own terms, not for a mark.
                if options.durability == .synchronous {
                    state.syncRequestedEnd = max(state.syncRequestedEnd, state.writtenEnd)
                }
            }
            return
        }
        writeDurableEndMarkLocked()
    }

    private func writeDurableEndMarkLocked() {
        state.needsDurableEndMark = false
        let segment = state.segments.last!
        let offset = state.writtenEnd
        let position = SegmentScanner.filePosition(logicalOffset: offset, baseOffset: segment.baseOffset)
        precondition(state.durableEnd == offset && state.zeroFillStart == nil, "a mark only over a durable log")
        var record: PreparedRecord
        do {
            record = try PreparedRecord(payload: UnsafeRawBufferPointer(start: nil, count: 0), type: .durableEndMark,
                compresses: false)
        } catch {
            preconditionFailure("an empty record is never too large: \(error)")
        }
        record.assign(offset: offset, durableEnd: state.durableEnd)
        do throws(FileSystemError) {
            try segment.handle.write(record.bytes, at: position)
        } catch {
            _ = handleWriteFailure(error, segment: segment, position: position)
            return
        }
        state.writtenEnd = offset + record.recordByteCount
        checkInvariants()
        state.statistics.markCount += 1
        state.statistics.byteCount += record.recordByteCount
        segment.note(offset: offset, recordByteCount: record.recordByteCount)
        state.syncRequestedEnd = max(state.syncRequestedEnd, state.writtenEnd)
    }

    /// Whether zeros should be written further ahead of the write position (lock held).
    var needsPreallocation: Bool {
        guard options.preallocationAheadByteCount > 0, !state.isRolling, !state.isClosed, !state.isReadOnly,
            state.failure == nil, state.zeroFillStart == nil
        else { return false }
        if state.preallocationRetryNanoseconds > monotonicNanoseconds() { return false }
        let segment = state.segments.last!
        let position = SegmentScanner.filePosition(logicalOffset: state.writtenEnd, baseOffset: segment.baseOffset)
        let target = min(position + options.preallocationAheadByteCount, options.segmentByteCountMax)
        // Refill once half the lead is used up, so the syncer does not wake for every record.
        return state.preallocatedPosition < target
            && state.preallocatedPosition < position + options.preallocationAheadByteCount / 2 + 1
    }

    /// Writes one chunk of zeros past the write position, outside the lock. Writers that would
    /// reach the chunk wait (`zeroFillStart`), so zeros never land on a record. Off the append
    /// path: the next `fdatasync` makes the blocks durable, and later syncs then need no
    /// file-size journal commit.
    private func preallocateChunk() {
        guard let writers else { return zeroFillChunk() }
        // A store shared by writers: zeros go into the live segment only under the turn, from the
        // caught-up end — nobody else writes meanwhile, so they never land on another process's
        // record (D11 stage 2, preallocation). A busy turn means someone is writing: look again
        // in a millisecond.
        conditionLock.unlock()
        let acquired = writers.turn.tryAcquire()
        conditionLock.lock()
        guard acquired else {
            state.preallocationRetryNanoseconds = monotonicNanoseconds() + 1_000_000
            return
        }
        precondition(!state.turnHeld, "the turn's mutex was free")
        state.turnHeld = true
        let caughtUp = (try? catchUpLocked(kept: writers.turn.keptSinceRelease)) != nil
        if caughtUp && needsPreallocation { zeroFillChunk() }
        if !caughtUp { state.preallocationRetryNanoseconds = monotonicNanoseconds() + 1_000_000_000 }
        letGoOfTurnLocked(writers, caughtUp: caughtUp)
    }

    private func zeroFillChunk() {
        let segment = state.segments.last!
        let position = SegmentScanner.filePosition(logicalOffset: state.writtenEnd, baseOffset: segment.baseOffset)
        let start = max(state.preallocatedPosition, position)
        let target = min(position + options.preallocationAheadByteCount, options.segmentByteCountMax)
        guard target > start else {
            state.preallocatedPosition = max(state.preallocatedPosition, start)
            return
        }
        let count = min(options.preallocationChunkByteCount, target - start)
        state.zeroFillStart = start
        conditionLock.unlock()
        let succeeded: Bool
        do {
            try ZeroFill.write(segment.handle, from: start, byteCount: count)
            succeeded = true
        } catch {
            // A full disk (or any error) here costs only speed: appends still extend the file.
            succeeded = false
        }
        conditionLock.lock()
        state.zeroFillStart = nil
        checkInvariants()
        if succeeded {
            state.preallocatedPosition = start + count
            state.preallocationRetryNanoseconds = 0
        } else {
            state.preallocationRetryNanoseconds = monotonicNanoseconds() + 1_000_000_000
        }
        conditionLock.broadcastWaiters()
    }

    /// Trims a sealed segment's preallocated zeros (so every byte of a sealed segment is covered
    /// by a CRC) and writes its sparse index (temp + rename; a cache, so not synced: a damaged one
    /// fails its CRC on open and is rebuilt). The trim's fsync only concerns the file size: the
    /// records were synced before the roll, so a failure here loses nothing and is not fail-stop;
    /// if the trim is lost, the zeros are back, and zeros are not data.
    private func writeIndexFile(of segment: SegmentFile) {
        let endPosition = SegmentScanner.filePosition(logicalOffset: segment.endOffset, baseOffset: segment.baseOffset)
        if (try? segment.handle.size()).map({ $0 > endPosition }) ?? false {
            try? segment.handle.truncate(toByteCount: endPosition)
            try? segment.handle.sync()
        }
        let name = LogFileNames.index(segment.baseOffset)
        let bytes = segment.index.encoded(storeID: meta.storeID, baseOffset: segment.baseOffset)
        // Not durable: the index is a cache, rebuilt when lost or damaged.
        try? AtomicFile.write(bytes, to: path(name), durable: false, fileSystem: fileSystem)
    }
}

extension Duration {
    var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        return UInt64(max(seconds, 0)) * 1_000_000_000 + UInt64(max(attoseconds, 0) / 1_000_000_000)
    }
}
