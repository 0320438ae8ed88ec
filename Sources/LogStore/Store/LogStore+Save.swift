import Foundation
import Synchronization
import LogStoreEngine

extension LogStore {
    /// Validates and resolves the changes, writes one transaction record, waits until it is
    /// durable (in synchronous mode), publishes it, and returns the identifier mapping and token.
    public func save(_ request: DataStoreSaveChangesRequest<DefaultSnapshot>) throws -> DataStoreSaveChangesResult<
        DefaultSnapshot
    > {
        if log.isSharedByWriters, configuration.durability == .synchronous,
            (log.nanosecondsSinceOtherWritersWrote ?? .max) >= inlineSaveQuietNanoseconds.load(ordering: .relaxed),
            saveWriter.enterInlineIfIdle()
        {
            return try saveCombined(request)
        }
        var position: LogPosition?
        var result: DataStoreSaveChangesResult<DefaultSnapshot>
        var durable: Result<Void, LogError>?
        if log.isSharedByWriters {
            (position, result, durable) = try writeInCallOrder(request)
        } else {
            (position, result) = try write(request)
            durable = nil
        }
        guard let written = position else { return result }
        try makeDurableAndPublish(through: written, durable: durable)
        result.token = historyToken(at: written)
        return result
    }

    /// Phase two of a synchronous save whose record ends at `written`: in synchronous mode it
    /// waits until the record is durable — unless `durable` is that wait's outcome already (the
    /// save writer's thread waited for it) — then publishes through it. A failed sync forgets
    /// what was not durable and throws.
    private func makeDurableAndPublish(through written: LogPosition, durable: Result<Void, LogError>? = nil)
        throws(LogStoreError)
    {
        if configuration.durability == .synchronous {
            do throws(LogError) {
                if let durable { try durable.get() } else { try log.waitUntilDurable(written) }
            } catch {
                throw forgetUndurable(error)
            }
        }
        publishIfNeeded(through: written.endOffset)
        didPublish(endOffset: written.endOffset)
    }

    /// The history token of the transaction whose record is at `position`.
    private func historyToken(at position: LogPosition) -> DefaultHistoryToken {
        DefaultHistoryToken(storeIdentifier: log.storeID, offset: position.offset, check: position.payloadCRC)
    }

    /// A synchronous durable save of a store shared by writers, counted as running inline
    /// (``SaveWriter/enterInlineIfIdle()``): written with the saves called meanwhile, in one
    /// turn, by one of their callers, and made durable by one wait (``SaveCombiner``).
    private func saveCombined(_ request: DataStoreSaveChangesRequest<DefaultSnapshot>) throws
        -> DataStoreSaveChangesResult<DefaultSnapshot>
    {
        try saveCombiner.save(
            request,
            writeBatch: { batch in
                let turn = saveWriter.beginBatchTurn()
                defer {
                    saveWriter.endBatchTurn(turn)
                    saveWriter.exitInline(count: batch.count)
                }
                for slot in batch {
                    slot.written = Result {
                        var (position, result) = try write(slot.request, batch: turn)
                        if let position { result.token = historyToken(at: position) }
                        return (position, result)
                    }
                }
            },
            finish: { last in
                do throws(LogStoreError) { try makeDurableAndPublish(through: last) } catch {
                    return (error, log.durableEnd)
                }
                return nil
            })
    }

    /// `save` that suspends instead of blocking a thread while the record becomes durable.
    ///
    /// In a store shared by writing processes the write itself may wait for another process's
    /// turn (up to 30 s): it runs on the store's save-writer thread then, never on the
    /// cooperative pool, in the order the saves were called (D11).
    public nonisolated(nonsending) func save(_ request: DataStoreSaveChangesRequest<DefaultSnapshot>) async throws
        -> DataStoreSaveChangesResult<DefaultSnapshot>
    {
        var (position, result) = log.isSharedByWriters ? try await writeInCallOrder(request) : try write(request)
        guard let written = position else { return result }
        if configuration.durability == .synchronous {
            do throws(LogError) { try await log.waitUntilDurable(written) } catch { throw forgetUndurable(error) }
        }
        publishIfNeeded(through: written.endOffset)
        didPublish(endOffset: written.endOffset)
        result.token = historyToken(at: written)
        return result
    }

    /// ``write(_:)`` on the save writer, queued now — before the caller suspends — so this
    /// process's saves are written in call order; the caller is suspended meanwhile, and the
    /// turn's `flock` waits block the writer's thread, not one of the cooperative pool's.
    private nonisolated(nonsending) func writeInCallOrder(_ request: DataStoreSaveChangesRequest<DefaultSnapshot>)
        async throws -> (LogPosition?, DataStoreSaveChangesResult<DefaultSnapshot>)
    {
        try await withCheckedThrowingContinuation { continuation in
            saveWriter.submit { [self] turn in
                do { continuation.resume(returning: try write(request, batch: turn)) } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    /// ``write(_:)`` on the save writer, queued now, the calling thread blocked until it is done
    /// (it blocked for the turn before; now behind the saves called before it too) — or, below,
    /// on the calling thread.
    ///
    /// When no other process wrote lately and nothing of this process is queued, the save is
    /// written on the calling thread instead (``SaveWriter/runInlineIfIdle(_:)``, several at
    /// once), taking the turn itself — kept from this process's last turn then, so no `flock`
    /// and no catch-up: no hand-over. While others write, saves go through the writer, whose
    /// batches share one turn (and one catch-up) — inline saves then took more turns and were
    /// slower.
    ///
    /// Returns, beside the write's position and result, the outcome of the wait for its
    /// durability when the writer's thread registered it (synchronous durability, a record
    /// written): the caller then sleeps once — until its record is durable — instead of waking
    /// when it is written and sleeping again for the `fdatasync` (``Log/whenDurable(_:_:)``).
    private func writeInCallOrder(_ request: DataStoreSaveChangesRequest<DefaultSnapshot>) throws
        -> (LogPosition?, DataStoreSaveChangesResult<DefaultSnapshot>, Result<Void, LogError>?)
    {
        if (log.nanosecondsSinceOtherWritersWrote ?? .max) >= inlineSaveQuietNanoseconds.load(ordering: .relaxed),
            let written = try saveWriter.runInlineIfIdle({ try write(request) })
        {
            return (written.0, written.1, nil)
        }
        let done = DispatchSemaphore(value: 0)
        let outcome = Mutex<Result<(LogPosition?, DataStoreSaveChangesResult<DefaultSnapshot>), any Error>?>(nil)
        let durable = Mutex<Result<Void, LogError>?>(nil)
        let waitsForDurability = configuration.durability == .synchronous
        saveWriter.submit { [self] turn in
            let result: Result<(LogPosition?, DataStoreSaveChangesResult<DefaultSnapshot>), any Error>
            do { result = .success(try write(request, batch: turn)) } catch { result = .failure(error) }
            outcome.withLock { $0 = result }
            guard waitsForDurability, case .success((let position?, _)) = result else {
                done.signal()
                return
            }
            // Signalled by the sync that covers the record (with the log's lock held: only a
            // store and a signal).
            log.whenDurable(position) { outcome in
                durable.withLock { $0 = outcome }
                done.signal()
            }
        }
        done.wait()
        let (position, result) = try outcome.withLock { $0! }.get()
        return (position, result, durable.withLock { $0 })
    }

    /// How long no other process must have written before a synchronous save of a shared store
    /// is written on its caller's thread: 1 s (``inlineSaveQuietNanoseconds``'s start).
    static let inlineSaveQuietNanosecondsDefault: UInt64 = 1_000_000_000

    /// The one hook after a save is published: live history tails wake (``TailSignal``),
    /// retention runs when a limit is exceeded, and an automatic checkpoint starts when due —
    /// each off the save path.
    func didPublish(endOffset: UInt64) {
        tailSignal.signal()
        retainIfDue()
        checkpointIfDue(endOffset: endOffset)
    }

    /// After a failed sync the log cut itself back to its durable end and is read-only: publish
    /// the saves that did become durable (another thread's save may be between its sync and its
    /// own publish), then forget the rest.
    private func forgetUndurable(_ error: LogError) -> LogStoreError {
        inner.withLock { inner in
            publishLocked(&inner)
            // What is still pending was written and never made durable: forgotten. The index
            // described the working state with it; rebuilt once (the other waiters of the failed
            // group commit find nothing pending).
            if !inner.pending.isEmpty { forgetUnpublished(&inner) }
        }
        return .log(error)
    }

    /// Puts the working state back to the published one — the saves pending publication are
    /// forgotten — with the unique index rebuilt to describe it (the index reads owners' values
    /// from the working state).
    func forgetUnpublished(_ inner: inout Inner) {
        inner.working = inner.published
        inner.uniqueIndex = UniqueIndex(schema: schema, state: inner.working)
        inner.pending.removeAll()
    }

    /// Phase one, under the lock: resolve, encode, write, apply to the working state.
    ///
    /// `batch`: what the save writer found for the batch of queued saves this write is one of
    /// (a store shared by writers): the turn held for it, or why not.
    private func write(_ request: DataStoreSaveChangesRequest<DefaultSnapshot>, batch: SaveWriter.Turn? = nil)
        throws(LogStoreError) -> (LogPosition?, DataStoreSaveChangesResult<DefaultSnapshot>)
    {
        // A store shared by writing processes (D11 stage 2): the turn, with the log caught up;
        // nothing otherwise.
        switch batch {
        case nil:
            do throws(LogError) { try log.beginTurn() } catch { throw .log(error) }
        case .held:
            break
        case .failed(let error):
            throw .log(error)
        case .closed:
            throw .log(LogError(.closed, "The store is closed."))
        }
        defer { if batch == nil { log.endTurn() } }
        let shared = log.isSharedByWriters
        /// The working state, unique index and pending list take a written record's changes.
        func apply(
            _ inner: inout Inner, position: LogPosition, changes: [ResolvedChange], timestamp: Int64
        ) {
            inner.foldWritten(changes, at: position)
            inner.workingEnd = position.endOffset
            inner.lastTimestampMicroseconds = timestamp
        }
        /// A store shared by writers: the record resolved and encoded under `inner`, written after it
        /// is released (a write may wait for another process's `SYNC` — at a roll or at the unsynced
        /// bound — and no thread waits on another process while holding `inner`, review12 B2). The
        /// turn keeps every other save of this process (and of the others) out meanwhile, so the
        /// working state it resolved against does not move.
        var unwritten: (payload: [UInt8], timestamp: Int64)?
        var written = try inner.withLock { inner throws(LogStoreError) -> (LogPosition?, SaveResolver.Resolution) in
            guard !inner.closed else { throw .log(LogError(.closed, "The store is closed.")) }
            guard !usesStoredSchema else {
                throw .unsupportedFeature(
                    "This store was opened without a schema in code (for tools): it does not save.")
            }
            guard configuration.allowsSave else {
                throw .log(LogError(.readOnly, "This store's configuration does not allow saves (allowsSave is false).",
                                    file: configuration.directory))
            }
            // What the other processes saved since this one's last turn, folded before resolving.
            if log.isSharedByWriters { try foldOtherWritersLocked(&inner) }
            let resolution = try SaveResolver(
                schema: schema, storeIdentifier: identifier, state: inner.working,
                uniqueIndex: inner.uniqueIndex,
                collisionPolicy: configuration.uniqueCollisionPolicy,
                dropsChangesToDeletedModels: log.isSharedByWriters,
                entityProperties: entityProperties
            ).resolve(request)
            if !resolution.droppedChanges.isEmpty {
                inner.droppedChangeCount += resolution.droppedChanges.count
                logger.warning(
                    "Dropped \(resolution.droppedChanges.count) change(s) to models another process deleted: \(resolution.droppedChanges.prefix(3))")
            }
            guard !resolution.changes.isEmpty else { return (nil, resolution) }
            let now = Int64(Date().timeIntervalSince1970 * 1_000_000)
            let timestamp = max(now, inner.lastTimestampMicroseconds)
            let record = TransactionRecord(
                schemaVersion: inner.table.version, author: request.editingState.author,
                timestampMicroseconds: timestamp, processIdentifier: Self.processIdentifier,
                changes: resolution.changes)
            let payload = record.encoded(table: inner.table, reusing: &inner.encodingBuffers)
            guard payload.count <= FormatConstants.recordByteCountMax else {
                throw .transactionTooLarge(byteCount: payload.count, limit: FormatConstants.recordByteCountMax)
            }
            if shared {
                unwritten = (payload, timestamp)
                return (nil, resolution)
            }
            let position: LogPosition
            do throws(LogError) { position = try log.write(payload, type: .transaction) } catch { throw .log(error) }
            apply(&inner, position: position, changes: resolution.changes, timestamp: timestamp)
            return (position, resolution)
        }
        if let unwritten {
            let position: LogPosition
            do throws(LogError) { position = try log.write(unwritten.payload, type: .transaction) } catch {
                throw .log(error)
            }
            let changes = written.1.changes
            try inner.withLock { inner throws(LogStoreError) in
                guard !inner.closed else { throw .log(LogError(.closed, "The store is closed.")) }
                // A fetch meanwhile (followOtherWriters) may have folded this record from the log
                // already, as it folds the others' — the same changes: then nothing is left to apply.
                if inner.workingEnd < position.endOffset {
                    // Only the log's own bookkeeping lies between: a segment dictionary when the
                    // write rolled (FORMAT.md §6.8). Catch-up under the turn folded the rest.
                    precondition(inner.workingEnd <= position.offset, "the working state ends past the record's start")
                    apply(&inner, position: position, changes: changes, timestamp: unwritten.timestamp)
                }
            }
            written.0 = position
        }
        let (position, resolution) = written
        var result = DataStoreSaveChangesResult<DefaultSnapshot>(
            storeIdentifier: identifier,
            remappedIdentifiers: resolution.remapped)
        for (identifier, values) in resolution.reregister {
            result.snapshotsToReregister[identifier] = DefaultSnapshot(persistentIdentifier: identifier, values: values)
        }
        return (position, result)
    }

    /// Applies, in log order, every written save up to the log's visible end to the published state.
    func publish() {
        inner.withLock { inner in publishLocked(&inner) }
    }

    /// ``publish()`` unless a publication already took the record ending at `endOffset` (with
    /// every record before it: publications go in log order).
    func publishIfNeeded(through endOffset: UInt64) {
        guard followMirror.publishedVisibleEnd.load(ordering: .acquiring) < endOffset else {
            publicationsSkipped.add(1, ordering: .relaxed)
            return
        }
        publish()
    }

    func publishLocked(_ inner: inout Inner) {
        let visibleEnd = log.visibleEnd
        // Every record ending at or before it is folded and published: not past what `working`
        // folds (another process's records the log caught up with may not be folded yet; a fold
        // under the turn publishes nothing, and the follow's fast path must not skip them).
        defer {
            // In every store, not only a shared one: saves return on it (publishIfNeeded).
            followMirror.publishedVisibleEnd.store(min(visibleEnd, inner.workingEnd), ordering: .releasing)
        }
        var published = 0
        for (position, changes, insertedRows) in inner.pending {
            guard position.endOffset <= visibleEnd else { break }
            var rows = insertedRows.makeIterator()
            for change in changes {
                if case .insert(let identifier, _) = change {
                    let row = rows.next()!
                    inner.published.insert(
                        entityName: identifier.entityName, primaryKey: identifier.primaryKey, row: row)
                } else {
                    inner.published.apply(change)
                }
            }
            assert(rows.next() == nil, "a pending record kept more inserted rows than it has inserts")
            inner.publishedToken = DefaultHistoryToken(
                storeIdentifier: log.storeID, offset: position.offset,
                check: position.payloadCRC)
            published += 1
        }
        inner.pending.removeFirst(published)
    }
}

extension LogStore.Inner {
    /// The working state and the unique index take a written record's changes (this process's
    /// save or another's it caught up with), and the record joins the pending list with the rows
    /// its inserts made, so the published state later takes the same rows rather than making a
    /// second copy of each new model's values.
    mutating func foldWritten(_ changes: [ResolvedChange], at position: LogPosition) {
        var insertedRows: [RowValues] = []
        for change in changes {
            let new = uniqueIndex.apply(change, to: &working)
            if case .insert = change {
                guard let new else { preconditionFailure("an insert left no row for \(change.identifier)") }
                insertedRows.append(new)
            }
        }
        pending.append((position, changes, insertedRows))
    }

    /// ``foldWritten(_:at:)`` for another process's record as its decoder read it: each change's
    /// kind, model and values (a range of `values`, in record order). An insert's values go
    /// straight into its row (its pending change keeps no dictionary: publishing takes the row);
    /// an update's or delete's become a dictionary, as a save's do.
    mutating func foldForeign(
        _ changes: [TransactionRecord.Decoder.ReadChange], values: TransactionRecord.Decoder.Values,
        at position: LogPosition
    ) {
        var resolved: [ResolvedChange] = []
        resolved.reserveCapacity(changes.count)
        var insertedRows: [RowValues] = []
        for (kind, identifier, range) in changes {
            switch kind {
            case .insert:
                insertedRows.append(uniqueIndex.applyInsert(of: identifier, values: values[range], to: &working))
                resolved.append(.insert(identifier, [:]))
            case .update, .delete:
                // A delete's tombstone is history's (the record keeps it); a state reads none.
                let change: ResolvedChange =
                    kind == .update
                    ? .update(identifier, TransactionRecord.Decoder.dictionary(values[range]))
                    : .delete(identifier, tombstone: [:])
                uniqueIndex.apply(change, to: &working)
                resolved.append(change)
            }
        }
        pending.append((position, resolved, insertedRows))
    }
}
