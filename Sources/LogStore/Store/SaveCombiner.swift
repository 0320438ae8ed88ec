import Foundation
import LogStoreEngine

/// Synchronous durable saves of a store shared by writers, called at once while no other process
/// writes, written in batches by one of their callers under one turn (flat combining, issue 12's
/// "8 savers shared ÷ alone").
///
/// Eight threads saving at once each took `TURN`'s in-process mutex in turn, then the store's
/// lock — two contended hand-overs, each a futex sleep and a wake-up — and then slept again until
/// a group commit made their record durable: about five context switches a save against four in
/// a store opened alone, and 12 µs more CPU a save. Here a caller queues its request; the first
/// caller finding no batch being written writes every queued request in one turn (each its own
/// record, resolved and published as before, one after another), hands the writing on to the
/// first caller queued meanwhile, then waits until the batch's last record is durable — one group
/// commit for the batch — and hands each caller its result. A caller that did not write sleeps
/// once. Measured (ProcessBenchmarks, 8 savers, alternated): context switches a save 4.9 → 3.2,
/// turns a save 1 → 0.66.
///
/// Handing the writing on *before* waiting for durability keeps the pipeline of group commit: the
/// next batch is written while this one's `fdatasync` runs. A request that fails (a unique
/// constraint, a closed store) fails alone; a failed `fdatasync` fails every save of the batch
/// whose record it was to make durable, as it failed every waiter of the group commit before —
/// and only those (an earlier one may have covered some of the batch). (Tried for a store
/// opened alone too: 8 savers +10 %, 2 savers −8 % in one session, no change in the next — not
/// used there.)
final class SaveCombiner: @unchecked Sendable {
    // @unchecked: `queue` and `writing` under `lock`; a slot's `outcome` and `leads` are written
    // by one thread before it signals the slot's semaphore and read by the slot's caller after
    // its wait (the semaphore orders them).

    /// One caller's save.
    final class Slot: @unchecked Sendable {
        let request: DataStoreSaveChangesRequest<DefaultSnapshot>
        /// What the write found: the record's position (`nil`: nothing to write) and the result,
        /// or why not.
        var written: Result<(LogPosition?, DataStoreSaveChangesResult<DefaultSnapshot>), any Error>?
        /// The save's outcome, set before `done` is signalled — unless the caller is to write
        /// the next batch (`leads`).
        var outcome: Result<DataStoreSaveChangesResult<DefaultSnapshot>, any Error>?
        var leads = false
        /// Where a caller that does not write sleeps (made only for one: a lone saver never waits).
        var done: DispatchSemaphore?

        init(_ request: DataStoreSaveChangesRequest<DefaultSnapshot>) {
            self.request = request
        }
    }

    private let lock = NSLock()
    private var queue: [Slot] = []
    /// A caller is writing a batch (or was just told to write the next one).
    private var writing = false
    /// Batches written and saves in them, under `lock` (``counts``).
    private var batchCount = 0
    private var combinedSaveCount = 0

    /// Saves queued and not yet taken into a batch (tests).
    var queuedCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return queue.count
    }

    /// Batches written so far and the saves in them (tests).
    var counts: (batches: Int, saves: Int) {
        lock.lock()
        defer { lock.unlock() }
        return (batchCount, combinedSaveCount)
    }

    /// Saves `request`: queued, and written by this caller (with every request queued before it
    /// that is not in a batch yet) or by another; returns once the record is durable and
    /// published. `writeBatch` writes each slot's request, setting `written` (a written record's
    /// result holds its token already); `finish` waits for durability of the batch's records and
    /// publishes them, returning `nil` when all are durable, else the error and the durable end
    /// after it: a save whose record ends at or before that end is durable and published all the
    /// same (an earlier `fdatasync` covered it) and succeeds; the others throw the error (review
    /// of 196f290: every written save of the batch threw, and a caller that retried would insert
    /// its models twice). A save with nothing to write, or whose write failed, returns once the
    /// batch is done (it waits for the batch's durability with the others).
    func save(
        _ request: DataStoreSaveChangesRequest<DefaultSnapshot>,
        writeBatch: ([Slot]) -> Void,
        finish: (_ last: LogPosition) -> (error: any Error, durableEnd: UInt64)?
    ) throws -> DataStoreSaveChangesResult<DefaultSnapshot> {
        let slot = Slot(request)
        lock.lock()
        let leads = !writing
        if !leads { slot.done = DispatchSemaphore(value: 0) }
        queue.append(slot)
        writing = true
        lock.unlock()
        if !leads {
            slot.done!.wait()
            if !slot.leads { return try slot.outcome!.get() }
        }
        // This caller writes: every request queued now (its own among them).
        lock.lock()
        let batch = queue
        queue.removeAll()
        batchCount += 1
        combinedSaveCount += batch.count
        lock.unlock()
        precondition(batch.contains { $0 === slot }, "a writer's batch holds its own save")
        writeBatch(batch)
        // The next batch is written while this one becomes durable.
        lock.lock()
        let next = queue.first
        if next == nil { writing = false }
        lock.unlock()
        if let next {
            next.leads = true
            next.done!.signal()
        }
        var last: LogPosition?
        for member in batch {
            guard case .success((let position?, _)) = member.written else { continue }
            if last.map({ position.endOffset > $0.endOffset }) ?? true { last = position }
        }
        let failure = last.flatMap(finish)
        for member in batch {
            let outcome: Result<DataStoreSaveChangesResult<DefaultSnapshot>, any Error>
            switch member.written! {
            case .failure(let error):
                outcome = .failure(error)
            case .success((nil, let result)):
                outcome = .success(result)
            case .success((let position?, let result)):
                if let failure, position.endOffset > failure.durableEnd {
                    outcome = .failure(failure.error)
                } else {
                    outcome = .success(result)
                }
            }
            member.outcome = outcome
            if member !== slot { member.done!.signal() }
        }
        return try slot.outcome!.get()
    }
}
