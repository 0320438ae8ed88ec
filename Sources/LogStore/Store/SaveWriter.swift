import Foundation
import LogStoreEngine

/// A store shared by writing processes: one thread writes this process's saves, in the order
/// their `save` calls were made (DECISIONS.md D11).
///
/// A save there waits for the turn — another process's `flock`, up to 30 s — so an asynchronous
/// save must not write on its calling thread (the cooperative pool has 2 threads here and Linux
/// libdispatch does not add threads for blocked ones, D2). Writing on a thread of its own per save
/// lost the call order: two saves of one context (an `await save()`, then an autosave) could take
/// the turn's mutex in either order, and per-attribute last-writer-wins then kept the older value
/// (found by review). Every save of the store is therefore queued, at call time, before its caller
/// blocks or suspends, and this thread runs them one by one. Only the write (resolve, encode,
/// `pwrite`) runs here; callers wait for durability themselves, so group commit is unchanged.
///
/// The saves queued when the thread looks are written as one batch under one turn (`beginTurn`
/// once, its catch-up once, `endTurn` once): the turn is to writes what group commit is to
/// `fdatasync`. A job is told whether the turn is held for it, or why not.
///
/// A synchronous save blocks its caller anyway: when nothing is queued or being written, it runs
/// its job on its own thread (``runHereIfIdle(_:)``), holding the writer's place, and saves called
/// meanwhile queue behind it — the call order is kept without two thread hand-overs per save.
final class SaveWriter: @unchecked Sendable {
    // @unchecked: `jobs`, `thread`, `stopped`, `running` and `runningHere` are touched only with
    // `condition` locked.
    /// What a job's write finds: the turn held for its batch, the batch's failure to take it
    /// (every job of the batch reports it: one wait, not one per job), or a closed store.
    enum Turn: Sendable {
        case held
        case failed(LogError)
        case closed
    }
    typealias Job = @Sendable (_ turn: Turn) -> Void
    private let condition = NSCondition()
    private var jobs: [Job] = []
    /// Takes the turn for a batch (`nil` when taken, else why not) and releases it, on this thread.
    private let beginTurn: @Sendable () -> LogError?
    private let endTurn: @Sendable () -> Void

    init(beginTurn: @escaping @Sendable () -> LogError?, endTurn: @escaping @Sendable () -> Void) {
        self.beginTurn = beginTurn
        self.endTurn = endTurn
    }
    private var thread: Thread?
    private var stopped = false
    /// Jobs in the batch being written (0: none).
    private var running = 0
    /// A caller is running its job on its own thread (``runHereIfIdle(_:)``): the writer thread
    /// leaves the queue alone until it is done.
    private var runningHere = false
    /// Jobs run on their caller's thread (tests, benchmarks' counters).
    private(set) var ranHereCount = 0

    /// Queues `job` behind every job queued before it; starts the thread at the first. After
    /// ``stop()``, the job is told on the caller that the store is closed.
    func submit(_ job: @escaping Job) {
        condition.lock()
        guard !stopped else {
            condition.unlock()
            job(.closed)
            return
        }
        jobs.append(job)
        if thread == nil {
            let thread = Thread { [self] in run() }
            thread.name = "LogStore save writer"
            self.thread = thread
            thread.start()
        }
        condition.signal()
        condition.unlock()
    }

    /// Runs `job` on the calling thread — taking the turn, writing, releasing it — when the
    /// writer is idle (nothing queued, no batch or other caller's job being written, not stopped),
    /// and returns `true`; returns `false` without running it otherwise (then ``submit(_:)`` it).
    /// For a caller that blocks until its job is done anyway: it may wait here for another
    /// process's turn (up to 30 s), so never from the cooperative pool's asynchronous code.
    func runHereIfIdle(_ job: Job) -> Bool {
        condition.lock()
        guard !stopped, jobs.isEmpty, running == 0, !runningHere else {
            condition.unlock()
            return false
        }
        runningHere = true
        ranHereCount += 1
        condition.unlock()
        let turn: Turn = beginTurn().map { .failed($0) } ?? .held
        job(turn)
        if case .held = turn { endTurn() }
        condition.lock()
        runningHere = false
        // The writer thread may be waiting for this job to finish (saves queued meanwhile).
        condition.signal()
        condition.unlock()
        return true
    }

    /// Jobs queued and not yet started, and jobs in the batch being written or running on their
    /// caller's thread (tests).
    var backlog: (queued: Int, running: Int) {
        condition.lock()
        defer { condition.unlock() }
        return (jobs.count, running + (runningHere ? 1 : 0))
    }

    private var isStopped: Bool {
        condition.lock()
        defer { condition.unlock() }
        return stopped
    }

    /// Lets the thread finish the queued jobs (they are told the store is closed) and end.
    func stop() {
        condition.lock()
        stopped = true
        condition.signal()
        condition.unlock()
    }

    private func run() {
        condition.lock()
        // Bounded by `stop()`: the loop ends once stopped with nothing queued.
        while true {
            // Queued saves wait for a job running on its caller's thread: they were called after it.
            while (jobs.isEmpty && !stopped) || runningHere { condition.wait() }
            guard !jobs.isEmpty else { break }
            do {
                // Scoped: the batch (whose jobs hold the store) is released before `condition` is
                // locked again — the last reference to the store may go with it, and the store's
                // deinit stops this writer, which locks `condition` (not recursive): found by review.
                let batch = jobs
                jobs.removeAll()
                running = batch.count
                condition.unlock()
                // A store closed meanwhile: its queued saves throw `closed` without waiting for a turn.
                let turn: Turn = isStopped ? .closed : beginTurn().map { .failed($0) } ?? .held
                for job in batch { job(turn) }
                if case .held = turn { endTurn() }
            }
            condition.lock()
            running = 0
        }
        condition.unlock()
    }
}
