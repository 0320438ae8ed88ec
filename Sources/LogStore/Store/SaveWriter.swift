import Foundation
import LogStoreEngine

/// A store shared by writing processes: one thread writes this process's saves, in the order
/// their `save` calls were made (DECISIONS.md D11) — except a synchronous save that finds nothing
/// queued or being written by the thread while no other process writes, which writes on its own
/// thread (``runInlineIfIdle(_:)``) — a synchronous durable one with the others called at once,
/// in batches one of their callers writes under one turn (``enterInlineIfIdle()``,
/// ``SaveCombiner``).
///
/// A save there waits for the turn — another process's `flock`, up to 30 s — so an asynchronous
/// save must not write on its calling thread (the cooperative pool has 2 threads here and Linux
/// libdispatch does not add threads for blocked ones, D2). Writing on a thread of its own per save
/// lost the call order: two saves of one context (an `await save()`, then an autosave) could take
/// the turn's mutex in either order, and per-attribute last-writer-wins then kept the older value
/// (found by review). Every asynchronous save of the store is therefore queued, at call time,
/// before its caller suspends, and this thread runs them one by one; so is every synchronous save
/// that does not run inline. Only the write (resolve, encode, `pwrite`) runs here; callers wait for
/// durability themselves, so group commit is unchanged.
///
/// The saves queued when the thread looks are written as one batch under one turn (`beginTurn`
/// once, its catch-up once, `endTurn` once): the turn is to writes what group commit is to
/// `fdatasync`. A job is told whether the turn is held for it, or why not.
final class SaveWriter: @unchecked Sendable {
    // @unchecked: `jobs`, `thread`, `stopped`, `running`, `inlineRunning` and `inlineCount` are touched
    // only with `condition` locked.
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
    /// Callers' saves being written on their callers' threads (``runInlineIfIdle(_:)``): the
    /// thread starts no batch until they are done (once stopped, it fails the queued saves with
    /// `closed` meanwhile, taking no turn).
    private var inlineRunning = 0
    /// Saves ``runInlineIfIdle(_:)`` ran (tests).
    private var inlineCount = 0
    /// Jobs in the batch being written (0: none).
    private var running = 0

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

    /// Runs `body` on the calling thread when no save is queued or being written by the thread
    /// — the caller's save then follows every save called before it that is not itself running
    /// inline (those are concurrent calls: any order is theirs), and saves queued meanwhile wait
    /// for every inline one (the thread starts no batch while one runs). Returns `nil`, without
    /// running `body`, otherwise or once stopped. `body` takes the turn itself: a save skips the
    /// hand-over to this thread and back (about a fifth of a lone writer's save, issue 12); while
    /// nobody else writes, `TURN` is kept between this process's turns (SharedFileLock, parked),
    /// so concurrent inline saves take turns on its mutex for little more than the store's lock
    /// costs a store opened alone. No starvation: once a save is queued, later ones queue too,
    /// and the inline ones drain.
    func runInlineIfIdle<T>(_ body: () throws -> T) rethrows -> T? {
        guard enterInlineIfIdle() else { return nil }
        defer { exitInline() }
        return try body()
    }

    /// ``runInlineIfIdle(_:)`` in two steps, for a save written by another caller of this
    /// process (``SaveCombiner``): `true` counts one save as running inline until
    /// ``exitInline()`` (once its record is written); `false`: queue it.
    func enterInlineIfIdle() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !stopped, jobs.isEmpty, running == 0 else { return false }
        inlineRunning += 1
        inlineCount += 1
        return true
    }

    /// One save counted by ``enterInlineIfIdle()`` is written (or failed).
    func exitInline(count: Int = 1) {
        condition.lock()
        precondition(inlineRunning >= count, "an inline save exits once")
        inlineRunning -= count
        if inlineRunning == 0 { condition.signal() }
        condition.unlock()
    }

    /// How many saves ran on their callers' threads (tests).
    var inlineSaves: Int {
        condition.lock()
        defer { condition.unlock() }
        return inlineCount
    }

    /// Jobs queued and not yet started, and jobs in the batch being written (tests).
    var backlog: (queued: Int, running: Int) {
        condition.lock()
        defer { condition.unlock() }
        return (jobs.count, running)
    }

    /// Takes the turn for a batch written on the calling thread (this one's, or a caller's:
    /// ``SaveCombiner``), or tells why not; ``endBatchTurn(_:)`` after the batch. A store closed
    /// meanwhile: its saves throw `closed` without waiting for a turn.
    func beginBatchTurn() -> Turn {
        isStopped ? .closed : beginTurn().map { .failed($0) } ?? .held
    }

    /// Ends a turn ``beginBatchTurn()`` took.
    func endBatchTurn(_ turn: Turn) {
        if case .held = turn { endTurn() }
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
            while (jobs.isEmpty || inlineRunning > 0) && !stopped { condition.wait() }
            guard !jobs.isEmpty else { break }
            do {
                // Scoped: the batch (whose jobs hold the store) is released before `condition` is
                // locked again — the last reference to the store may go with it, and the store's
                // deinit stops this writer, which locks `condition` (not recursive): found by review.
                let batch = jobs
                jobs.removeAll()
                running = batch.count
                condition.unlock()
                let turn = beginBatchTurn()
                for job in batch { job(turn) }
                endBatchTurn(turn)
            }
            condition.lock()
            running = 0
        }
        condition.unlock()
    }
}
