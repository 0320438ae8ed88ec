import Foundation
import LogStoreEngine

/// Several processes, one store (DECISIONS.md D11, as built): one process writes the store (or,
/// with `allowsOtherWriters`, several take turns: LogStore+Writers.swift), any number of others
/// open it read-only (`ModelConfiguration(url:allowsSave: false)`) beside it.
/// A read-only store takes no lock and writes nothing; before every fetch it asks the log whether
/// the writer published anything new (one `pread` when nothing is) and folds only the new records;
/// a change watcher (inotify on Linux) folds them as soon as they are published and wakes live
/// tails and ``remoteChanges(after:)``.
extension LogStore {
    /// A read-only store: folds whatever the writing process published since the last call into
    /// the published state, then wakes live tails. Does nothing in a store opened for writing (it
    /// is the only writer).
    func followOtherProcess() throws(LogStoreError) {
        if log.isSharedByWriters { return try followOtherWriters() }
        guard isReadOnly else { return }
        let moved = try inner.withLock { inner throws(LogStoreError) -> Bool in
            guard !inner.closed else { return false }
            // What to do is decided from the ends and counters, not from whether this refresh
            // moved the log: a pass that moved it and then threw (reloading L, folding) leaves
            // the log past `foldedEnd`, and the next pass folds what it missed.
            do throws(LogError) { _ = try log.refresh() } catch { throw .log(error) }
            var moved = false
            let maintenance = log.followedMaintenanceCounter
            if maintenance != inner.loadedMaintenanceCounter {
                // The writer moved L: reload it from the checkpoints (D6: at or below it, nothing
                // is visible, and older token bounds expire).
                inner.lowWaterMark = try reader.lowWaterMark()
                inner.loadedMaintenanceCounter = maintenance
                moved = true
            }
            guard log.visibleEnd > inner.foldedEnd else { return moved }
            var start = Replay.Result()
            start.table = inner.table
            start.state = inner.published
            start.lastToken = inner.publishedToken
            start.lastTimestampMicroseconds = inner.lastTimestampMicroseconds
            start.bookmarks = inner.bookmarks
            let end = log.visibleEnd
            let folded = try Replay(log: log, storeIdentifier: identifier).run(from: start, startOffset: inner.foldedEnd)
            inner.table = folded.table
            inner.published = folded.state
            inner.working = folded.state
            inner.publishedToken = folded.lastToken
            inner.lastTimestampMicroseconds = folded.lastTimestampMicroseconds
            inner.bookmarks = folded.bookmarks
            inner.foldedEnd = end
            return true
        }
        if moved { tailSignal.signal() }
    }

    /// The pause after each call of the change watcher of a store shared by writers while no
    /// history tail waits (at most 20 calls a second). Its fetches, saves' turns and history calls
    /// follow the others on their own; the watcher is there to keep up with the others' new
    /// segments (held open before another process's history deletion removes them: a writer that
    /// fell behind one must reopen), with their history deletions (deleted segments let go of) and
    /// with their last records (D12: whoever reads them takes charge of marking them durable). With
    /// the default 1 ms pause it woke for nearly every turn and sync of every process.
    static let quietWatchPauseMilliseconds = 50

    /// Starts the change watcher at the open (read-only stores and stores shared by writers). It
    /// holds the store weakly: releasing the store (or closing it) stops it.
    func startFollowing(pauseMilliseconds: Int) {
        changeWatcher.withLock { watch in
            guard watch.watcher == nil, !watch.isStopped else { return }
            watch.watcher = log.watchForChanges(pauseMilliseconds: pauseMilliseconds) { [weak self] in
                // An error (reopenRequired, corruption) is thrown to the next fetch or tail pass.
                try? self?.followOtherProcess()
            }
        }
    }

    /// A history tail waits here (``historyTail(after:)``, ``remoteChanges(after:)``): the change
    /// watcher of a store shared by writers wakes it within about a millisecond from now on.
    func followForTail() {
        guard log.isSharedByWriters else { return }
        changeWatcher.withLock { watch in watch.watcher?.pauseMilliseconds = ChangeWatcher.defaultPauseMilliseconds }
    }

    /// How this store learns of other processes' saves: inotify on the coordination file (Linux),
    /// or a look every 10 ms; `nil` for a store no other process writes.
    public var changeWatchMechanism: ChangeWatcher.Mechanism? {
        changeWatcher.withLock { $0.watcher?.mechanism }
    }

    /// The tokens of the transactions other processes save, as they become visible here — like
    /// Core Data's remote-change notification, with the history token: an app refreshes when its
    /// widget writes.
    ///
    /// ```swift
    /// for try await token in store.remoteChanges(after: lastSeen) {
    ///     let new = try context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>(
    ///         predicate: #Predicate { $0.token > lastSeen && $0.author == "widget" }))
    ///     lastSeen = token
    /// }
    /// ```
    ///
    /// Starts after `token` (after the newest visible transaction when `nil`) and skips this
    /// process's own saves. A read-only store, or one opened with `allowsOtherWriters`, yields
    /// another process's saves within milliseconds of their publication (its change watcher wakes
    /// it); in a store no other process may write it yields nothing. Throws as ``historyTail(after:)`` does; ends when the task is cancelled or
    /// the store is closed.
    public func remoteChanges(after token: DefaultHistoryToken? = nil) -> RemoteChanges {
        RemoteChanges(tail: historyTail(after: token ?? currentToken))
    }
}

/// The tokens of other processes' transactions (``LogStore/remoteChanges(after:)``).
public struct RemoteChanges: AsyncSequence, Sendable {
    public typealias Element = DefaultHistoryToken

    let tail: HistoryTail

    public func makeAsyncIterator() -> Iterator {
        Iterator(tail: tail.makeAsyncIterator())
    }

    public struct Iterator: AsyncIteratorProtocol {
        var tail: HistoryTail.Iterator

        public mutating func next() async throws -> DefaultHistoryToken? {
            // Bounded by the tail: each pass takes one transaction from it.
            while let transaction = try await tail.next() {
                if transaction.processIdentifier != LogStore.processIdentifier { return transaction.token }
            }
            return nil
        }
    }
}

/// The change watcher and whether the store closed (`LogStore.changeWatcher`'s value): no watcher
/// starts after the close.
struct ChangeWatch {
    var watcher: ChangeWatcher?
    var isStopped = false
}
