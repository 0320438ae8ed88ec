import Foundation
import LogStoreEngine

/// A position in a store's history for time travel: a full token (its store and check are
/// verified) or a bare log offset (only that a transaction record starts there is verified).
public enum HistoryPosition: Sendable, Hashable, CustomStringConvertible {
    case token(HistoryToken)
    case offset(UInt64)

    public var offset: UInt64 {
        switch self {
        case let .token(token): token.offset
        case let .offset(offset): offset
        }
    }

    /// Parses the CLI form: the token's JSON (`{"v":1,"store":"<UUID>","offset":"<decimal>","check":<u32>}`)
    /// or a bare decimal offset. `nil` when it is neither.
    public init?(parsing text: String) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if let offset = UInt64(trimmed) {
            self = .offset(offset)
        } else if let token = try? JSONDecoder().decode(HistoryToken.self, from: Data(trimmed.utf8)) {
            self = .token(token)
        } else {
            return nil
        }
    }

    public var description: String {
        switch self {
        case let .token(token): "token at offset \(token.offset) (check \(token.check))"
        case let .offset(offset): "offset \(offset)"
        }
    }
}

extension LogStore {
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
    public static func replay(directory: String, fileSystem: any FileSystem = PosixFileSystem(),
                              until position: HistoryPosition) throws(LogStoreError) -> StoreState {
        let log = try openReadOnlyLog(directory: directory, fileSystem: fileSystem)
        defer { try? log.close() }
        let configuration = LogStoreConfiguration(directory: directory, fileSystem: fileSystem)
        // Transactions at or below the low-water mark are invisible everywhere, time travel
        // included (D6): their state is gone with their segments, or about to be.
        if let mark = try lowWaterMark(log: log, configuration: configuration), position.offset <= mark.offset {
            throw .historyTokenExpired(resumeToken: mark)
        }
        let record = try transactionRecord(at: position, in: log)
        return try foldReadOnly(log, configuration: configuration, through: record.offset,
                                checkpointAtOrBefore: record.endOffset)
    }

    /// The transaction record at `position`, after every check of DECISIONS.md D6.
    static func transactionRecord(at position: HistoryPosition, in log: Log) throws(LogStoreError) -> LogRecord {
        if case let .token(token) = position, token.storeIdentifier != log.storeID {
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
                offset: offset, reason: record.map { "the next record starts at \($0.offset)" } ?? "no record follows it")
        }
        guard record.type == .transaction else {
            throw .historyPositionNotATransaction(offset: offset, reason: "the record there is a \(record.type) record")
        }
        if case let .token(token) = position, token.check != record.payloadCRC {
            throw .historyTokenInvalid(token, reason: "the transaction at offset \(offset) has check \(record.payloadCRC), "
                + "the token \(token.check) (a token from a tail lost in a crash or from another copy of the store)")
        }
        return record
    }

    /// L as the checkpoints on disk record it (the highest), from their header records alone.
    static func lowWaterMark(log: Log, configuration: LogStoreConfiguration) throws(LogStoreError) -> HistoryToken? {
        lowWaterMark(of: try checkpointHeaders(log: log, configuration: configuration))
    }

    static func lowWaterMark(of headers: [CheckpointHeader]) -> HistoryToken? {
        headers.compactMap(\.lowWaterMark).max { $0.offset < $1.offset }
    }

    /// The newest checkpoint at X ≤ `endOffset` (so it holds nothing after the position), read
    /// and validated; `nil` when there is none.
    static func timeTravelBase(atOrBefore endOffset: UInt64, log: Log, configuration: LogStoreConfiguration)
        throws(LogStoreError) -> (header: CheckpointHeader, state: FoldState)? {
        let usable = try checkpointOffsets(configuration).filter { $0 <= endOffset && $0 >= log.startOffset }
        guard let newest = usable.last else { return nil }
        let (header, state) = try readCheckpoint(CheckpointFileName.name(offset: newest), offset: newest, log: log,
                                                 configuration: configuration, decodesRows: true)
        guard let state else { return nil }
        return (header, state)
    }

    /// A replay's result as a ``StoreState``.
    static func storeState(_ result: Replay.Result, directory: String, log: Log) -> StoreState {
        let storeIdentifier = log.storeID.uuidString
        let hasSchema = result.table.version > 0 || !result.table.entities.isEmpty
        let entities = result.table.entities.map { entity in
            StoreState.Entity(
                name: entity.name,
                attributeNames: entity.attributes.map(\.name),
                rows: result.state.rows(of: entity.name).map { primaryKey, row in
                    DefaultSnapshot(persistentIdentifier: .identifier(for: storeIdentifier, entityName: entity.name,
                                                                      primaryKey: primaryKey),
                                    values: row.values)
                })
        }
        return StoreState(directory: directory, storeIdentifier: log.storeID,
                          schemaVersion: hasSchema ? result.table.version : nil, entities: entities,
                          transactionCount: result.transactionCount, lastToken: result.lastToken,
                          unreadTail: log.recoveryReport.unreadTail)
    }
}
