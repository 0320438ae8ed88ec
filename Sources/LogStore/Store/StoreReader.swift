import Foundation
import LogStoreEngine

/// Reads a store's state and history from its log and checkpoint files, changing nothing: the
/// one fold from a checkpoint (DECISIONS.md D4), time travel, L as the checkpoints record it, and
/// history without the model types.
///
/// It serves the read-only entry points (`logstore replay`, `logstore history`,
/// ``LogStore/replay(directory:fileSystem:through:)``), which open the log with
/// `Log.openReadOnly` beside a live writer, and the writable ``LogStore`` itself when it must fold
/// again (after a failed sync, or for the state right after a new low-water mark).
struct StoreReader {
    let log: Log
    let directory: String
    let checkpoints: CheckpointFiles

    init(log: Log, directory: String, fileSystem: any FileSystem) {
        self.log = log
        self.directory = directory
        self.checkpoints = CheckpointFiles(log: log, directory: directory, fileSystem: fileSystem)
    }

    /// Opens the store in `directory` read-only: no lock, nothing changes on disk, a torn tail
    /// record counts as the end. Close its ``log`` when done.
    static func openReadOnly(directory: String, fileSystem: any FileSystem) throws(LogStoreError) -> StoreReader {
        // Log.openReadOnly says "does not exist" for a regular file; say what it is instead.
        if let kind = try? fileSystem.kind(of: directory), kind != .directory {
            throw .log(LogError(.notAStore, "\(directory) is a file, not a store directory.", file: directory))
        }
        do {
            let log = try Log.openReadOnly(directory: directory, fileSystem: fileSystem)
            return StoreReader(log: log, directory: directory, fileSystem: fileSystem)
        } catch {
            throw .log(error)
        }
    }

    /// Opens the store in `directory` read-only, runs `body`, and closes it.
    static func withReadOnlyStore<T>(
        directory: String, fileSystem: any FileSystem,
        _ body: (StoreReader) throws(LogStoreError) -> T
    ) throws(LogStoreError) -> T {
        let store = try openReadOnly(directory: directory, fileSystem: fileSystem)
        defer { try? store.log.close() }
        return try body(store)
    }

    // MARK: Folding

    /// Folds the log through the record at `offset` (inclusive; `nil`: everything), starting from
    /// the newest checkpoint at or before `end` (or from the empty state when the log is whole):
    /// after history deletion the log alone no longer holds the oldest records' effects.
    func fold(through offset: UInt64?, endingAt end: UInt64) throws(LogStoreError)
        -> (result: Replay.Result, checkpointOffset: UInt64?)
    {
        var start = Replay.Result()
        var checkpointOffset: UInt64?
        if let base = try checkpoints.newest(atOrBefore: end, notBefore: log.startOffset) {
            start = Replay.Result(checkpoint: base.header, state: base.state)
            checkpointOffset = base.header.offset
        } else if log.startOffset > 0 {
            throw .log(
                LogError(
                    .corruption,
                    "The log of \(directory) starts at offset \(log.startOffset) "
                        + "(older history was deleted) but no checkpoint at or before \(end) holds the state there.",
                    file: directory))
        }
        let result = try Replay(log: log, storeIdentifier: log.storeID.uuidString, throughOffset: offset)
            .run(from: consume start, startOffset: checkpointOffset)
        return (result, checkpointOffset)
    }

    /// The models through `offset` (inclusive; `nil`: everything) as a ``StoreState``, folded from
    /// the newest checkpoint at or before `limit`.
    func storeState(through offset: UInt64?, checkpointAtOrBefore limit: UInt64) throws(LogStoreError) -> StoreState {
        let (result, checkpointOffset) = try fold(through: offset, endingAt: limit)
        let storeIdentifier = log.storeID.uuidString
        let hasSchema = result.table.version > 0 || !result.table.entities.isEmpty
        let entities = result.table.entities.map { entity in
            StoreState.Entity(
                name: entity.name,
                attributeNames: entity.attributes.map(\.name),
                rows: result.state.rows(of: entity.name).map { primaryKey, row in
                    DefaultSnapshot(
                        persistentIdentifier: .permanent(
                            for: storeIdentifier, entityName: entity.name,
                            primaryKey: primaryKey),
                        values: row.values.dictionary)
                })
        }
        return StoreState(
            directory: directory, storeIdentifier: log.storeID,
            schemaVersion: hasSchema ? result.table.version : nil, entities: entities,
            transactionCount: result.transactionCount, lastToken: result.lastToken,
            unreadTail: log.recoveryReport.unreadTail, checkpointOffset: checkpointOffset,
            schema: hasSchema ? result.table.storedSchema : nil,
            consumers: result.bookmarks.values.map(ConsumerBookmark.init).sorted { $0.name < $1.name })
    }

    // MARK: History

    /// L as the checkpoints on disk record it (the highest), from their header records alone.
    func lowWaterMark() throws(LogStoreError) -> DefaultHistoryToken? {
        CheckpointFiles.lowWaterMark(of: try checkpoints.headers(atOrBefore: log.visibleEnd))
    }

    /// The transaction record at `position`, after every check of DECISIONS.md D6.
    func transactionRecord(at position: HistoryPosition) throws(LogStoreError) -> LogRecord {
        if case .token(let token) = position, token.storeIdentifier != log.storeID {
            throw .historyTokenOfAnotherStore(token, store: log.storeID)
        }
        let offset = position.offset
        let end = log.visibleEnd
        guard offset < end else { throw .historyPositionPastEnd(offset: offset, end: end) }
        guard offset >= log.startOffset else {
            throw .historyPositionNotATransaction(offset: offset, reason: "the log now starts at \(log.startOffset)")
        }
        let record: LogRecord?
        do { record = try log.firstRecord(atOrAfter: offset) } catch { throw .log(error) }
        guard let record, record.offset == offset else {
            throw .historyPositionNotATransaction(
                offset: offset,
                reason: record.map { "the next record starts at \($0.offset)" } ?? "no record follows it")
        }
        guard record.type == .transaction else {
            throw .historyPositionNotATransaction(offset: offset, reason: "the record there is a \(record.type) record")
        }
        if case .token(let token) = position, token.check != record.payloadCRC {
            throw .historyTokenInvalid(
                token,
                reason: "the transaction at offset \(offset) has check \(record.payloadCRC), "
                    + "the token \(token.check) (a token from a tail lost in a crash or from another copy of the store)"
            )
        }
        return record
    }

    /// A history reader over the log: L is the highest any checkpoint records; the table is the
    /// newest checkpoint's, extended by the schema records after it.
    func historyReader() throws(LogStoreError) -> HistoryReader {
        let headers = try checkpoints.headers(atOrBefore: log.visibleEnd)
        // The newest checkpoint's table, then the schema records after it (tables only grow).
        var table = headers.last?.table ?? SchemaTable()
        let scanFrom = max(headers.last?.offset ?? 0, log.startOffset)
        do throws(LogError) {
            var records = try log.records(from: scanFrom)
            // A migration completed by the next transaction counts only once that transaction follows.
            var pending: SchemaTable?
            while let record = try records.next() {
                if record.type == .transaction, let completed = pending { table = completed }
                pending = nil
                guard record.type == .schema else { continue }
                do {
                    let migration = try SchemaMigration.decode(record.payload)
                    if migration.completedByNextTransaction { pending = migration.table } else { table = migration.table }
                } catch {
                    throw LogError(
                        .corruption, "The schema record at offset \(record.offset) does not decode: \(error).",
                        offset: record.offset)
                }
            }
        } catch {
            throw .log(error)
        }
        return HistoryReader(
            log: log, table: table, lowWaterMark: CheckpointFiles.lowWaterMark(of: headers),
            logStartOffset: log.startOffset)
    }
}

// MARK: - Read-only entry points

extension LogStore {
    /// Folds the log of the store in `directory` into its models, read-only: the log is opened
    /// with `Log.openReadOnly` (no lock, nothing on disk changes, a torn tail record counts as
    /// the end), so this runs beside a live writer and needs no model types.
    ///
    /// ```swift
    /// let state = try LogStore.replay(directory: "/var/lib/trips")
    /// for entity in state.entities { print(entity.name, entity.rows.count) }
    /// ```
    ///
    /// - Parameters:
    ///   - directory: the store directory.
    ///   - fileSystem: the file system it is on (the real one by default).
    ///   - offset: stop after the record at this log offset (inclusive) — a history
    ///     token's ``DefaultHistoryToken/offset`` gives the state right after that transaction.
    ///     `nil` folds the whole log.
    /// - Throws: ``LogStoreError/log(_:)`` when the store cannot be opened or read,
    ///   ``LogStoreError/corruptRecord(offset:reason:)`` when a record does not decode.
    public static func replay(
        directory: String, fileSystem: any FileSystem = PosixFileSystem(),
        through offset: UInt64? = nil
    ) throws(LogStoreError) -> StoreState {
        try StoreReader.withReadOnlyStore(directory: directory, fileSystem: fileSystem) { store throws(LogStoreError) in
            let limit = offset.map { $0 == .max ? $0 : $0 + 1 } ?? store.log.visibleEnd
            return try store.storeState(through: offset, checkpointAtOrBefore: limit)
        }
    }

    /// Time travel: the models of the store in `directory` exactly as they were right after the
    /// transaction at `position` (inclusive), read-only (no lock, nothing changes on disk).
    ///
    /// Folds from the newest checkpoint at or before the position (a checkpoint at X holds the
    /// state after every record starting before X, DECISIONS.md D4), then the log up to and
    /// including the transaction at the position; without a usable checkpoint, from the log's start.
    /// ``StoreState/checkpointOffset`` tells which checkpoint it started from, and
    /// ``StoreState/transactionCount`` then counts the transactions folded after it.
    ///
    /// ```swift
    /// try context.save()
    /// let token = container.dataStore(as: LogStore.self)!.currentToken!
    /// // … later saves …
    /// let then = try LogStore.replay(directory: "/var/lib/trips", until: .token(token))
    /// ```
    ///
    /// - Throws: ``LogStoreError/historyTokenOfAnotherStore(_:store:)``,
    ///   ``LogStoreError/historyTokenInvalid(_:reason:)`` (check mismatch),
    ///   ``LogStoreError/historyPositionPastEnd(offset:end:)``,
    ///   ``LogStoreError/historyPositionNotATransaction(offset:reason:)``, or
    ///   ``LogStoreError/log(_:)`` when the store cannot be read.
    public static func replay(
        directory: String, fileSystem: any FileSystem = PosixFileSystem(),
        until position: HistoryPosition
    ) throws(LogStoreError) -> StoreState {
        try StoreReader.withReadOnlyStore(directory: directory, fileSystem: fileSystem) { store throws(LogStoreError) in
            // Transactions at or below the low-water mark are invisible everywhere, time travel
            // included (D6): their state is gone with their segments, or about to be.
            if let mark = try store.lowWaterMark(), position.offset <= mark.offset {
                throw .historyTokenExpired(resumeToken: mark)
            }
            let record = try store.transactionRecord(at: position)
            return try store.storeState(through: record.offset, checkpointAtOrBefore: record.endOffset)
        }
    }

    /// Reads the history of the store in `directory` without its model types and without the
    /// writer's lock (what `logstore history` prints): the log is opened read-only, L and the
    /// intern table come from the checkpoints and the schema records after the newest one.
    /// Same semantics as ``fetchHistory(_:)``.
    public static func fetchHistory(
        directory: String, fileSystem: any FileSystem = PosixFileSystem(),
        _ descriptor: HistoryDescriptor<DefaultHistoryTransaction>
    ) throws
        -> [DefaultHistoryTransaction]
    {
        let store = try StoreReader.openReadOnly(directory: directory, fileSystem: fileSystem)
        defer { try? store.log.close() }
        return try store.historyReader().fetch(descriptor).transactions
    }

    /// The low-water mark L of the store in `directory`, read like ``fetchHistory(directory:fileSystem:_:)``
    /// (read-only, no lock): `nil` while no history was deleted. Tools use it to resolve a bare
    /// offset at or below L.
    public static func historyLowWaterMark(directory: String, fileSystem: any FileSystem = PosixFileSystem()) throws
        -> DefaultHistoryToken?
    {
        try StoreReader.withReadOnlyStore(directory: directory, fileSystem: fileSystem) { store throws(LogStoreError) in
            try store.lowWaterMark()
        }
    }
}
