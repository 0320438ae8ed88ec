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
            var decoder = TransactionRecord.Decoder(table: inner.table, storeIdentifier: identifier)
            // Bounded by the written end: the iterator stops there.
            while let record = try records.next() {
                switch record.type {
                case .transaction:
                    let transaction: TransactionRecord
                    do { transaction = try decoder.decode(record.payload) } catch {
                        throw LogStoreError.corruptRecord(offset: record.offset, reason: "transaction record: \(error)")
                    }
                    for change in transaction.changes {
                        let old = inner.working.row(change.identifier)?.values
                        inner.working.apply(change)
                        inner.uniqueIndex.replace(
                            change.identifier, old: old, new: inner.working.row(change.identifier)?.values)
                    }
                    inner.pending.append((LogPosition(of: record), transaction.changes))
                    inner.lastTimestampMicroseconds = max(
                        inner.lastTimestampMicroseconds, transaction.timestampMicroseconds)
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
        let moved = try inner.withLock { inner throws(LogStoreError) -> Bool in
            guard !inner.closed else { return false }
            do throws(LogError) { _ = try log.refreshFromOtherWriters() } catch { throw .log(error) }
            try foldOtherWritersLocked(&inner)
            let before = inner.publishedToken
            publishLocked(&inner)
            return inner.publishedToken != before
        }
        if moved { tailSignal.signal() }
    }

    /// The operations not built yet for a store shared by writing processes throw this.
    func refuseIfSharedByWriters(_ what: String) throws(LogStoreError) {
        guard log.isSharedByWriters else { return }
        throw .unsupportedFeature(
            "\(what) is not available yet in a store shared by several writing processes (allowsOtherWriters): "
                + "open it without allowsOtherWriters, alone, to do it.")
    }
}
