import Foundation
import LogStoreEngine

/// Checkpoint bookkeeping of one open ``LogStore`` (DECISIONS.md D4).
///
/// At most one checkpoint is written at a time: ``LogStore/checkpoint()`` waits for a running
/// one; an automatic one is not started while another runs. Closing the store cancels a running
/// checkpoint between chunks and waits for it.
final class CheckpointState: @unchecked Sendable {
    // @unchecked: the mutable fields are only touched with `condition` locked; the rest is immutable.
    private let condition = NSCondition()
    private var newestOffset: UInt64?
    /// The end offset that started the last automatic attempt (successful or not): the next one
    /// waits for another interval of log after it, so a failing checkpoint is not retried per save.
    private var lastAttemptOffset: UInt64
    private var isWriting = false
    private var isClosing = false
    private var writtenCount = 0
    private var lastError: (any Error)?

    /// What the open did: the checkpoint it started from, and how many log records it replayed.
    let openedFromOffset: UInt64?
    let openReplayedRecordCount: Int

    init(loaded: LoadedCheckpoints, replayedRecordCount: Int) {
        newestOffset = loaded.newest?.header.offset
        lastAttemptOffset = loaded.newest?.header.offset ?? 0
        openedFromOffset = loaded.newest?.header.offset
        openReplayedRecordCount = replayedRecordCount
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        condition.lock()
        defer { condition.unlock() }
        return try body()
    }

    var newest: UInt64? { locked { newestOffset } }
    var count: Int { locked { writtenCount } }
    var error: (any Error)? { locked { lastError } }
    var closing: Bool { locked { isClosing } }

    /// Waits until no checkpoint is being written, then claims the writer's role.
    func beginOnDemand() throws(LogStoreError) {
        condition.lock()
        defer { condition.unlock() }
        while isWriting && !isClosing { condition.wait() }
        guard !isClosing else { throw .log(LogError(.closed, "The store is closed.")) }
        isWriting = true
    }

    /// Claims the writer's role for an automatic checkpoint when one is due and none is running.
    func beginAutomatic(endOffset: UInt64, interval: UInt64) -> Bool {
        locked {
            guard !isWriting, !isClosing, endOffset >= lastAttemptOffset,
                  endOffset - lastAttemptOffset >= interval else { return false }
            isWriting = true
            lastAttemptOffset = endOffset
            return true
        }
    }

    func end(wrote offset: UInt64?, error: (any Error)?) {
        locked {
            isWriting = false
            if let offset {
                newestOffset = max(newestOffset ?? offset, offset)
                writtenCount += 1
            }
            if let error { lastError = error }
        }
        condition.broadcast()
    }

    /// Cancels a running checkpoint and waits until it is gone.
    func close() {
        condition.lock()
        isClosing = true
        while isWriting { condition.wait() }
        condition.unlock()
        condition.broadcast()
    }

    /// Waits until no checkpoint is being written (tests).
    func waitUntilIdle() {
        condition.lock()
        while isWriting { condition.wait() }
        condition.unlock()
    }
}

/// What an open found among the checkpoint files.
struct LoadedCheckpoints {
    struct Newest {
        var name: String
        var header: CheckpointHeader
        var state: FoldState
    }

    var newest: Newest?
    /// L: the highest low-water mark any checkpoint records.
    var lowWaterMark: HistoryToken?
    /// The checkpoint holding the state right after L (its last transaction is L).
    var lowWaterMarkCheckpointOffset: UInt64?
    /// Every checkpoint file's offset, oldest first.
    var offsets: [UInt64] = []
}

extension LogStore {
    // MARK: Public API

    /// Writes a checkpoint now and returns its offset X: the state after every record that
    /// starts before X, written from a copy of the state (saves go on meanwhile) after the log is
    /// synced through X. Returns the newest checkpoint's offset without writing when nothing was
    /// written since. Waits for a running automatic checkpoint first. Older checkpoints are
    /// pruned afterwards (DECISIONS.md D4).
    @discardableResult
    public func checkpoint() throws -> UInt64 {
        try checkpoints.beginOnDemand()
        var written: UInt64?
        var failure: (any Error)?
        defer { checkpoints.end(wrote: written, error: failure) }
        do {
            let offset = try writeCheckpoint()
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

    /// After a save published: starts an automatic checkpoint on a background thread when
    /// `checkpointIntervalByteCount` bytes of log were written since the last one.
    /// Also wakes live history tails and starts retention when due: every save calls this once
    /// its record is published.
    func checkpointIfDue(endOffset: UInt64) {
        tailSignal.signal()
        retainIfDue()
        let interval = configuration.checkpointIntervalByteCount
        guard interval > 0, checkpoints.beginAutomatic(endOffset: endOffset, interval: interval) else { return }
        // A Thread, not a Task: encoding and fsync block, and the cooperative pool is small (D2).
        let thread = Thread { [self] in
            var written: UInt64?
            var failure: (any Error)?
            do { written = try writeCheckpoint() } catch { failure = error }
            checkpoints.end(wrote: written, error: failure)
        }
        thread.name = "LogStore checkpoint"
        thread.start()
    }

    /// Copies the state under the lock, syncs the log through X, writes the file, prunes.
    /// The caller holds the writer's role.
    private func writeCheckpoint() throws(LogStoreError) -> UInt64 {
        let snapshot = try inner.withLock { inner throws(LogStoreError) -> (CheckpointHeader, FoldState) in
            guard !inner.closed else { throw .log(LogError(.closed, "The store is closed.")) }
            // Every write happens under this lock, and `working` folds every written record:
            // it is exactly the state after every record before the written end.
            let lastToken = inner.pending.last.map {
                HistoryToken(storeIdentifier: log.storeID, offset: $0.position.offset, check: $0.position.payloadCRC)
            } ?? inner.publishedToken
            let header = CheckpointHeader(storeID: log.storeID, offset: log.writtenEnd, lastToken: lastToken,
                                          table: inner.table, sequenceEnd: inner.working.sequenceEnd,
                                          lastTimestampMicroseconds: inner.lastTimestampMicroseconds,
                                          lowWaterMark: inner.lowWaterMark, bookmarks: inner.bookmarkList)
            return (header, inner.working)
        }
        let (header, state) = snapshot
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
        // After a failed sync the log is read-only and the in-memory state may hold undurable saves.
        guard !log.isReadOnly else {
            throw .log(LogError(.readOnly, "The store is read-only (a sync failed); no checkpoint is written. Reopen it."))
        }
        // Durable through X exactly: a sync of "everything written" could return early after a fail-stop.
        do throws(LogError) { try log.sync(through: header.offset) } catch { throw .log(error) }
        let directory = configuration.directory
        let name = CheckpointFileName.name(offset: header.offset)
        do {
            let writer = try RecordFileWriter(
                directory: directory, name: name,
                header: RecordFileHeader(magic: FormatConstants.checkpointMagic, storeID: log.storeID, value: header.offset),
                fileSystem: configuration.fileSystem)
            let completed = try CheckpointEncoder().encode(header: header, state: state, isCancelled: { checkpoints.closing }) {
                type, payload in try writer.append(payload, type: type)
            }
            guard completed else {
                writer.abandon()
                throw LogStoreError.log(LogError(.closed, "The store was closed while writing checkpoint \(name)."))
            }
            try writer.commit()
        } catch let error as LogError {
            throw .log(error)
        } catch let error as LogStoreError {
            throw error
        } catch let error as CheckpointEncoder.Failure {
            throw .log(LogError(.recordTooLarge, "Checkpoint \(name) not written: \(error)", file: directory))
        } catch {
            preconditionFailure("unexpected error \(error)")
        }
    }

    /// Deletes every checkpoint but the newest (and those history still needs), then syncs the
    /// directory. Best effort: a checkpoint left behind is valid and harmless, and the next
    /// checkpoint tries again.
    func pruneCheckpoints(keeping newest: UInt64) {
        let fileSystem = configuration.fileSystem
        let directory = configuration.directory
        let keep = checkpointOffsetsNeededByHistory().union([newest])
        guard let names = try? fileSystem.contentsOfDirectory(directory) else { return }
        var removedAny = false
        for name in names {
            guard let offset = CheckpointFileName.offset(name), !keep.contains(offset) else { continue }
            if (try? fileSystem.removeFile(CheckpointFileName.path(directory: directory, name: name))) != nil {
                removedAny = true
            }
        }
        if removedAny { try? fileSystem.syncDirectory(directory) }
    }

    /// The checkpoint at the low-water mark is the base for time travel and for the next
    /// compaction's fold, and must survive pruning (D4).
    private func checkpointOffsetsNeededByHistory() -> Set<UInt64> {
        inner.withLock { $0.lowWaterMarkCheckpointOffset.map { [$0] } ?? [] }
    }

    // MARK: Open

    /// Finds the checkpoint files, validates every one (a bad one is corruption, never skipped),
    /// and loads the newest. A checkpoint beyond the recovered end of the log is corruption.
    static func loadCheckpoints(log: Log, configuration: LogStoreConfiguration) throws(LogStoreError) -> LoadedCheckpoints {
        let directory = configuration.directory
        let checkpoints = try checkpointOffsets(configuration).map { (name: CheckpointFileName.name(offset: $0), offset: $0) }
        guard let newestFile = checkpoints.last else { return LoadedCheckpoints() }
        let end = log.visibleEnd
        for file in checkpoints where file.offset > end {
            throw .log(corruption(directory, file.name, offset: nil, "checkpoint at offset \(file.offset) lies beyond "
                + "the end of the log at \(end)"))
        }
        var loaded = LoadedCheckpoints()
        for file in checkpoints {
            let isNewest = file.name == newestFile.name
            let (header, state) = try readCheckpoint(file.name, offset: file.offset, log: log, configuration: configuration,
                                                    decodesRows: isNewest)
            loaded.offsets.append(file.offset)
            if let mark = header.lowWaterMark, loaded.lowWaterMark.map({ mark.offset > $0.offset }) ?? true {
                loaded.lowWaterMark = mark
            }
            if let mark = header.lowWaterMark, header.lastToken == mark, mark == loaded.lowWaterMark {
                loaded.lowWaterMarkCheckpointOffset = file.offset
            }
            if isNewest, let state { loaded.newest = .init(name: file.name, header: header, state: state) }
        }
        if let newest = loaded.newest { try checkAgainstLog(newest, log: log, directory: directory) }
        return loaded
    }

    /// The offsets of the checkpoint files in the store directory, oldest first.
    static func checkpointOffsets(_ configuration: LogStoreConfiguration) throws(LogStoreError) -> [UInt64] {
        let directory = configuration.directory
        do throws(FileSystemError) {
            return try configuration.fileSystem.contentsOfDirectory(directory).compactMap(CheckpointFileName.offset).sorted()
        } catch {
            throw .log(LogError(.ioError, "Listing \(directory): \(error).", file: directory, underlying: error))
        }
    }

    /// Opens a checkpoint file and checks its file header: framing, store, offset.
    private static func openCheckpoint(_ name: String, offset: UInt64, log: Log, configuration: LogStoreConfiguration)
        throws(LogStoreError) -> RecordFileReader {
        let directory = configuration.directory
        let path = CheckpointFileName.path(directory: directory, name: name)
        let reader: RecordFileReader
        do throws(LogError) {
            reader = try RecordFileReader(path: path, magic: FormatConstants.checkpointMagic, fileSystem: configuration.fileSystem)
        } catch {
            throw .log(error)
        }
        guard reader.header.storeID == log.storeID else {
            throw .log(corruption(directory, name, offset: 0, "checkpoint of store \(reader.header.storeID), not of this "
                + "store \(log.storeID)"))
        }
        guard reader.header.value == offset else {
            throw .log(corruption(directory, name, offset: 0, "file header says offset \(reader.header.value), the name "
                + "\(offset)"))
        }
        return reader
    }

    /// The header records of the checkpoints at or before the log's visible end, oldest first,
    /// read without the rest of each file (read-only tools need L and the newest table only; a
    /// writable open and `verify` check every record).
    static func checkpointHeaders(log: Log, configuration: LogStoreConfiguration) throws(LogStoreError) -> [CheckpointHeader] {
        var headers: [CheckpointHeader] = []
        for offset in try checkpointOffsets(configuration) where offset <= log.visibleEnd {
            let name = CheckpointFileName.name(offset: offset)
            var reader = try openCheckpoint(name, offset: offset, log: log, configuration: configuration)
            let position = reader.position
            let record: LogRecord?
            do throws(LogError) { record = try reader.next() } catch { throw .log(error) }
            guard let record, record.type == .checkpointHeader else {
                throw .log(corruption(configuration.directory, name, offset: position, "no header record at byte \(position)"))
            }
            let header: CheckpointHeader
            do throws(ByteReaderError) { header = try CheckpointHeader.decode(record.payload) } catch {
                throw .log(corruption(configuration.directory, name, offset: position, "header record: \(error)"))
            }
            guard header.storeID == log.storeID, header.offset == offset else {
                throw .log(corruption(configuration.directory, name, offset: position, "the checkpoint header names store "
                    + "\(header.storeID) at offset \(header.offset), the file is of store \(log.storeID) at offset \(offset)"))
            }
            headers.append(header)
        }
        return headers
    }

    /// Reads and checks one checkpoint file: framing, store, offset, grammar and counts.
    static func readCheckpoint(_ name: String, offset: UInt64, log: Log, configuration: LogStoreConfiguration,
                               decodesRows: Bool) throws(LogStoreError) -> (CheckpointHeader, FoldState?) {
        let directory = configuration.directory
        var reader = try openCheckpoint(name, offset: offset, log: log, configuration: configuration)
        var decoder = CheckpointDecoder(storeIdentifier: log.storeID.uuidString, decodesRows: decodesRows)
        while true {
            let position = reader.position
            let record: LogRecord?
            do throws(LogError) { record = try reader.next() } catch { throw .log(error) }
            guard let record else { break }
            do throws(ByteReaderError) { try decoder.take(record.type, record.payload) } catch {
                throw .log(corruption(directory, name, offset: position, "\(record.type) record at byte \(position): \(error)"))
            }
        }
        let result: (CheckpointHeader, FoldState?)
        do throws(ByteReaderError) { result = try decoder.finish() } catch {
            throw .log(corruption(directory, name, offset: reader.position, "\(error)"))
        }
        let header = result.0
        guard header.storeID == log.storeID, header.offset == offset else {
            throw .log(corruption(directory, name, offset: UInt64(FormatConstants.segmentHeaderByteCount),
                                  "the checkpoint header names store \(header.storeID) at offset \(header.offset), the "
                                    + "file is of store \(log.storeID) at offset \(offset)"))
        }
        return result
    }

    /// The newest checkpoint must fit the log: X starts a record (or is the end), and the last
    /// transaction it names is in the log with that check, before X.
    private static func checkAgainstLog(_ newest: LoadedCheckpoints.Newest, log: Log, directory: String) throws(LogStoreError) {
        let offset = newest.header.offset
        do throws(LogError) {
            guard offset >= log.startOffset else {
                throw corruption(directory, newest.name, offset: nil, "checkpoint at offset \(offset) lies before the "
                    + "oldest record kept in the log, at \(log.startOffset)")
            }
            if offset < log.visibleEnd, let record = try log.firstRecord(atOrAfter: offset), record.offset != offset {
                throw corruption(directory, newest.name, offset: nil, "checkpoint at offset \(offset), but no log record "
                    + "starts there (the next one starts at \(record.offset))")
            }
            if let token = newest.header.lastToken, token.offset >= log.startOffset {
                let record = try log.firstRecord(atOrAfter: token.offset)
                guard let record, record.offset == token.offset, record.type == .transaction,
                      record.payloadCRC == token.check, record.endOffset <= offset else {
                    throw corruption(directory, newest.name, offset: nil, "the checkpoint's last transaction is at offset "
                        + "\(token.offset) with check \(token.check), which the log does not hold before \(offset)")
                }
            }
        } catch {
            throw .log(error)
        }
    }

    private static func corruption(_ directory: String, _ name: String, offset: UInt64?, _ what: String) -> LogError {
        let path = CheckpointFileName.path(directory: directory, name: name)
        return LogError(.corruption, "Corruption in checkpoint \(path): \(what). Run `logstore verify`. While the log "
            + "still holds every record (no history deleted), moving the file out of the store directory lets the "
            + "store open from the log alone.", file: path, offset: offset)
    }
}
