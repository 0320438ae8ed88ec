import Foundation
import LogStoreEngine
import Synchronization

/// New transactions as they are saved: an `AsyncSequence` that starts after a token and then
/// waits for more (DECISIONS.md D10).
///
/// ```swift
/// for try await transaction in store.historyTail(after: savedToken) {
///     ship(transaction.changes)
///     savedToken = transaction.token
/// }
/// ```
///
/// It buffers nothing: the iterator holds a log offset and reads forward from the log when a
/// save wakes it, yielding only transactions up to the visible end (durable ones, in
/// synchronous mode). It throws ``LogStoreError/historyTokenExpired(resumeToken:)`` if history
/// deletion passes its position, ends when its task is cancelled or the store is closed. A
/// read-only store (`allowsSave: false`), or one shared by writers (`allowsOtherWriters`), also
/// yields the saves of the other processes writing the store, woken by its change watcher
/// (inotify; ``LogStore/remoteChanges(after:)``).
public struct HistoryTail: AsyncSequence, Sendable {
    /// The transactions, oldest first.
    public typealias Element = DefaultHistoryTransaction

    let store: LogStore
    let token: DefaultHistoryToken?

    /// An iterator that starts after the tail's token.
    public func makeAsyncIterator() -> Iterator {
        Iterator(store: store, token: token)
    }

    /// Reads the tail's transactions one at a time, waiting for new saves at the end.
    public struct Iterator: AsyncIteratorProtocol {
        let store: LogStore
        let token: DefaultHistoryToken?
        /// The next transaction starts at or after this offset; `nil` until the first call.
        var position: UInt64?
        /// The author and process identifier strings decoded last (reused while they repeat).
        var strings = TransactionRecord.RepeatedStrings()

        init(store: LogStore, token: DefaultHistoryToken?) {
            self.store = store
            self.token = token
        }

        /// The next transaction, once it is visible; `nil` when the task is cancelled or the store
        /// closes. Throws ``LogStoreError/historyTokenExpired(resumeToken:)`` when history deletion
        /// passed the iterator's position.
        public mutating func next() async throws -> DefaultHistoryTransaction? {
            // Bounded per wake-up: each pass yields, throws, ends, or waits for the next save.
            while true {
                if Task.isCancelled { return nil }
                let generation = store.tailSignal.generation
                guard let generation else { return nil }  // the store was closed
                if position == nil { store.followForTail() }
                try store.followOtherProcess()
                let reader = store.historyReader()
                if position == nil {
                    var query = HistoryQuery()
                    if let token {
                        query.tokenLiterals = [token]
                        query.tokenLowerBound = .init(value: token, inclusive: false)
                    }
                    try reader.validate(query)
                    position = reader.startOffset(for: query)
                }
                if let mark = reader.lowWaterMark, position! <= mark.offset {
                    throw LogStoreError.historyTokenExpired(resumeToken: mark)
                }
                // Records before the reader's log start are at or below its L, which the check
                // above passed; a compaction since then makes the iterator refuse the offset,
                // and the next pass sees its L.
                var records: LogIterator
                do throws(LogError) {
                    records = try store.log.records(from: Swift.max(position!, reader.logStartOffset))
                } catch  where error.code == .offsetOutOfRange {
                    continue
                } catch {
                    throw LogStoreError.log(error)
                }
                while let record = try records.next() {
                    position = record.endOffset
                    if record.type == RecordType.transaction { return try reader.decode(record, strings: &strings) }
                }
                await store.tailSignal.wait(after: generation)
            }
        }
    }
}

extension LogStore {
    /// The transactions after `token` (all retained history when `nil`), then each new one as
    /// it is saved, until the task is cancelled or the store closes.
    public func historyTail(after token: DefaultHistoryToken? = nil) -> HistoryTail {
        HistoryTail(store: self, token: token)
    }
}
