import Foundation
import LogStoreEngine

/// The checkpoint files of one store directory (DECISIONS.md D4): listing, reading and
/// validating, writing and pruning. It knows files and their grammar; *when* a checkpoint is
/// written is the store's business (``CheckpointState``, `LogStore+Checkpoint.swift`).
///
/// A checkpoint file that is not a temporary file and fails validation is corruption — never
/// silently skipped — and so is one beyond the recovered end of the log.
struct CheckpointFiles {
    let directory: String
    let fileSystem: any FileSystem
    /// The store every checkpoint must belong to.
    let storeID: UUID

    init(directory: String, fileSystem: any FileSystem, storeID: UUID) {
        self.directory = directory
        self.fileSystem = fileSystem
        self.storeID = storeID
    }

    /// The checkpoint files beside `log`.
    init(log: Log, directory: String, fileSystem: any FileSystem) {
        self.init(directory: directory, fileSystem: fileSystem, storeID: log.storeID)
    }

    // MARK: Listing

    /// The offsets of the checkpoint files in the store directory, oldest first.
    func offsets() throws(LogStoreError) -> [UInt64] {
        do throws(FileSystemError) {
            return try fileSystem.contentsOfDirectory(directory).compactMap(CheckpointFileName.offset).sorted()
        } catch {
            throw .log(LogError(.ioError, "Listing \(directory): \(error).", file: directory, underlying: error))
        }
    }

    /// L as the checkpoints record it: the highest low-water mark of any header.
    static func lowWaterMark(of headers: [CheckpointHeader]) -> DefaultHistoryToken? {
        headers.compactMap(\.lowWaterMark).max { $0.offset < $1.offset }
    }

    // MARK: Reading

    /// Finds the checkpoint files, validates every one (a bad one is corruption, never skipped),
    /// and loads the newest. A checkpoint beyond the recovered end of the log is corruption.
    ///
    /// A file that vanished between listing and reading was pruned by a process writing a newer
    /// checkpoint (a store shared by writers, or a writer beside a read-only open): the files are
    /// listed again, a few times at most.
    ///
    /// A log opened without the lock (read-only, beside a writer) fixed its end before listing: a
    /// checkpoint renamed in meanwhile lies beyond it (its writer published a durable end past X
    /// before the rename). Such a log follows the writer once before judging.
    func load(log: Log) throws(LogStoreError) -> LoadedCheckpoints {
        try listingAgainIfAFileVanishes { () throws(LogStoreError) -> LoadedCheckpoints in try loadListed(log: log) }
    }

    private func loadListed(log: Log) throws(LogStoreError) -> LoadedCheckpoints {
        let files = try offsets().map { (name: CheckpointFileName.name(offset: $0), offset: $0) }
        var end = log.visibleEnd
        if !log.holdsLock, files.contains(where: { $0.offset > end }) {
            do throws(LogError) { try log.refresh() } catch { throw .log(error) }
            end = log.visibleEnd
        }
        guard let newestFile = files.last else { return LoadedCheckpoints() }
        for file in files where file.offset > end {
            throw .log(
                corruption(
                    file.name, offset: nil,
                    "checkpoint at offset \(file.offset) lies beyond "
                        + "the end of the log at \(end)"))
        }
        var loaded = LoadedCheckpoints()
        for file in files {
            let isNewest = file.name == newestFile.name
            let (header, state) = try read(offset: file.offset, decodesRows: isNewest)
            loaded.offsets.append(file.offset)
            if let mark = header.lowWaterMark, loaded.lowWaterMark.map({ mark.offset > $0.offset }) ?? true {
                loaded.lowWaterMark = mark
            }
            if let mark = header.lowWaterMark, header.lastToken == mark, mark == loaded.lowWaterMark {
                loaded.lowWaterMarkCheckpointOffset = file.offset
            }
            if isNewest, let state { loaded.newest = .init(name: file.name, header: header, state: state) }
        }
        if let newest = loaded.newest { try check(newest, against: log) }
        return loaded
    }

    /// The header records of the checkpoints at or before `end`, oldest first, read without the
    /// rest of each file (read-only tools need L and the newest table only; a writable open and
    /// `verify` check every record). A file that vanished between listing and opening is skipped:
    /// beside a live writer, a read-only store reads these while the writer deletes older
    /// checkpoints (history deletion keeps the one recording L).
    func headers(atOrBefore end: UInt64) throws(LogStoreError) -> [CheckpointHeader] {
        var headers: [CheckpointHeader] = []
        for offset in try offsets() where offset <= end {
            let name = CheckpointFileName.name(offset: offset)
            var reader: RecordFileReader
            do throws(LogStoreError) { reader = try open(name, offset: offset) } catch {
                if error.underlying?.underlying?.code == ErrorCode.notFound { continue }
                throw error
            }
            let position = reader.position
            let record: LogRecord?
            do throws(LogError) { record = try reader.next() } catch { throw .log(error) }
            guard let record, record.type == .checkpointHeader else {
                throw .log(corruption(name, offset: position, "no header record at byte \(position)"))
            }
            let header: CheckpointHeader
            do throws(ByteReaderError) { header = try CheckpointHeader.decode(record.payload) } catch {
                throw .log(corruption(name, offset: position, "header record: \(error)"))
            }
            guard header.storeID == storeID, header.offset == offset else {
                throw .log(
                    corruption(
                        name, offset: position,
                        "the checkpoint header names store "
                            + "\(header.storeID) at offset \(header.offset), the file is of store \(storeID) at offset \(offset)"
                    ))
            }
            headers.append(header)
        }
        return headers
    }

    /// Reads and checks one checkpoint file: framing, store, offset, grammar and counts. The
    /// state is decoded only when `decodesRows` (otherwise everything else is still checked).
    func read(offset: UInt64, decodesRows: Bool) throws(LogStoreError) -> (CheckpointHeader, FoldState?) {
        let name = CheckpointFileName.name(offset: offset)
        var reader = try open(name, offset: offset)
        var decoder = CheckpointDecoder(
            storeIdentifier: storeID.uuidString, decodesRows: decodesRows, fileByteCount: Int(reader.byteCount))
        // Bounded by the file: each pass reads one record or ends.
        while true {
            let position = reader.position
            // Each record is decoded where the reader holds it (no ~1 MB array per chunk).
            let taken: (type: RecordType, error: ByteReaderError?)?
            do throws(LogError) {
                taken = try reader.nextInPlace { record in
                    do throws(ByteReaderError) {
                        try decoder.take(record.type, record.payload)
                        return (record.type, nil)
                    } catch {
                        return (record.type, error)
                    }
                }
            } catch { throw .log(error) }
            guard let taken else { break }
            if let error = taken.error {
                throw .log(corruption(name, offset: position, "\(taken.type) record at byte \(position): \(error)"))
            }
        }
        let result: (CheckpointHeader, FoldState?)
        do throws(ByteReaderError) { result = try decoder.finish() } catch {
            throw .log(corruption(name, offset: reader.position, "\(error)"))
        }
        let header = result.0
        guard header.storeID == storeID, header.offset == offset else {
            throw .log(
                corruption(
                    name, offset: UInt64(FormatConstants.segmentHeaderByteCount),
                    "the checkpoint header names store \(header.storeID) at offset \(header.offset), the "
                        + "file is of store \(storeID) at offset \(offset)"))
        }
        return result
    }

    /// The newest checkpoint at X with `startOffset` ≤ X ≤ `endOffset` (so it holds nothing
    /// after the end), read and validated; `nil` when there is none.
    /// A file pruned between listing and reading (beside a writer) is looked for again.
    func newest(atOrBefore endOffset: UInt64, notBefore startOffset: UInt64) throws(LogStoreError)
        -> (header: CheckpointHeader, state: FoldState)?
    {
        try listingAgainIfAFileVanishes { () throws(LogStoreError) -> (header: CheckpointHeader, state: FoldState)? in
            guard let offset = try offsets().last(where: { $0 <= endOffset && $0 >= startOffset }) else { return nil }
            let (header, state) = try read(offset: offset, decodesRows: true)
            guard let state else { return nil }
            return (header, state)
        }
    }

    /// Runs `body` again (a few times at most) when it fails because a checkpoint file it listed
    /// was gone when it read it: a process writing a newer checkpoint pruned it (a store shared
    /// by writers, or a writer beside a read-only open).
    private func listingAgainIfAFileVanishes<T>(_ body: () throws(LogStoreError) -> T) throws(LogStoreError) -> T {
        let attemptsMax = 8
        var attempt = 1
        // Bounded: attemptsMax passes.
        while true {
            do throws(LogStoreError) {
                return try body()
            } catch {
                guard attempt < attemptsMax, error.underlying?.underlying?.code == ErrorCode.notFound else { throw error }
                attempt += 1
            }
        }
    }

    // MARK: Writing

    /// Writes the checkpoint file for `header.offset` atomically (temp, fsync, rename, directory
    /// fsync: `RecordFileWriter`). The caller has synced the log through X first (D4). Returns
    /// `false`, writing nothing, when `isCancelled` says so between chunks.
    func write(header: CheckpointHeader, state: FoldState, isCancelled: () -> Bool) throws(LogStoreError) -> Bool {
        let name = CheckpointFileName.name(offset: header.offset)
        do {
            let writer = try RecordFileWriter(
                directory: directory, name: name,
                header: RecordFileHeader(
                    magic: FormatConstants.checkpointMagic, storeID: storeID, value: header.offset),
                fileSystem: fileSystem)
            let completed = try CheckpointEncoder().encode(header: header, state: state, isCancelled: isCancelled) {
                type, payload in try writer.append(payload, type: type)
            }
            guard completed else {
                writer.abandon()
                return false
            }
            try writer.commit()
            return true
        } catch let error as LogError {
            throw .log(error)
        } catch let error as CheckpointEncoder.Failure {
            throw .log(LogError(.recordTooLarge, "Checkpoint \(name) not written: \(error)", file: directory))
        } catch {
            preconditionFailure("unexpected error \(error)")
        }
    }

    /// Deletes every checkpoint file whose offset is not in `keep` and lies below its newest, then
    /// syncs the directory. A newer one is never deleted: in a store shared by writing processes it
    /// is another process's. Best effort: a checkpoint left behind is valid and harmless, and the
    /// next prune tries again.
    ///
    /// With `removesTemporaryFiles` (a store shared by writers, `MAINTENANCE` held: only its holder
    /// writes checkpoints) a `checkpoint-….ckpt.tmp` is a dead process's unfinished checkpoint, and
    /// is removed too; otherwise only an open that is alone removes those.
    func prune(keeping keep: Set<UInt64>, removesTemporaryFiles: Bool = false) {
        guard let newestKept = keep.max(), let names = try? fileSystem.contentsOfDirectory(directory) else { return }
        var removedAny = false
        for name in names {
            if removesTemporaryFiles, name.hasSuffix(FormatConstants.temporaryFileExtension),
                CheckpointFileName.offset(String(name.dropLast(FormatConstants.temporaryFileExtension.count))) != nil
            {
                if (try? fileSystem.removeFile(CheckpointFileName.path(directory: directory, name: name))) != nil {
                    removedAny = true
                }
                continue
            }
            guard let offset = CheckpointFileName.offset(name), offset < newestKept, !keep.contains(offset) else {
                continue
            }
            if (try? fileSystem.removeFile(CheckpointFileName.path(directory: directory, name: name))) != nil {
                removedAny = true
            }
        }
        if removedAny { try? fileSystem.syncDirectory(directory) }
    }

    // MARK: Checks

    /// Opens a checkpoint file and checks its file header: framing, store, offset.
    private func open(_ name: String, offset: UInt64) throws(LogStoreError) -> RecordFileReader {
        let path = CheckpointFileName.path(directory: directory, name: name)
        let reader: RecordFileReader
        do throws(LogError) {
            reader = try RecordFileReader(path: path, magic: FormatConstants.checkpointMagic, fileSystem: fileSystem)
        } catch {
            throw .log(error)
        }
        guard reader.header.storeID == storeID else {
            throw .log(
                corruption(
                    name, offset: 0,
                    "checkpoint of store \(reader.header.storeID), not of this "
                        + "store \(storeID)"))
        }
        guard reader.header.value == offset else {
            throw .log(
                corruption(name, offset: 0, "file header says offset \(reader.header.value), the name \(offset)"))
        }
        return reader
    }

    /// The newest checkpoint must fit the log: X starts a record (or is the end), and the last
    /// transaction it names is in the log with that check, before X.
    private func check(_ newest: LoadedCheckpoints.Newest, against log: Log) throws(LogStoreError) {
        let offset = newest.header.offset
        do throws(LogError) {
            guard offset >= log.startOffset else {
                throw corruption(
                    newest.name, offset: nil,
                    "checkpoint at offset \(offset) lies before the "
                        + "oldest record kept in the log, at \(log.startOffset)")
            }
            if offset < log.visibleEnd, let record = try log.firstRecord(atOrAfter: offset, includingMarks: true),
                record.offset != offset
            {
                throw corruption(
                    newest.name, offset: nil,
                    "checkpoint at offset \(offset), but no log record "
                        + "starts there (the next one starts at \(record.offset))")
            }
            if let token = newest.header.lastToken, token.offset >= log.startOffset {
                let record = try log.firstRecord(atOrAfter: token.offset)
                guard let record, record.offset == token.offset, record.type == .transaction,
                    record.payloadCRC == token.check, record.endOffset <= offset
                else {
                    throw corruption(
                        newest.name, offset: nil,
                        "the checkpoint's last transaction is at offset "
                            + "\(token.offset) with check \(token.check), which the log does not hold before \(offset)")
                }
            }
        } catch {
            throw .log(error)
        }
    }

    private func corruption(_ name: String, offset: UInt64?, _ what: String) -> LogError {
        let path = CheckpointFileName.path(directory: directory, name: name)
        return LogError(
            .corruption,
            "Corruption in checkpoint \(path): \(what). Run `logstore verify`. While the log "
                + "still holds every record (no history deleted), moving the file out of the store directory lets the "
                + "store open from the log alone.", file: path, offset: offset)
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
    var lowWaterMark: DefaultHistoryToken?
    /// The checkpoint holding the state right after L (its last transaction is L).
    var lowWaterMarkCheckpointOffset: UInt64?
    /// Every checkpoint file's offset, oldest first.
    var offsets: [UInt64] = []
}
