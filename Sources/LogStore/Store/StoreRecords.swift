import Foundation
import LogStoreEngine

/// One record of a store's log as it is on disk, with its payload decoded when the record is of
/// a type the model layer writes (what `logstore dump` prints, for debugging the format).
public struct StoreRecord: Sendable {
    /// The record as the log read it: offset, type, payload (decompressed), CRC, size.
    public var record: LogRecord
    /// A transaction record's transaction, its changes decoded.
    public var transaction: DefaultHistoryTransaction?
    /// A schema record's table version.
    public var schemaVersion: UInt32?
    /// The schema a schema record stores: its entities, attributes and relationships.
    public var schema: Schema?
    /// A bookmark record's consumer, with the token it names.
    public var bookmark: ConsumerBookmark?
    /// What a bookmark record does to its consumer: `"set"` (registered or acknowledged) or
    /// `"remove"` (unregistered).
    public var bookmarkOperation: String?
    /// Why the payload did not decode, when it did not (its CRC matched: a writer bug or a
    /// record type this version does not decode).
    public var decodingFailure: String?
}

extension LogStore {
    /// Reads the records of the store in `directory` from `offset` (the log's start when `nil`),
    /// read-only (no lock, nothing changes on disk), decoding transactions with the newest
    /// schema table (tables only grow), until `body` returns `false` or the visible end.
    /// Durable-end marks are included.
    ///
    /// - Returns: the bytes after the last readable record when the read stopped before the
    ///   files' end (see `RecoveryReport.unreadTail`), else `nil`.
    /// - Throws: ``LogStoreError/log(_:)`` when the store cannot be opened or a record fails its
    ///   checks (`LogError.Code.corruption`).
    @discardableResult
    public static func readRecords(
        directory: String, fileSystem: any FileSystem = PosixFileSystem(), from offset: UInt64? = nil,
        _ body: (StoreRecord) throws -> Bool
    ) throws -> RecoveryReport.DroppedRecord? {
        let store = try StoreReader.openReadOnly(directory: directory, fileSystem: fileSystem)
        defer { try? store.log.close() }
        let reader = try store.historyReader()
        let storeID = store.log.storeID
        var records: LogIterator
        do throws(LogError) {
            records = try store.log.records(from: max(offset ?? store.log.startOffset, store.log.startOffset), includingMarks: true)
        } catch {
            throw LogStoreError.log(error)
        }
        var strings = TransactionRecord.RepeatedStrings()
        while let record = try records.next() {
            var decoded = StoreRecord(record: record)
            do {
                switch record.type {
                case .transaction:
                    let header = try reader.decode(record, strings: &strings)
                    let resolved = try reader.decoder.decode(record.payload).changes
                    let changes = resolved.enumerated().map { index, change in
                        HistoryChange(change, transactionIdentifier: Int64(record.offset), index: index)
                    }
                    decoded.transaction = DefaultHistoryTransaction(
                        token: header.token, author: header.author, timestamp: header.timestamp,
                        storeIdentifier: header.storeIdentifier, processIdentifier: header.processIdentifier,
                        changes: changes)
                case .schema:
                    let table = try SchemaTable.decode(record.payload)
                    decoded.schemaVersion = table.version
                    decoded.schema = table.storedSchema
                case .bookmark:
                    let bookmark = try BookmarkRecord.decode(record.payload, storeID: storeID)
                    decoded.bookmark = ConsumerBookmark(bookmark.bookmark)
                    decoded.bookmarkOperation = bookmark.operation == .set ? "set" : "remove"
                default:
                    break
                }
            } catch {
                decoded.decodingFailure = "\(error)"
            }
            guard try body(decoded) else { return nil }
        }
        return store.log.recoveryReport.unreadTail
    }
}
