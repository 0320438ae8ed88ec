import Foundation
import LogStoreEngine

/// Several writing processes, one store (DECISIONS.md D11 stage 2): a store opened with
/// ``LogStoreConfiguration/allowsOtherWriters``. Each save takes the log's turn (the engine
/// catches up with the records the other processes appended), folds those records into the
/// working state, the unique index and the pending list, then resolves its own changes against
/// that state and writes. The published state applies pending records — the others' and its
/// own, in log order — once the shared durable end covers them.
extension LogStore {
    /// Folds (store state held) every record between the end the working state folds and the
    /// log's written end — records of other processes, durable or not yet — into the working
    /// state and unique index, and queues their changes for publication. An update to a model
    /// another process deleted was already dropped when that process resolved it; one deleted
    /// after an update here is deleted in log order: nothing resurrects it.
    func foldOtherWritersLocked(_ inner: inout Inner) throws(LogStoreError) {
        let end = log.writtenEnd
        guard end > inner.workingEnd else { return }
        do {
            var records = try log.recordsThroughWrittenEnd(from: inner.workingEnd)
            // The decoder of the last fold, while the table is the same (its lookups were made
            // for every fold: a dozen allocations for the one or two records of a turn).
            var decoder =
                inner.foldDecoder.flatMap { $0.table == inner.table ? $0 : nil }
                ?? TransactionRecord.Decoder(table: inner.table, storeIdentifier: identifier)
            defer { inner.foldDecoder = decoder }
            // A record's changes as read (kind, model, where its values are in `values`), applied
            // once the whole record decoded: no dictionary per change (an insert's values go
            // straight into its row), and a malformed record changes nothing. Reused from record
            // to record.
            var read: [TransactionRecord.Decoder.ReadChange] = []
            var values: TransactionRecord.Decoder.Values = []
            var scratch: TransactionRecord.Decoder.Values = []
            // Bounded by the written end: the iterator stops there — and at `end`, read before:
            // a refresh or catch-up on another thread may move the written end meanwhile, and
            // records past `end` folded here would be folded again from `workingEnd = end`.
            while let record = try records.next(), record.offset < end {
                switch record.type {
                case .transaction:
                    read.removeAll(keepingCapacity: true)
                    values.removeAll(keepingCapacity: true)
                    let timestamp: Int64
                    do {
                        timestamp = try record.payload.withUnsafeBytes { bytes throws(ByteReaderError) in
                            try decoder.forEachChange(bytes, scratch: &scratch) { kind, identifier, changed in
                                let start = values.count
                                values.append(contentsOf: changed)
                                read.append((kind, identifier, start..<values.count))
                            }
                        }
                    } catch {
                        throw LogStoreError.corruptRecord(offset: record.offset, reason: "transaction record: \(error)")
                    }
                    inner.foldForeign(read, values: values, at: LogPosition(of: record))
                    inner.lastTimestampMicroseconds = max(inner.lastTimestampMicroseconds, timestamp)
                case .schema:
                    let migration: SchemaMigration
                    do { migration = try SchemaMigration.decode(record.payload) } catch {
                        throw LogStoreError.corruptRecord(offset: record.offset, reason: "schema record: \(error)")
                    }
                    // Additions another process's models recorded: the new table. A migration
                    // that changes stored models is for a process opened alone to fold.
                    guard migration.steps.isEmpty, !migration.completedByNextTransaction else {
                        throw LogStoreError.log(
                            LogError(
                                .reopenRequired,
                                "Another process migrated the store at \(configuration.directory) (offset "
                                    + "\(record.offset)); open it again to fold the migration.",
                                file: configuration.directory, offset: record.offset))
                    }
                    inner.table = migration.table
                    decoder = TransactionRecord.Decoder(table: inner.table, storeIdentifier: identifier)
                case .bookmark:
                    do {
                        try BookmarkRecord.decode(record.payload, storeID: log.storeID).apply(to: &inner.bookmarks)
                    } catch {
                        throw LogStoreError.corruptRecord(offset: record.offset, reason: "bookmark record: \(error)")
                    }
                    // Another process's acknowledgement may let L move: it must be durable first
                    // (syncBookmarkRecords), or a power cut brings its consumer back behind L (D7).
                    inner.bookmarkRecordEnd = max(inner.bookmarkRecordEnd, record.endOffset)
                default:
                    break
                }
            }
        } catch let error as LogError {
            throw .log(error)
        } catch let error as LogStoreError {
            throw error
        } catch {
            preconditionFailure("unexpected \(error)")
        }
        inner.workingEnd = end
    }

    /// A writer of a shared store, before a fetch, a history fetch or a tail pass: learns the
    /// shared durable end (one `pread` when nothing is new), folds the records the others wrote,
    /// and publishes what is durable.
    func followOtherWriters() throws(LogStoreError) {
        // The fast path, without `inner`: slot 1 moved nothing (one `pread`), L did not move, the
        // working state folds every record this log knows, and nothing became visible since the
        // last publication. (The refresh needs no store lock: it moves the log's ends only to
        // records the others made durable, past everything this process wrote.)
        let refreshed: Bool
        do throws(LogError) { refreshed = try log.refreshFromOtherWriters() } catch { throw .log(error) }
        if !refreshed,
            log.followedMaintenanceCounter == followMirror.loadedMaintenanceCounter.load(ordering: .acquiring),
            log.writtenEnd <= followMirror.workingEnd.load(ordering: .acquiring),
            log.visibleEnd <= followMirror.publishedVisibleEnd.load(ordering: .acquiring)
        {
            return
        }
        let moved = try inner.withLock { inner throws(LogStoreError) -> Bool in
            guard !inner.closed else { return false }
            do throws(LogError) { _ = try log.refreshFromOtherWriters() } catch { throw .log(error) }
            // Fold first: the records it folds may lie in segments the reload below forgets.
            try foldOtherWritersLocked(&inner)
            var moved = false
            let maintenance = log.followedMaintenanceCounter
            if maintenance != inner.loadedMaintenanceCounter {
                // Another process moved L (and deletes the segments below it). A checkpoint it
                // pruned while this listed them leaves the counter unmatched: looked at again next time.
                if let reloaded = try reloadLowWaterMarkLocked(&inner, underMaintenance: false) {
                    moved = reloaded
                    inner.loadedMaintenanceCounter = maintenance
                }
            }
            let before = inner.publishedToken
            publishLocked(&inner)
            return moved || inner.publishedToken != before
        }
        if moved { tailSignal.signal() }
    }

    /// A store shared by writers: reads L, and the checkpoint recording it, from the checkpoint
    /// files (store state held) — another process may have moved it — and forgets the segments
    /// wholly at or below that checkpoint and below what the working state folds (that process
    /// deletes them; it wrote the checkpoint first). L only moves forward. Returns whether it
    /// moved, or `nil` when the checkpoint recording L vanished while the files were read (only
    /// outside `MAINTENANCE`: a pass pruned it meanwhile; look again later).
    ///
    /// `underMaintenance`: every checkpoint file on disk counts (each was synced through its X
    /// before its rename), not only those at or before this process's durable end — a process
    /// that has not followed yet would otherwise miss the newest L and write a checkpoint with
    /// an older one, pruning the one that records it (review of 2dddcf6, finding 2).
    func reloadLowWaterMarkLocked(_ inner: inout Inner, underMaintenance: Bool) throws(LogStoreError) -> Bool? {
        let headers = try checkpointFiles.headers(atOrBefore: underMaintenance ? .max : log.visibleEnd)
        guard let mark = CheckpointFiles.lowWaterMark(of: headers),
            inner.lowWaterMark.map({ mark.offset > $0.offset }) ?? true
        else { return false }
        // The checkpoint at the end of L's record (history compaction writes it, D6): the base
        // of time travel and of the next compaction's fold. Pruning keeps it.
        guard let recording = headers.last(where: { $0.lowWaterMark == mark && $0.lastToken == mark }) else {
            guard underMaintenance else { return nil }
            throw .log(
                LogError(
                    .corruption,
                    "The checkpoints of \(configuration.directory) record the history low-water mark at offset "
                        + "\(mark.offset) but none holds the state right after it.", file: configuration.directory))
        }
        inner.lowWaterMark = mark
        inner.lowWaterMarkCheckpointOffset = recording.offset
        do throws(LogError) { try log.forgetSegments(endingAtOrBefore: min(recording.offset, inner.workingEnd)) } catch
        {
            throw .log(error)
        }
        return true
    }

    /// One history deletion or retention pass at a time across the processes of a store shared
    /// by writers (the caller holds `compactionLock`): takes this process's checkpoint role, then
    /// `MAINTENANCE` — in that order, so a `checkpoint()` here, which holds the role while it waits
    /// for `MAINTENANCE`, never waits on this pass — then follows the others (their saves and
    /// bookmarks, and an L one of them moved) and runs `body`. Returns `nil` without running it
    /// when `waits` is false and another process holds `MAINTENANCE`. In a store not shared,
    /// runs `body` (the role is taken where the checkpoint is written).
    func withMaintenance<T>(waits: Bool, for what: String, _ body: () throws -> T) throws -> T? {
        guard log.isSharedByWriters else { return try body() }
        try checkpoints.beginOnDemand()
        defer { checkpoints.end(wrote: nil, error: nil) }
        do throws(LogError) {
            guard try log.beginMaintenance(waits: waits, for: what) else { return nil }
        } catch { throw LogStoreError.log(error) }
        defer { log.endMaintenance() }
        try followOthersUnderMaintenance()
        return try body()
    }

    /// Under `MAINTENANCE` in a store shared by writers: folds what the others saved (bookmarks
    /// included: consumers hold L back across processes), then takes L as the last process to
    /// move it left it. Throws `closed` on a closed store (the fold would silently do nothing).
    func followOthersUnderMaintenance() throws(LogStoreError) {
        try followOtherWriters()
        let moved = try inner.withLock { inner throws(LogStoreError) -> Bool in
            guard !inner.closed else { throw .log(LogError(.closed, "The store is closed.")) }
            return try reloadLowWaterMarkLocked(&inner, underMaintenance: true) ?? false
        }
        // It moved here, not at this process's follow: its mover may have died before telling
        // the others (slot 1's counter), so they are told again — under SYNC, no store lock held.
        if moved {
            do throws(LogError) { try log.publishMaintenance() } catch { throw .log(error) }
        }
    }
}
