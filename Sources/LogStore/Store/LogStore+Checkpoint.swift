import Foundation
import LogStoreEngine

extension LogStore {
    // MARK: Public API

    /// Writes a checkpoint now and returns its offset X: the state after every record that
    /// starts before X, written from a copy of the state (saves go on meanwhile) after the log is
    /// synced through X. Returns the newest checkpoint's offset without writing when nothing was
    /// written since. Waits for a running automatic checkpoint first. Older checkpoints are
    /// pruned afterwards (DECISIONS.md D4).
    ///
    /// In a store shared by several writing processes (``LogStoreConfiguration/allowsOtherWriters``)
    /// X includes what the others wrote up to the moment of the copy; one process at a time writes
    /// a checkpoint (waiting at most 30 s for another's), and when another process's checkpoint
    /// already holds that state (nothing was written since it), its offset is returned.
    @discardableResult
    public func checkpoint() throws -> UInt64 {
        try checkpoints.beginOnDemand()
        var written: UInt64?
        var failure: (any Error)?
        defer { checkpoints.end(wrote: written, error: failure) }
        do {
            // On demand it never skips (only an automatic one does).
            guard let offset = try writeCheckpoint(automaticInterval: nil) else {
                preconditionFailure("a checkpoint on demand is written or found")
            }
            written = offset
            return offset
        } catch {
            failure = error
            throw error
        }
    }

    /// The offset of the newest checkpoint on disk, or `nil` when there is none.
    public var newestCheckpointOffset: UInt64? { checkpoints.newest }

    /// The error of the last checkpoint that failed (automatic ones fail silently otherwise: the
    /// store works without them, and the next one is tried after another interval of log).
    public var lastCheckpointError: (any Error)? { checkpoints.error }

    // MARK: Internal

    /// The checkpoint the last open started from.
    var openedFromCheckpointOffset: UInt64? { checkpoints.openedFromOffset }
    /// How many log records the open replayed (after the checkpoint it started from, if any).
    var lastOpenReplayedRecordCount: Int { checkpoints.openReplayedRecordCount }
    /// Checkpoints written since open.
    var writtenCheckpointCount: Int { checkpoints.count }

    /// Waits until no checkpoint is being written (tests of automatic checkpoints).
    func waitForCheckpoints() { checkpoints.waitUntilIdle() }

    /// Starts an automatic checkpoint on a background thread when `checkpointIntervalByteCount`
    /// bytes of log were written since the last one (called by ``didPublish(endOffset:)``).
    func checkpointIfDue(endOffset: UInt64) {
        let interval = configuration.checkpointIntervalByteCount
        guard interval > 0, checkpoints.beginAutomatic(endOffset: endOffset, interval: interval) else { return }
        // A Thread, not a Task: encoding and fsync block, and the cooperative pool is small (D2).
        let thread = Thread { [self] in
            // Saves that come while one is written start none; if they made the next one due,
            // it follows at once rather than at a next save, which may never come.
            repeat {
                var written: UInt64?
                var failure: (any Error)?
                do { written = try writeCheckpoint(automaticInterval: interval) } catch { failure = error }
                guard
                    checkpoints.endAutomatic(
                        wrote: written, error: failure, endOffset: log.writtenEnd, interval: interval)
                else { break }
            } while true
        }
        thread.name = "LogStore checkpoint"
        thread.start()
    }

    /// Copies the state under the lock, syncs the log through X, writes the file, prunes.
    /// The caller holds the writer's role.
    ///
    /// A store shared by several writing processes (D11) does all of it under the maintenance
    /// lock, so one process at a time writes and prunes; the copy is taken under the turn after
    /// folding what the others wrote, so the state is exactly the log before X. An automatic
    /// checkpoint (`automaticInterval` set) returns `nil`, writing nothing, when another process
    /// holds the maintenance lock or wrote a checkpoint within the last interval of log; on
    /// demand, a checkpoint another process wrote at X is the answer (one it wrote before this
    /// process's turn can be at X but not past it).
    private func writeCheckpoint(automaticInterval: UInt64?) throws(LogStoreError) -> UInt64? {
        guard log.isSharedByWriters else { return try writeCheckpoint(snapshot: checkpointSnapshot()) }
        do throws(LogError) {
            guard try log.beginMaintenance(waits: automaticInterval == nil, for: "write a checkpoint") else {
                return nil
            }
        } catch { throw .log(error) }
        defer { log.endMaintenance() }
        // L moves only under MAINTENANCE: as another process left it, so that this checkpoint
        // records it and the pruning keeps the checkpoint holding the state after it.
        try followOthersUnderMaintenance()
        let snapshot: (CheckpointHeader, FoldState)
        do {
            do throws(LogError) { try log.beginTurn() } catch { throw LogStoreError.log(error) }
            defer { log.endTurn() }
            snapshot = try checkpointSnapshot()
        }
        // Another process's checkpoint, written under this lock before it was granted, may
        // already hold this state (or a later one). On a failed log, nothing is reported.
        try refuseOnAFailedLog()
        if let onDisk = try checkpointFiles.offsets().last, onDisk + (automaticInterval ?? 0) >= snapshot.0.offset {
            // Its writer may have been killed between its rename and its directory fsync.
            do throws(FileSystemError) { try configuration.fileSystem.syncDirectory(configuration.directory) } catch {
                throw .log(
                    LogError(
                        .ioError, "Making checkpoint \(onDisk) of another process durable (directory fsync): \(error).",
                        file: configuration.directory, underlying: error))
            }
            checkpoints.adopt(onDisk)
            // Under MAINTENANCE all the same: a dead process's unfinished checkpoint goes now,
            // not only at the next checkpoint written (one adopted at the end may be the last).
            pruneCheckpoints(keeping: onDisk)
            return automaticInterval == nil ? onDisk : nil
        }
        return try writeCheckpoint(snapshot: snapshot)
    }

    /// The header and state of a checkpoint at the written end (store state held for the copy).
    private func checkpointSnapshot() throws(LogStoreError) -> (CheckpointHeader, FoldState) {
        try inner.withLock { inner throws(LogStoreError) -> (CheckpointHeader, FoldState) in
            guard !inner.closed else { throw .log(LogError(.closed, "The store is closed.")) }
            // A store shared by writers, under the turn: nothing is written meanwhile, by this
            // process or another, and the fold takes in every record the others wrote.
            if log.isSharedByWriters {
                try foldOtherWritersLocked(&inner)
                // Unequal only when a failed fdatasync (another thread's save) cut the log back
                // meanwhile: the log is failed, and no checkpoint is written.
                guard inner.workingEnd == log.writtenEnd else {
                    throw .log(
                        LogError(
                            .readOnly,
                            "The log was cut back after a failed sync while a checkpoint was being taken; no checkpoint "
                                + "is written. Reopen the store.", file: configuration.directory))
                }
            }
            // Every write happens under this lock, and `working` folds every written record:
            // it is exactly the state after every record before the written end.
            let lastToken =
                inner.pending.last.map {
                    DefaultHistoryToken(
                        storeIdentifier: log.storeID, offset: $0.position.offset, check: $0.position.payloadCRC)
                } ?? inner.publishedToken
            let header = CheckpointHeader(
                storeID: log.storeID, offset: log.writtenEnd, lastToken: lastToken,
                table: inner.table, sequenceEnd: inner.working.sequenceEnd,
                lastTimestampMicroseconds: inner.lastTimestampMicroseconds,
                lowWaterMark: inner.lowWaterMark, bookmarks: inner.bookmarkList)
            return (header, inner.working)
        }
    }

    /// Writes the checkpoint of `snapshot` unless it is the newest one already, then prunes.
    private func writeCheckpoint(snapshot: (CheckpointHeader, FoldState)) throws(LogStoreError) -> UInt64 {
        let (header, state) = snapshot
        // Before "nothing written since": a failed sync cuts the log back to its durable end,
        // which may be the newest checkpoint's X, while saves acknowledged after it are gone.
        // Returning X would call them durable (found by the simulator, seed 5664).
        try refuseOnAFailedLog()
        if header.offset == checkpoints.newest {
            pruneCheckpoints(keeping: header.offset)
            return header.offset
        }
        try writeCheckpointFile(header: header, state: state)
        pruneCheckpoints(keeping: header.offset)
        return header.offset
    }

    /// Syncs the log through the header's X, then writes the checkpoint file (temp, fsync,
    /// rename, directory fsync). The caller holds the writer's role.
    func writeCheckpointFile(header: CheckpointHeader, state: FoldState) throws(LogStoreError) {
        try refuseOnAFailedLog()
        // Durable through X exactly: a sync of "everything written" could return early after a fail-stop.
        do throws(LogError) { try log.sync(through: header.offset) } catch { throw .log(error) }
        guard try checkpointFiles.write(header: header, state: state, isCancelled: { checkpoints.closing }) else {
            let name = CheckpointFileName.name(offset: header.offset)
            throw .log(LogError(.closed, "The store was closed while writing checkpoint \(name)."))
        }
    }

    /// After a failed sync the log is read-only and the in-memory state may hold undurable saves:
    /// no checkpoint is written, and none is reported.
    private func refuseOnAFailedLog() throws(LogStoreError) {
        guard configuration.allowsSave else {
            throw .log(LogError(.readOnly, "This store was opened read-only (allowsSave is false); it writes no checkpoint."))
        }
        guard !log.isReadOnly else {
            throw .log(
                LogError(.readOnly, "The store is read-only (a sync failed); no checkpoint is written. Reopen it."))
        }
    }

    /// The checkpoint files of this store's directory.
    var checkpointFiles: CheckpointFiles { reader.checkpoints }

    /// Deletes every checkpoint but the newest (and those history still needs), then syncs the
    /// directory. Best effort: a checkpoint left behind is valid and harmless, and the next
    /// checkpoint tries again.
    func pruneCheckpoints(keeping newest: UInt64) {
        // In a store shared by writers every prune runs under MAINTENANCE (a checkpoint, a
        // history deletion or retention pass).
        checkpointFiles.prune(
            keeping: checkpointOffsetsNeededByHistory().union([newest]), removesTemporaryFiles: log.isSharedByWriters)
    }

    /// The checkpoint at the low-water mark is the base for time travel and for the next
    /// compaction's fold, and must survive pruning (D4).
    private func checkpointOffsetsNeededByHistory() -> Set<UInt64> {
        inner.withLock { $0.lowWaterMarkCheckpointOffset.map { [$0] } ?? [] }
    }
}
