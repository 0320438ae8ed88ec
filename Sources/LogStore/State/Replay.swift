import Foundation
import LogStoreEngine

/// Folds a log into a state: schema records set the intern table, transaction records apply
/// their changes. Never validates, resolves or mints anything (DECISIONS.md D5).
struct Replay {
    let log: Log
    let storeIdentifier: String
    /// Stop after the record at this offset (inclusive), for time travel; `nil` folds everything.
    var throughOffset: UInt64?

    init(log: Log, storeIdentifier: String, throughOffset: UInt64? = nil) {
        self.log = log
        self.storeIdentifier = storeIdentifier
        self.throughOffset = throughOffset
    }

    struct Result {
        var table = SchemaTable()
        var state = FoldState()
        var lastToken: DefaultHistoryToken?
        var lastTimestampMicroseconds: Int64 = 0
        /// Registered history consumers (bookmark records).
        var bookmarks: [String: CheckpointBookmark] = [:]
        var transactionCount = 0
        /// Records of any type this run read (opening from a checkpoint reads only those after it).
        var recordCount = 0
        /// A schema record that takes effect only with the transaction record right after it
        /// (a custom migration stage's `didMigrate`); void if anything else follows.
        var pendingMigration: SchemaMigration?

        init() {}

        /// Where a replay from a checkpoint starts: its table, state, last token and timestamp,
        /// and consumer bookmarks.
        init(checkpoint header: CheckpointHeader, state: FoldState) {
            table = header.table
            self.state = state
            lastToken = header.lastToken
            lastTimestampMicroseconds = header.lastTimestampMicroseconds
            bookmarks = Dictionary(header.bookmarks.map { ($0.name, $0) }, uniquingKeysWith: { $1 })
        }
    }

    /// Folds the records from `startOffset` (the log's start when `nil`) into `start`. A caller
    /// that hands its only reference to `start`'s state (`consume`) has it folded in place: a
    /// state also held elsewhere is copied, entity by entity, at its first change — a million
    /// rows' arrays and index, ~40 MB, which a process that had freed large blocks before kept
    /// as free heap after the open (the long soak's reopen).
    func run(from start: consuming Result = Result(), startOffset: UInt64? = nil) throws(LogStoreError) -> Result {
        var result = consume start
        do {
            var records = try log.records(from: startOffset ?? log.startOffset)
            var decoder = TransactionRecord.Decoder(table: result.table, storeIdentifier: storeIdentifier)
            // The decoder's buffer for a change's values, reused from record to record.
            var scratch: TransactionRecord.Decoder.Values = []
            // The folded rows' repeated strings, kept once.
            let strings = StringInterner()
            // Each record is read in place: its payload is folded where the iterator read it.
            var failure: LogStoreError?
            var done = false
            while !done,
                try records.next(inPlace: { record in
                    if let throughOffset, record.offset > throughOffset {
                        done = true
                        return
                    }
                    result.recordCount += 1
                    // A schema record changes the table (and its version): decode with the new one.
                    if decoder.table.version != result.table.version
                        || decoder.table.entities.count != result.table.entities.count
                    {
                        decoder = TransactionRecord.Decoder(table: result.table, storeIdentifier: storeIdentifier)
                    }
                    do throws(LogStoreError) { try apply(record, to: &result, decoder: decoder, scratch: &scratch, strings: strings)
                    } catch {
                        failure = error
                        done = true
                    }
                })
            {}
            if let failure { throw failure }
        } catch let error as LogError {
            throw .log(error)
        } catch let error as LogStoreError {
            throw error
        } catch {
            preconditionFailure("unexpected \(error)")
        }
        return result
    }

    /// A schema record takes effect: the new table, and its steps applied to the stored models.
    static func apply(_ migration: SchemaMigration, to result: inout Result) {
        result.table = migration.table
        result.state.apply(migration.steps)
    }

    /// `decoder` must have been made with `result.table`; `scratch` is its buffer for a change's
    /// values, `strings` shares the storage of repeated strings among the rows.
    func apply(
        _ record: LogRecordView, to result: inout Result, decoder: TransactionRecord.Decoder,
        scratch: inout TransactionRecord.Decoder.Values, strings: StringInterner? = nil
    ) throws(LogStoreError) {
        switch record.type {
        case .schema:
            let migration: SchemaMigration
            do { migration = try SchemaMigration.decode(Array(record.payload)) } catch {
                throw .corruptRecord(offset: record.offset, reason: "schema record: \(error)")
            }
            // A pending migration followed by anything but its transaction is void.
            result.pendingMigration = nil
            if migration.completedByNextTransaction {
                result.pendingMigration = migration
            } else {
                Self.apply(migration, to: &result)
            }
        case .transaction:
            var decoder = decoder
            if let pending = result.pendingMigration {
                // The migration and the transaction that completes it take effect together.
                result.pendingMigration = nil
                Self.apply(pending, to: &result)
                decoder = TransactionRecord.Decoder(table: result.table, storeIdentifier: storeIdentifier)
            }
            // Folded as it is decoded; a record that turns out malformed throws with part of it
            // applied, and the caller discards the result.
            let timestamp: Int64
            do {
                timestamp = try decoder.fold(record.payload, into: &result.state, scratch: &scratch, strings: strings)
            } catch {
                throw .corruptRecord(offset: record.offset, reason: "transaction record: \(error)")
            }
            result.lastToken = DefaultHistoryToken(
                storeIdentifier: log.storeID, offset: record.offset, check: record.payloadCRC)
            result.lastTimestampMicroseconds = max(result.lastTimestampMicroseconds, timestamp)
            result.transactionCount += 1
        case .bookmark:
            result.pendingMigration = nil
            do {
                try BookmarkRecord.decode(Array(record.payload), storeID: log.storeID).apply(to: &result.bookmarks)
            } catch {
                throw .corruptRecord(offset: record.offset, reason: "bookmark record: \(error)")
            }
        default:
            // Opaque data and skippable types (dictionaries…) do not change the state; like
            // every record but a transaction, they void a pending migration.
            result.pendingMigration = nil
        }
    }
}
