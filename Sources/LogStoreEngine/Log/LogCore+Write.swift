extension LogCore {
    /// Phase one of an append: compress and checksum outside the lock, then, under it, wait for a
    /// turn (no roll in progress, room under the unsynced bound, a segment with space), assign
    /// the offset and `pwrite` the record.
    func write(_ payload: some Collection<UInt8>, type: RecordType) throws(LogError) -> LogPosition {
        // Compressed against the dictionary the last append found (outside the lock); checked
        // below against the segment the record lands in. A record of the dictionary type itself
        // (the log's own, FORMAT.md §6.8; iterators skip it) never uses one.
        // Local functions, not closures held in constants: those were allocated per append (their
        // captures boxed), ~2 of a save's allocations.
        func usable(_ dictionary: RecordDictionary?) -> RecordDictionary? { type == .dictionary ? nil : dictionary }
        let hint = usable(compressionDictionary.withLock { $0 })
        func offered(_ dictionary: RecordDictionary?) -> Bool {
            payload.count
                >= (dictionary == nil
                    ? options.compressionThresholdByteCount : LogOptions.dictionaryCompressionThresholdByteCount)
        }
        // Whether LZ4 is offered the payload; a second encoding (below) against a new dictionary
        // always offers it. Only a payload offered against the dictionary it is encoded with, and
        // not a dictionary record, counts in the backoff: one under that dictionary's threshold
        // must not use up its one try in sixteen.
        let counted = type != .dictionary && offered(hint)
        let mayCompress = options.compresses && (!counted || compressionBackoff.shouldTry())
        func prepare(_ dictionary: RecordDictionary?, mayCompress: Bool) throws(LogError) -> PreparedRecord {
            try PreparedRecord.encoding(
                payload, type: type, compresses: mayCompress && offered(dictionary), dictionary: dictionary)
        }
        var record = try prepare(hint, mayCompress: mayCompress)
        if counted && record.triedCompression { compressionBackoff.record(shrank: record.isCompressed) }
        conditionLock.lock()
        defer { conditionLock.unlock() }
        precondition(writers == nil || state.turnHeld, "a write to a store shared by writers outside a turn")
        // Each pass either finds the record fits its segment as encoded, or encodes it again for
        // the segment it lands in (rare: after a roll here or in another process). A second
        // encoding that no longer fits rolls to a segment holding only its dictionary, where
        // any record fits: the loop ends.
        while true {
            let dictionary = usable(try waitForTurn(recordByteCount: record.recordByteCount))
            if record.dictionary === dictionary { break }
            compressionBackoff.reset()
            record = try prepare(dictionary, mayCompress: options.compresses)
            compressionDictionary.withLock { $0 = dictionary }
        }
        let written = try appendLocked(&record)
        if !type.isSkippable {
            state.dictionarySamples.append(payload, keeping: options.dictionaryByteCount)
        }
        return written
    }

    /// Writes a prepared record at the written end of the last segment (lock held, turn taken).
    private func appendLocked(_ record: inout PreparedRecord) throws(LogError) -> LogPosition {
        let segment = state.segments.last!
        let offset = state.writtenEnd
        let wasClean = state.writtenEnd == state.durableEnd
        let position = SegmentScanner.filePosition(logicalOffset: offset, baseOffset: segment.baseOffset)
        // D12: the record states the durable end known now (a roll made the old segment durable,
        // so it is never below this segment's base).
        precondition(state.durableEnd >= segment.baseOffset && state.durableEnd <= offset, "durable end out of place")
        precondition(
            record.dictionary == nil || record.dictionary === segment.dictionary.knownDictionary,
            "a record compressed against another segment's dictionary")
        record.assign(offset: offset, durableEnd: state.durableEnd)
        // Before the write: the record goes exactly at the written end, after the segment header,
        // inside the segment (unless it is the segment's first record), past any zero-fill.
        precondition(position >= UInt64(FormatConstants.segmentHeaderByteCount), "a record inside the segment header")
        precondition(
            position <= segment.recordsStart || position + record.recordByteCount <= options.segmentByteCountMax,
            "a record past the segment's end")
        precondition(
            state.zeroFillStart.map { position + record.recordByteCount <= $0 } ?? true,
            "a record into the chunk being zero-filled")
        do throws(FileSystemError) {
            try segment.handle.write(record.bytes, at: position)
        } catch {
            throw reporting(handleWriteFailure(error, segment: segment, position: position))
        }
        state.writtenEnd = offset + record.recordByteCount
        checkInvariants()
        state.statistics.appendCount += 1
        state.statistics.byteCount += record.recordByteCount
        state.statistics.payloadByteCount += UInt64(record.header.uncompressedByteCount)
        state.statistics.storedPayloadByteCount += UInt64(record.header.storedByteCount)
        segment.note(offset: offset, recordByteCount: record.recordByteCount)
        state.lastWriteNanoseconds = monotonicNanoseconds()
        if options.durability != .synchronous { publishWrittenEndLocked(now: state.lastWriteNanoseconds) }
        if !state.needsDurableEndMark {
            // The syncer may sleep without a deadline: it must learn that a mark will be due.
            state.needsDurableEndMark = true
            conditionLock.signalSyncer()
        }
        if options.durability != .synchronous {
            conditionLock.broadcastWaiters()
            // Start a sync in the background at half the unsynced bound, so writers rarely stall on it.
            if state.writtenEnd - state.durableEnd > FormatConstants.unsyncedByteCountMax / 2 {
                requestSync(through: state.writtenEnd)
            }
        }
        // In batched mode the syncer sleeps without a deadline while nothing is unsynced: the first
        // write after a sync must wake it so it can set one.
        let batched: Bool = if case .batched = options.durability { true } else { false }
        if needsPreallocation || isBatchedSyncDue || (batched && wasClean) { conditionLock.signalSyncer() }
        return LogPosition(offset: offset, endOffset: state.writtenEnd, payloadCRC: record.header.payloadCRC)
    }

    /// Waits (lock held) until this writer may write `recordByteCount` bytes at the written end,
    /// and returns the dictionary of the segment it will write into (FORMAT.md §6.8).
    private func waitForTurn(recordByteCount: UInt64) throws(LogError) -> RecordDictionary? {
        // Each pass either returns, throws, rolls, or sleeps until a sync or roll finishes.
        while true {
            do throws(LogError) { try checkWritable() } catch { throw reporting(error) }
            let segment = state.segments.last!
            let position = SegmentScanner.filePosition(logicalOffset: state.writtenEnd, baseOffset: segment.baseOffset)
            if state.isRolling || (state.zeroFillStart.map { position + recordByteCount > $0 } ?? false) {
                conditionLock.waitWaiter()
                continue
            }
            let dictionary = try lastSegmentDictionaryLocked()
            // `segment.recordsStart` from the dictionary just looked up (no second lookup).
            let recordsStart = UInt64(FormatConstants.segmentHeaderByteCount) + (dictionary?.recordByteCount ?? 0)
            let isFull = position > recordsStart && position + recordByteCount > options.segmentByteCountMax
            // A store shared by writers may have been opened alone by an older build: its last
            // segment is of an older version, and this writer leaves it as an open alone does.
            let isOlder = position > recordsStart && segment.formatVersion < FormatConstants.formatVersion
            // A segment without a dictionary (a store's first, or one of an older writer) is left
            // early once this writer has a dictionary's worth of payloads to start the next with.
            let dictionaryByteCount = UInt64(options.dictionaryByteCount)
            let leavesEarly =
                dictionary == nil && dictionaryByteCount > 0 && state.dictionarySamples.count >= dictionaryByteCount
                && position - UInt64(FormatConstants.segmentHeaderByteCount) >= dictionaryByteCount
            if isFull || leavesEarly || isOlder {
                // No roll while the syncer zero-fills (a full segment's record always reaches the
                // chunk and waited above; an early roll's need not).
                if state.zeroFillStart != nil {
                    conditionLock.waitWaiter()
                    continue
                }
                try roll(for: recordByteCount)
                continue
            }
            let unsynced = state.writtenEnd - state.durableEnd
            // A record larger than the bound is written only when nothing is unsynced.
            if unsynced > 0 && unsynced + recordByteCount > FormatConstants.unsyncedByteCountMax {
                try waitUntilDurableLocked(endOffset: state.writtenEnd)
                continue
            }
            return dictionary
        }
    }

    /// The last segment's dictionary (lock held), read from its first record the first time.
    private func lastSegmentDictionaryLocked() throws(LogError) -> RecordDictionary? {
        let segment = state.segments.last!
        guard options.compresses, segment.formatVersion >= FormatConstants.dictionaryVersion else { return nil }
        do throws(LogError) {
            let found = try segment.dictionary.lookup(
                handle: segment.handle, baseOffset: segment.baseOffset, formatVersion: segment.formatVersion)
            if case .found(let dictionary) = found { return dictionary }
            return nil
        } catch {
            throw reporting(error)
        }
    }

    func checkWritable() throws(LogError) {
        if state.isClosed { throw LogError(.closed, "The log is closed.", file: directory) }
        if state.isFailing && state.failure == nil {
            throw LogError(
                .readOnly, "The log is failing (a sync or write failed) and is read-only until reopened.",
                file: directory)
        }
        if let failure = state.failure {
            throw LogError(
                .readOnly,
                "The log is read-only after an earlier failure (\(failure.message)). "
                    + "Reopen it to append again.", file: directory, underlying: failure.underlying)
        }
        if state.isReadOnly {
            throw LogError(.readOnly, "The log was opened read-only.", file: directory)
        }
    }

    /// A full disk is recoverable: zero what part of the record reached the file and throw. Any
    /// other write error leaves the page cache in an unknown state: fail-stop.
    func handleWriteFailure(_ error: FileSystemError, segment: SegmentFile, position: UInt64) -> LogError {
        if error.isOutOfSpace {
            if error.byteCountWritten > 0 {
                do {
                    try ZeroFill.write(segment.handle, from: position, byteCount: UInt64(error.byteCountWritten))
                } catch {
                    failStop(LogError.io(error, "Zeroing a partial record"))
                }
            }
            return LogError(
                .outOfSpace,
                "The append failed: the disk is full (\(error)). Nothing of it is "
                    + "visible; free space and append again.", file: segment.path, offset: state.writtenEnd,
                underlying: error)
        }
        let failure = LogError(
            .ioError, "The append failed: \(error). The log is read-only until reopened.",
            file: segment.path, offset: state.writtenEnd, underlying: error)
        // A shared store: the file's page cache is in an unknown state; every process stops
        // (slot 1 marked failed under SYNC, review12 B6), then this one cuts its own bytes.
        if writers != nil { failStopShared(failure, cutsAtWrittenEnd: true) } else { failStop(failure) }
        return failure
    }

    /// Starts a new segment (lock held): the old one is synced first, then the new one is created
    /// as temp file + header + fsync + rename + directory fsync. Other writers wait meanwhile.
    private func roll(for recordByteCount: UInt64) throws(LogError) {
        state.isRolling = true
        defer {
            state.isRolling = false
            conditionLock.broadcastWaiters()
        }
        try waitUntilDurableLocked(endOffset: state.writtenEnd)
        let baseOffset = state.writtenEnd
        // A shared store: the new base is published before the segment exists, so a roller killed
        // before the rename leaves a base the next turn holder creates (crash argument, step 5).
        if writers != nil {
            do throws(LogError) { try publishTurnSlotLocked(lastSegmentBase: baseOffset) } catch {
                failStopShared(error)
                throw reporting(error)
            }
        }
        conditionLock.unlock()
        let created: Result<SegmentFile, FileSystemError>
        do {
            created = .success(
                try LogCore.createSegment(
                    directory: directory, storeID: meta.storeID,
                    baseOffset: baseOffset, fileSystem: fileSystem))
        } catch {
            created = .failure(error)
        }
        conditionLock.lock()
        switch created {
        case .success(let segment):
            let sealed = state.segments.last!
            state.segments.append(segment)
            state.preallocatedPosition = UInt64(FormatConstants.segmentHeaderByteCount)
            state.preallocationRetryNanoseconds = 0
            state.statistics.rollCount += 1
            state.pendingIndexWrites.append(sealed)
            checkInvariants()
            conditionLock.signalSyncer()
            try startWithDictionaryLocked(segment, before: recordByteCount)
        case .failure(let error):
            let failure = LogError.io(error, "Starting segment \(LogFileNames.segment(baseOffset))")
            // A full disk leaves the old segment in use and the append fails; an fsync or rename
            // failure leaves the new file's durability unknown: fail-stop.
            if !error.isOutOfSpace || error.operation.contains("sync") {
                let stop = LogError(.syncFailed, failure.message, file: failure.file, underlying: error)
                // A shared store: the file may be in the directory, not durably; the next turn
                // holder would adopt it while the others acknowledge. Every process must stop.
                if writers != nil { failStopShared(stop) } else { failStop(stop) }
            }
            throw reporting(failure)
        }
    }

    /// A new segment's first record (lock held, rolling): the dictionary of the payloads this
    /// writer appended last (FORMAT.md §6.8), when it has enough of them; the segment's records
    /// are then compressed against it. Without, the segment has none (records compress alone).
    /// Not when the record the roll is for would not fit after it: that one gets the segment alone,
    /// as any record does (and the next one rolls early to a segment with a dictionary).
    private func startWithDictionaryLocked(_ segment: SegmentFile, before recordByteCount: UInt64) throws(LogError) {
        let byteCount = options.dictionaryByteCount
        guard byteCount > 0, state.dictionarySamples.count >= LogOptions.dictionaryByteCountMin,
            segment.formatVersion >= FormatConstants.dictionaryVersion
        else { return }
        // A close or a fail-stop while the roll made the file (lock released): nothing more is written.
        do throws(LogError) { try checkWritable() } catch { throw reporting(error) }
        let bytes = state.dictionarySamples.newest(byteCount)
        var record = try PreparedRecord.encoding(bytes, type: .dictionary, compresses: options.compresses)
        precondition(state.writtenEnd == segment.baseOffset, "a dictionary is its segment's first record")
        let position = UInt64(FormatConstants.segmentHeaderByteCount)
        guard position + record.recordByteCount + recordByteCount <= options.segmentByteCountMax else { return }
        _ = try appendLocked(&record)
        let dictionary = RecordDictionary(bytes, recordByteCount: record.recordByteCount)
        segment.dictionary.set(dictionary)
        compressionDictionary.withLock { $0 = dictionary }
        compressionBackoff.reset()
    }

    /// Asks the syncer (lock held) to make everything through `end` durable.
    func requestSync(through end: UInt64) {
        if state.syncRequestedEnd < end {
            state.syncRequestedEnd = end
            conditionLock.signalSyncer()
        }
    }

    /// Waits until everything written (or up to `endOffset`) is durable; a failed log throws.
    func sync(through endOffset: UInt64?) throws(LogError) {
        conditionLock.lock()
        defer { conditionLock.unlock() }
        if let failure = state.failure { throw reporting(failure) }
        let target = endOffset ?? state.writtenEnd
        guard target <= state.writtenEnd else {
            throw LogError(
                .offsetOutOfRange, "Offset \(target) is past the end of the log (\(state.writtenEnd)).",
                file: directory, offset: target)
        }
        try waitUntilDurableLocked(endOffset: target)
    }

    /// Phase two: blocks until an `fdatasync` covers `endOffset`.
    func waitUntilDurable(endOffset: UInt64) throws(LogError) {
        conditionLock.lock()
        defer { conditionLock.unlock() }
        try waitUntilDurableLocked(endOffset: endOffset)
    }

    /// Blocks (lock held) until an `fdatasync` covers `endOffset`. A thread that is about to block
    /// anyway runs the covering `fdatasync` itself when none is running (it leads; whoever waits
    /// meanwhile rides on the next one), which saves the two thread hand-offs of asking the syncer
    /// — measured ~20 µs of a ~130 µs durable append here. Async waiters never lead: they are
    /// resumed by the syncer, so no cooperative thread blocks in `fdatasync`.
    func waitUntilDurableLocked(endOffset: UInt64) throws(LogError) {
        // Each pass syncs, or sleeps until a sync finishes; the durable end only grows.
        while state.durableEnd < endOffset {
            if let failure = state.failure { throw reporting(failure) }
            if state.syncerExited { throw LogError(.closed, "The log is closed.", file: directory) }
            if !state.syncInProgress && !state.isFailing {
                performSync(through: state.writtenEnd)
                continue
            }
            state.syncRequestedEnd = max(state.syncRequestedEnd, endOffset)
            conditionLock.waitWaiter()
        }
    }

    /// Phase two without blocking a thread: the syncer resumes the continuation.
    nonisolated(nonsending) func waitUntilDurableAsync(endOffset: UInt64) async throws(LogError) {
        let result = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<Void, LogError>, Never>) in
            whenDurable(endOffset: endOffset) { continuation.resume(returning: $0) }
        }
        try result.get()
    }

    /// Runs `body` once everything before `endOffset` is durable (or the log failed or closed):
    /// at once on this thread when it is already, else on the thread whose sync (or catch-up)
    /// finds it durable (the syncer's, as a rule), with the log's lock held (at close, without
    /// it) — `body` must not block or call the log.
    func whenDurable(endOffset: UInt64, _ body: @escaping @Sendable (Result<Void, LogError>) -> Void) {
        conditionLock.lock()
        defer { conditionLock.unlock() }
        if state.durableEnd >= endOffset { return body(.success(())) }
        if let failure = state.failure { return body(.failure(reporting(failure))) }
        if state.syncerExited { return body(.failure(LogError(.closed, "The log is closed.", file: directory))) }
        state.asyncWaiters.append(AsyncWaiter(endOffset: endOffset, resume: body))
        requestSync(through: endOffset)
    }
}
