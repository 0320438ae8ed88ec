import Foundation
import LogStoreEngine

/// What one history deletion did.
public struct HistoryCompaction: Sendable, Equatable {
    /// L before the deletion.
    public var previousLowWaterMark: DefaultHistoryToken?
    /// L after it: this transaction and everything before it are gone from history.
    public var lowWaterMark: DefaultHistoryToken?
    /// The base offsets of the segment files deleted, oldest first.
    public var deletedSegments: [UInt64] = []
    /// Bytes of log deleted (records and segment headers).
    public var reclaimedByteCount: UInt64 = 0
    /// The consumer whose bookmark held the deletion back, if one did.
    public var heldBackByConsumer: String?
    /// Consumers retention dropped (past the lag or idle limit).
    public var droppedConsumers: [String] = []
}

extension LogStore: HistoryProviding {
    /// The transactions its history holds.
    public typealias HistoryType = DefaultHistoryTransaction

    // MARK: Fetching

    /// The transactions the descriptor selects, oldest first (or in its sort order), as
    /// DECISIONS.md D6 says: a token lower bound at or after the low-water mark L is complete up
    /// to the visible end; an older one throws ``LogStoreError/historyTokenExpired(resumeToken:)``;
    /// a token whose check does not match throws ``LogStoreError/historyTokenInvalid(_:reason:)``.
    /// Without a token lower bound it returns the retained history and never expires.
    public func fetchHistory(_ descriptor: HistoryDescriptor<DefaultHistoryTransaction>) throws
        -> [DefaultHistoryTransaction]
    {
        try fetchHistoryCounting(descriptor).transactions
    }

    /// `fetchHistory` that also says how many log records it read (tests of the seek cost).
    func fetchHistoryCounting(_ descriptor: HistoryDescriptor<DefaultHistoryTransaction>) throws
        -> HistoryReader.Fetched<DefaultHistoryTransaction>
    {
        try checkOpen()
        try followOtherProcess()
        refreshAfterLogFailure()
        do {
            return try historyReader().fetch(descriptor)
        } catch let error as LogStoreError {
            // A compaction deleted the segments the fetch was about to read: ask again, which now
            // sees the new L (and throws historyTokenExpired if the token is older).
            guard error.code == .offsetOutOfRange else { throw error }
            return try historyReader().fetch(descriptor)
        }
    }

    func historyReader() -> HistoryReader {
        let start = log.startOffset  // before L: see HistoryReader.logStartOffset
        return inner.withLock {
            HistoryReader(
                log: log, table: $0.table, lowWaterMark: $0.lowWaterMark, logStartOffset: start,
                authorIndex: historyAuthorIndex)
        }
    }

    /// L: the newest deleted transaction, or `nil` while no history was deleted. `token > L`
    /// returns all retained history.
    public var historyLowWaterMark: DefaultHistoryToken? {
        // As another process may have moved it (an error following is for the next fetch).
        try? followOtherProcess()
        return inner.withLock { $0.lowWaterMark }
    }

    // MARK: Deleting

    /// Deletes history as DECISIONS.md D6 says, held back by registered consumers (D7).
    public func deleteHistory(_ descriptor: HistoryDescriptor<DefaultHistoryTransaction>) throws {
        try deleteHistory(descriptor, force: false)
    }

    /// Deletes history up to the newest transaction the descriptor's predicate selects: no
    /// predicate (everything up to the newest transaction), an upper bound on `token` (`<`, `<=`),
    /// an upper bound on `timestamp`, or both with `&&`; anything else throws
    /// ``LogStoreError/unsupportedFeature(_:)``. That transaction becomes the low-water mark L.
    ///
    /// Unless `force` is set, L stops at the oldest registered consumer's bookmark. The state is
    /// untouched. A checkpoint holding the state right after L is written first (D4); then older
    /// checkpoints are pruned and every segment whose records are all at or below L is deleted,
    /// never the segment being written.
    @discardableResult
    public func deleteHistory(_ descriptor: HistoryDescriptor<DefaultHistoryTransaction>, force: Bool) throws
        -> HistoryCompaction
    {
        let query = HistoryQuery(descriptor.predicate)
        if descriptor.predicate != nil,
            query.hasTermsOtherThanUpperBounds || (query.tokenUpperBound == nil && query.timestampUpperBound == nil)
        {
            throw LogStoreError.unsupportedFeature(
                "deleteHistory accepts no predicate, an upper bound on token "
                    + "(`$0.token < t` or `<=`), an upper bound on timestamp, or both joined with &&.")
        }
        compactionLock.lock()
        defer { compactionLock.unlock() }
        // A store shared by writers: one process at a time, with L as the others left it.
        let compaction = try withMaintenance(waits: true, for: "delete history") { () throws -> HistoryCompaction in
            let reader = historyReader()
            try reader.validate(query)
            var target = try newestTransaction(upTo: query, reader: reader)
            var heldBack: String?
            if !force { (target, heldBack) = try clampToConsumers(target) }
            var compaction = try compact(to: target)
            compaction.heldBackByConsumer = heldBack
            return compaction
        }
        guard let compaction else { preconditionFailure("a waiting maintenance pass runs") }
        return compaction
    }

    /// `target`, or the oldest consumer's bookmark when that is older (D7), with the consumer's
    /// name. A bookmark at or behind L (a forced deletion passed it) holds nothing back any more
    /// than L does: the target is then L itself, which deletes nothing new.
    func clampToConsumers(_ target: (token: DefaultHistoryToken, end: UInt64)?) throws(LogStoreError)
        -> ((token: DefaultHistoryToken, end: UInt64)?, String?)
    {
        guard let candidate = target, let (name, bookmark) = oldestBookmark(),
            bookmark.map({ $0 < candidate.token }) ?? true
        else { return (target, nil) }
        guard let bookmark else { return (nil, name) }
        if let mark = historyLowWaterMark, bookmark.offset <= mark.offset { return (nil, name) }
        return ((bookmark, try recordEnd(of: bookmark)), name)
    }

    /// Makes `target` the low-water mark (if it moves L forward) and deletes what it covers.
    /// The caller holds `compactionLock`.
    func compact(to target: (token: DefaultHistoryToken, end: UInt64)?) throws -> HistoryCompaction {
        let previous = historyLowWaterMark
        var compaction = HistoryCompaction(previousLowWaterMark: previous, lowWaterMark: previous)
        if let target, previous.map({ target.token.offset > $0.offset }) ?? true {
            // The bookmark records that let L move here (an acknowledgement, a removal, a
            // consumer dropped by retention) may lie after L's record, beyond what the
            // checkpoint's sync covers: were they lost in a crash, a consumer would come back
            // with a bookmark behind L, its history deleted (D7).
            try syncBookmarkRecords()
            try writeLowWaterMarkCheckpoint(target.token, end: target.end)
            compaction.lowWaterMark = target.token
            // Read-only processes (and the other writers of a shared store) reload L from the
            // checkpoint just written.
            do throws(LogError) { try log.publishMaintenance() } catch {
                let message =
                    "History deleted up to offset \(target.token.offset), but the other processes were not told: "
                    + "\(error). They learn of it when they next delete history, write a checkpoint or open the store."
                logger.warning("\(message)")
            }
        }
        // Live tails behind the new L must throw historyTokenExpired now, not at the next save.
        tailSignal.signal()
        let startBefore = log.startOffset
        compaction.deletedSegments = try deleteSegmentsCoveredByLowWaterMark()
        compaction.reclaimedByteCount =
            log.startOffset - startBefore
            + UInt64(compaction.deletedSegments.count * FormatConstants.segmentHeaderByteCount)
        return compaction
    }

    /// Makes every bookmark record written so far durable (nothing to do when none was written
    /// since open, or the log is durable past the last one).
    func syncBookmarkRecords() throws(LogStoreError) {
        let end = inner.withLock { $0.bookmarkRecordEnd }
        guard end > 0 else { return }
        do throws(LogError) { try log.sync(through: end) } catch { throw .log(error) }
    }

    /// Deletes the segments wholly at or below L (never the last). Opening calls it too, so a
    /// compaction cut short by a crash or a full disk finishes: it needs no new file (D7).
    @discardableResult
    func deleteSegmentsCoveredByLowWaterMark() throws -> [UInt64] {
        guard let end = inner.withLock({ $0.lowWaterMarkCheckpointOffset }) else { return [] }
        do throws(LogError) { return try log.deleteSegments(endingAtOrBefore: end) } catch {
            throw LogStoreError.log(error)
        }
    }

    func finishCompaction() {
        guard !log.isReadOnly else { return }
        compactionLock.lock()
        defer { compactionLock.unlock() }
        _ = try? withMaintenance(waits: false, for: "finish a history deletion") {
            try deleteSegmentsCoveredByLowWaterMark()
        }
    }

    /// The newest visible transaction the query's upper bounds admit, after L, with its end.
    private func newestTransaction(upTo query: HistoryQuery, reader: HistoryReader) throws(LogStoreError)
        -> (token: DefaultHistoryToken, end: UInt64)?
    {
        if query.timestampUpperBound == nil, query.tokenUpperBound == nil {
            guard let newest = currentToken else { return nil }
            return (newest, try recordEnd(of: newest))
        }
        if query.timestampUpperBound == nil, let bound = query.tokenUpperBound, bound.inclusive,
            bound.value.offset >= log.startOffset
        {
            // Validated: the record at the token is a transaction with this check.
            return (bound.value, try recordEnd(of: bound.value))
        }
        return try newestTransaction(
            offsetBound: query.tokenUpperBound.map {
                HistoryQuery.Bound(value: $0.value.offset, inclusive: $0.inclusive)
            },
            timestampBound: query.timestampUpperBound)
    }

    /// The newest visible transaction after L starting before (or at, if inclusive) the offset
    /// bound, with a timestamp before (or at) the timestamp bound. Offsets and timestamps only
    /// grow along the log, so the first transaction past either bound ends the scan.
    func newestTransaction(offsetBound: HistoryQuery.Bound<UInt64>?, timestampBound: HistoryQuery.Bound<Date>?)
        throws(LogStoreError) -> (token: DefaultHistoryToken, end: UInt64)?
    {
        let reader = historyReader()
        var newest: (token: DefaultHistoryToken, end: UInt64)?
        do {
            var records = try reader.iterator(from: reader.startOffset(for: HistoryQuery()))
            while let record = try records.next() {
                if let bound = offsetBound, bound.inclusive ? record.offset > bound.value : record.offset >= bound.value
                {
                    break
                }
                guard record.type == .transaction else { continue }
                if let bound = timestampBound {
                    let timestamp: Int64
                    do { timestamp = try TransactionRecord.decodePrefix(record.payload).timestampMicroseconds } catch {
                        throw LogStoreError.corruptRecord(offset: record.offset, reason: "transaction record: \(error)")
                    }
                    let date = Date(timeIntervalSince1970: Double(timestamp) / 1_000_000)
                    if bound.inclusive ? date > bound.value : date >= bound.value { break }
                }
                newest = (
                    DefaultHistoryToken(storeIdentifier: log.storeID, offset: record.offset, check: record.payloadCRC),
                    record.endOffset
                )
            }
        } catch let error as LogError {
            throw .log(error)
        } catch let error as LogStoreError {
            throw error
        } catch {
            preconditionFailure("unexpected \(error)")
        }
        return newest
    }

    /// The end offset of the transaction a (validated) token names.
    func recordEnd(of token: DefaultHistoryToken) throws(LogStoreError) -> UInt64 {
        if let mark = historyLowWaterMark, token.offset == mark.offset,
            let end = inner.withLock({ $0.lowWaterMarkCheckpointOffset })
        {
            return end
        }
        do throws(LogError) {
            guard let record = try log.firstRecord(atOrAfter: token.offset), record.offset == token.offset else {
                throw LogError(.offsetOutOfRange, "No record starts at offset \(token.offset).", offset: token.offset)
            }
            return record.endOffset
        } catch {
            throw .log(error)
        }
    }

    /// Writes the checkpoint at the end of L's record, recording L, then publishes L in memory.
    private func writeLowWaterMarkCheckpoint(_ mark: DefaultHistoryToken, end: UInt64) throws {
        // A store shared by writers: the pass holds the role already (``withMaintenance``).
        let takesRole = !log.isSharedByWriters
        if takesRole { try checkpoints.beginOnDemand() }
        var written: UInt64?
        var failure: (any Error)?
        defer {
            if takesRole { checkpoints.end(wrote: written, error: failure) } else {
                checkpoints.note(wrote: written, error: failure)
            }
        }
        do {
            var (header, state) = try stateAfter(mark, end: end)
            header.lowWaterMark = mark
            try writeCheckpointFile(header: header, state: state)
            written = end
            inner.withLock { inner in
                inner.lowWaterMark = mark
                inner.lowWaterMarkCheckpointOffset = end
            }
            pruneCheckpoints(keeping: checkpoints.newest.map { max($0, end) } ?? end)
        } catch {
            failure = error
            throw error
        }
    }

    /// The checkpoint header and state right after `mark`: a copy of the working state when
    /// nothing was written after it, else a fold from the newest checkpoint at or before it.
    private func stateAfter(_ mark: DefaultHistoryToken, end: UInt64) throws(LogStoreError) -> (CheckpointHeader, FoldState) {
        let current = inner.withLock { inner -> (CheckpointHeader, FoldState)? in
            // A store shared by writers: `working` may not have folded what catch-up read yet.
            guard log.writtenEnd == end, !log.isSharedByWriters || inner.workingEnd == end else { return nil }
            return (
                CheckpointHeader(
                    storeID: log.storeID, offset: end, lastToken: mark, table: inner.table,
                    sequenceEnd: inner.working.sequenceEnd,
                    lastTimestampMicroseconds: inner.lastTimestampMicroseconds,
                    lowWaterMark: inner.lowWaterMark, bookmarks: inner.bookmarkList),
                inner.working
            )
        }
        if let current { return current }
        let replayed = try reader.fold(through: mark.offset, endingAt: end).result
        return (
            CheckpointHeader(
                storeID: log.storeID, offset: end, lastToken: replayed.lastToken, table: replayed.table,
                sequenceEnd: replayed.state.sequenceEnd,
                lastTimestampMicroseconds: replayed.lastTimestampMicroseconds,
                lowWaterMark: nil, bookmarks: replayed.bookmarks.values.sorted { $0.name < $1.name }),
            replayed.state
        )
    }

    // MARK: Consumers (D7)

    /// The registered history consumers, by name.
    public var historyConsumers: [ConsumerBookmark] {
        // What other processes registered and acknowledged too (as `currentToken`, an error
        // following them is for the next fetch to throw).
        try? followOtherProcess()
        return inner.withLock { $0.bookmarkList.map(ConsumerBookmark.init) }
    }

    /// Registers (or re-registers) a consumer of history: until it acknowledges, deletions keep
    /// everything after `token` (all retained history when `nil`). Stored as a record in the log.
    ///
    /// Unlike an acknowledgement, a registration is made durable before this returns: losing it
    /// would let a deletion remove history the consumer was promised. A token at or before the
    /// low-water mark throws ``LogStoreError/historyTokenExpired(resumeToken:)``.
    public func registerHistoryConsumer(_ name: String, after token: DefaultHistoryToken? = nil) throws {
        // Not while a history deletion runs, here or (in a store shared by writers) in another
        // process: one that had clamped L before this registration would delete past its token.
        compactionLock.lock()
        defer { compactionLock.unlock() }
        _ = try withMaintenance(waits: true, for: "register a history consumer") { () throws in
            // In a store shared by writers, against L as the others left it (withMaintenance follows).
            try followOtherProcess()
            if let token { try historyReader().validate(tokenOnly(token, asLowerBound: true)) }
            let position = try writeBookmark(.set, name: name, token: token)
            do throws(LogError) { try log.waitUntilDurable(position) } catch { throw LogStoreError.log(error) }
        }
    }

    /// Records that `name` has processed everything up to `token`. Costs one small record and no
    /// `fdatasync` of its own: it becomes durable with the next save (a crash may lose it, which
    /// only makes retention keep more).
    public func acknowledgeHistory(_ name: String, through token: DefaultHistoryToken) throws {
        try followOtherProcess()
        guard inner.withLock({ $0.bookmarks[name] != nil }) else { throw LogStoreError.unknownConsumer(name) }
        try historyReader().validate(tokenOnly(token, asLowerBound: true))
        try writeBookmark(.set, name: name, token: token)
    }

    /// Forgets a consumer; its bookmark no longer holds history back.
    public func unregisterHistoryConsumer(_ name: String) throws {
        try followOtherProcess()
        guard let bookmark = inner.withLock({ $0.bookmarks[name] }) else { throw LogStoreError.unknownConsumer(name) }
        try writeBookmark(.remove, name: name, token: bookmark.token)
    }

    /// A query holding just this token (as `token > it` when `asLowerBound`, so an expired one throws).
    private func tokenOnly(_ token: DefaultHistoryToken, asLowerBound: Bool) -> HistoryQuery {
        var query = HistoryQuery()
        query.tokenLiterals = [token]
        if asLowerBound { query.tokenLowerBound = .init(value: token, inclusive: false) }
        return query
    }

    @discardableResult
    func writeBookmark(_ operation: BookmarkRecord.Operation, name: String, token: DefaultHistoryToken?) throws(LogStoreError)
        -> LogPosition
    {
        // A store shared by writing processes: under the turn, after the others' records.
        do throws(LogError) { try log.beginTurn() } catch { throw .log(error) }
        defer { log.endTurn() }
        if log.isSharedByWriters {
            // Written without holding `inner` (the write may wait for another process's SYNC,
            // review12 B2); the turn keeps every other write out meanwhile.
            let record = try inner.withLock { inner throws(LogStoreError) -> BookmarkRecord in
                guard !inner.closed else { throw .log(LogError(.closed, "The store is closed.")) }
                try foldOtherWritersLocked(&inner)
                let now = max(Int64(Date().timeIntervalSince1970 * 1_000_000), inner.lastTimestampMicroseconds)
                return BookmarkRecord(
                    operation: operation,
                    bookmark: CheckpointBookmark(name: name, token: token, lastActivityMicroseconds: now))
            }
            let position: LogPosition
            do throws(LogError) { position = try log.write(record.encoded(), type: .bookmark) } catch {
                throw .log(error)
            }
            return try inner.withLock { inner throws(LogStoreError) -> LogPosition in
                guard !inner.closed else { throw .log(LogError(.closed, "The store is closed.")) }
                // A fetch meanwhile (followOtherWriters) may have folded this record already.
                if inner.workingEnd < position.endOffset {
                    record.apply(to: &inner.bookmarks)
                    inner.workingEnd = position.endOffset
                }
                inner.bookmarkRecordEnd = max(inner.bookmarkRecordEnd, position.endOffset)
                return position
            }
        }
        return try inner.withLock { inner throws(LogStoreError) -> LogPosition in
            guard !inner.closed else { throw .log(LogError(.closed, "The store is closed.")) }
            let now = max(Int64(Date().timeIntervalSince1970 * 1_000_000), inner.lastTimestampMicroseconds)
            let record = BookmarkRecord(
                operation: operation,
                bookmark: CheckpointBookmark(name: name, token: token, lastActivityMicroseconds: now))
            let position: LogPosition
            do throws(LogError) { position = try log.write(record.encoded(), type: .bookmark) } catch {
                throw .log(error)
            }
            record.apply(to: &inner.bookmarks)
            inner.bookmarkRecordEnd = position.endOffset
            inner.workingEnd = position.endOffset
            return position
        }
    }

    /// The consumer with the oldest bookmark (`nil` token = holds everything), if any.
    func oldestBookmark() -> (String, DefaultHistoryToken?)? {
        inner.withLock { inner in
            inner.bookmarks.values.min { lhs, rhs in
                switch (lhs.token, rhs.token) {
                case (nil, nil): lhs.name < rhs.name
                case (nil, _): true
                case (_, nil): false
                case (let left?, let right?): left.offset < right.offset
                }
            }.map { ($0.name, $0.token) }
        }
    }
}
