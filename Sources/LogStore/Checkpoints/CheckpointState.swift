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
    /// Callers of ``beginOnDemand()`` waiting for the role: an automatic checkpoint hands it to
    /// them rather than chaining the next one (which could shut them out while saves go on).
    private var onDemandWaiting = 0
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
        onDemandWaiting += 1
        while isWriting && !isClosing { condition.wait() }
        onDemandWaiting -= 1
        guard !isClosing else { throw .log(LogError(.closed, "The store is closed.")) }
        isWriting = true
    }

    /// Claims the writer's role for an automatic checkpoint when one is due and none is running.
    func beginAutomatic(endOffset: UInt64, interval: UInt64) -> Bool {
        locked {
            guard !isWriting else { return false }
            return claimIfDue(endOffset: endOffset, interval: interval)
        }
    }

    /// Ends an automatic checkpoint and, when it succeeded and the saves made while it was
    /// written made another one due, keeps the writer's role for that one (returns `true`): a due
    /// checkpoint is never left for a next save that may not come. One step under the lock, so
    /// ``waitUntilIdle()`` does not return in between.
    func endAutomatic(wrote offset: UInt64?, error: (any Error)?, endOffset: UInt64, interval: UInt64)
        -> Bool
    {
        let next: Bool = locked {
            record(wrote: offset, error: error)
            isWriting = false
            guard offset != nil, onDemandWaiting == 0, claimIfDue(endOffset: endOffset, interval: interval) else {
                return false
            }
            return true
        }
        if !next { condition.broadcast() }
        return next
    }

    /// Claims the role (lock held) when an interval of log was written since the last attempt.
    private func claimIfDue(endOffset: UInt64, interval: UInt64) -> Bool {
        guard !isClosing, endOffset >= lastAttemptOffset, endOffset - lastAttemptOffset >= interval else {
            return false
        }
        isWriting = true
        lastAttemptOffset = endOffset
        return true
    }

    private func record(wrote offset: UInt64?, error: (any Error)?) {
        if let offset {
            newestOffset = max(newestOffset ?? offset, offset)
            writtenCount += 1
        }
        if let error { lastError = error }
    }

    /// A checkpoint another process of a store shared by writers wrote: the newest one, and the
    /// next automatic one waits for another interval of log after it.
    func adopt(_ offset: UInt64) {
        locked {
            newestOffset = max(newestOffset ?? offset, offset)
            lastAttemptOffset = max(lastAttemptOffset, offset)
        }
    }

    /// A checkpoint written (or failed) by a holder of the role that keeps it for more work.
    func note(wrote offset: UInt64?, error: (any Error)?) {
        locked { record(wrote: offset, error: error) }
    }

    func end(wrote offset: UInt64?, error: (any Error)?) {
        locked {
            isWriting = false
            record(wrote: offset, error: error)
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
