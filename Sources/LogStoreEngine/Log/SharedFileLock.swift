import Foundation
import Synchronization

/// One of the locks several writing processes take turns with (DECISIONS.md D11 stage 2):
/// `MAINTENANCE` (one checkpoint at a time), `TURN` (catch up and write one batch) or `SYNC` (one
/// `fdatasync` at a time across processes).
///
/// A `flock` belongs to the open file description, so two threads of one process would both
/// "hold" it: the in-process mutex comes first, then the `flock`. The `flock` is taken with
/// `LOCK_NB` and retried with a growing pause (20 µs doubling to 100 µs) for at most 30 s — never a
/// blocking `flock`, so no thread waits on another process without a bound — and the caller
/// holds neither the store's state lock nor the log's condition lock while it waits.
///
/// With a ``WakeChannel`` (the `WAKE` file mapped, FORMAT.md §10.2) a refused waiter sleeps on a
/// futex until any process releases the lock — at most 2 ms, then it tries again — instead of the
/// timed retries, and ``release()`` wakes it: the hand-over between processes then costs a wake-up,
/// not up to a retry pause.
///
/// **Kept between holders** (``release(keeping:)``, `TURN` and `SYNC`): a process that lets go of
/// the lock while no process sleeps for it keeps the `flock` — the lock is *parked* — and the next
/// thread of this process to take it takes only the mutex: no `flock` pair, and (``keptSinceRelease``)
/// no catch-up for `TURN`, since nobody else could write meanwhile. A parked lock is released for
/// real at the next release that finds a sleeper, or by the ``ParkedLockReleaser``'s thread once
/// it has been idle ``parkedIdleNanosecondsMax`` (a waiting process's sleep counts it among the
/// sleepers, but the parking process may have nothing more to do), and in any case once the
/// process has held the `flock` for ``keptNanosecondsMax`` (a waiter without `WAKE` retries on a
/// timer and is never counted: it waits at most that long more). Issue 12: a lone writer of a
/// shared store paid two `flock` pairs and a catch-up per save, a tenth of its save.
final class SharedFileLock: @unchecked Sendable {
    // @unchecked: `handle` is a constant; `mutex` is an NSLock, locked and unlocked on one thread;
    // `closed` is read and written under `handleLock` only; `parked`, `parkedAt`, `flockedAt` and
    // `kept` under `mutex` only.
    /// How long a process waits for `TURN`, `SYNC` or a shared `LOCK` before it gives up.
    static let waitNanosecondsMax: UInt64 = 30_000_000_000

    let name: String
    let directory: String
    private let handle: any FileHandle
    private let mutex = NSLock()
    /// Whether the handle is closed; guarded by `handleLock`, which `release` holds across its
    /// `LOCK_UN` so a concurrent `close` cannot slip between the check and the unlock (whose
    /// descriptor number may be another file's by then, review12 B7).
    private var closed = false
    private let handleLock = NSLock()
    /// Where waiters sleep and releases wake them; `nil`: timed retries.
    let wake: WakeChannel?
    /// The longest futex sleep between two tries (``WakeChannel/sleepNanosecondsMax``; tests
    /// lengthen it to show that a release wakes the waiter).
    let wakeSleepNanosecondsMax: UInt64
    /// Told when the lock is parked (it releases a parked lock left idle); `nil`: never parks.
    private let releaser: ParkedLockReleaser?
    /// The `flock` is held with no thread holding the mutex: the next holder takes it as it is.
    private var parked = false
    /// When the lock was last parked, and when this process took the `flock` it still holds.
    private var parkedAt: UInt64 = 0
    private var flockedAt: UInt64 = 0
    /// Whether the holder took the lock parked (no other process held it since this process's
    /// last holder). Read by the holder only.
    private var kept = false
    /// After a release forced by ``keptNanosecondsMax``, this process tries the `flock` again only
    /// from then on: a waiter that retries on a timer (no `WAKE`, so never counted) then finds
    /// the lock free for one of its tries, instead of a gap of a few microseconds before this
    /// process's next holder takes it again (review of b7bde05, finding 1).
    private var holdOffUntil: UInt64 = 0
    /// Run with the mutex held just before a *parked* `flock` is let go — by the releaser's thread
    /// or at close (``releaseIfParked()``), never at a holder's own release: `TURN`'s owner writes
    /// the turn slot its parked turns left unwritten (`LogCore.publishTurnSlotBeforeParkedRelease`).
    /// Its argument says whether it may wait for its owner's lock (else it only tries it); it
    /// returns `false` when it did not run (the lock then stays parked). Its own leaf lock: it is
    /// set while the lock may be held.
    private let beforeParkedRelease = Mutex<(@Sendable (_ mayWait: Bool) -> Bool)?>(nil)

    /// How long a parked lock may stay idle before the releaser lets it go.
    static let parkedIdleNanosecondsMax: UInt64 = 1_000_000
    /// How long a process holds the `flock` across parks before a release lets it go for real.
    static let keptNanosecondsMax: UInt64 = 10_000_000
    /// How long after such a release this process leaves the lock to others: twice the longest
    /// pause between a timed waiter's tries.
    static let holdOffNanoseconds: UInt64 = 200_000

    private init(
        name: String, directory: String, handle: any FileHandle, wake: WakeChannel?, wakeSleepNanosecondsMax: UInt64,
        releaser: ParkedLockReleaser?
    ) {
        self.name = name
        self.directory = directory
        self.handle = handle
        self.wake = wake
        self.wakeSleepNanosecondsMax = wakeSleepNanosecondsMax
        // Parking needs the sleepers' count: without `WAKE` a waiter is invisible.
        self.releaser = wake == nil ? nil : releaser
    }

    /// Opens (creating it in place when missing) the lock file `name` of `directory`; `wake`, when
    /// given, is this lock's channel in the `WAKE` mapping.
    /// `releaser`: the lock may be parked (``release(keeping:)``); it needs `wake` too.
    static func open(
        _ name: String, directory: String, fileSystem: any FileSystem, wake: WakeChannel? = nil,
        wakeSleepNanosecondsMax: UInt64 = WakeChannel.sleepNanosecondsMax, releaser: ParkedLockReleaser? = nil
    ) throws(LogError) -> SharedFileLock {
        let path = LogFileNames.join(directory, name)
        do {
            return SharedFileLock(
                name: name, directory: directory, handle: try fileSystem.openFile(path, mode: .createOrOpen), wake: wake,
                wakeSleepNanosecondsMax: wakeSleepNanosecondsMax, releaser: releaser)
        } catch {
            throw LogError.io(error, "Opening the lock file \(path)")
        }
    }

    /// Takes the lock: this process's mutex, then the `flock`, within 30 s; `what` names the
    /// situation in the error.
    func acquire(for what: String, waitNanosecondsMax: UInt64 = SharedFileLock.waitNanosecondsMax) throws(LogError) {
        let found: Never? = try acquire(for: what, waitNanosecondsMax: waitNanosecondsMax, unless: { nil })
        precondition(found == nil)
    }

    /// Takes the lock as ``acquire(for:waitNanosecondsMax:)`` does — unless `unless`, asked after
    /// each `flock` another process refused, finds what the caller needed the lock for already
    /// there: then returns that, holding neither the `flock` nor the mutex. (A process waiting for
    /// `SYNC` learns that another's `fdatasync` covered its records while that process may take
    /// `SYNC` again for its next one.) Returns `nil` once the lock is held.
    func acquire<Found>(
        for what: String, waitNanosecondsMax: UInt64 = SharedFileLock.waitNanosecondsMax, unless: () -> Found?
    ) throws(LogError) -> Found? {
        mutex.lock()
        if takeParked() { return nil }
        let now = monotonicNanoseconds()
        if now < holdOffUntil { usleep(UInt32((holdOffUntil - now) / 1000)) }
        var pause: UInt64 = 20_000
        var deadline: UInt64?
        // Bounded: every failed pass sleeps, and the deadline ends it.
        while true {
            // Read before the try, so that a release between the try and the sleep ends the sleep.
            let releases = wake?.releases()
            let granted: Bool
            do { granted = try tryLockUnlessClosed() } catch {
                mutex.unlock()
                throw error
            }
            if granted {
                kept = false
                flockedAt = monotonicNanoseconds()
                return nil
            }
            if let found = unless() {
                mutex.unlock()
                return found
            }
            let now = monotonicNanoseconds()
            if deadline == nil { deadline = now + waitNanosecondsMax }
            guard now < deadline! else {
                mutex.unlock()
                throw LogError(
                    .locked,
                    "Another process has held \(name) of the store at \(directory) for more than "
                        + "\(waitNanosecondsMax / 1_000_000_000) s while this "
                        + "one waited to \(what); it may be stuck (a process stopped in a debugger, say).",
                    file: handle.path)
            }
            if let wake, let releases,
                wake.sleep(unlessReleasedSince: releases, nanoseconds: min(wakeSleepNanosecondsMax, deadline! - now))
            {
                continue
            }
            usleep(UInt32(pause / 1000))
            // At most 100 µs: a longer pause misses the release by up to that much, and a turn
            // or a sync is often shorter than 1 ms (the benchmarks helper measured 290 µs of
            // sleep per save with a 1 ms cap, 2 processes × 4 savers); a failed try is one system call.
            pause = min(pause * 2, 100_000)
        }
    }

    /// Takes the lock only when both the mutex and the `flock` are free now (or the lock is
    /// parked here).
    func tryAcquire() -> Bool {
        guard mutex.try() else { return false }
        if takeParked() { return true }
        if monotonicNanoseconds() >= holdOffUntil, (try? tryLockUnlessClosed()) == true {
            kept = false
            flockedAt = monotonicNanoseconds()
            return true
        }
        mutex.unlock()
        return false
    }

    /// With the mutex held: takes the lock as parked, when it is and its handle is still open
    /// (a closed handle dropped the `flock`: the caller's try then finds it closed).
    private func takeParked() -> Bool {
        guard parked else { return false }
        parked = false
        guard !handleLock.withLock({ closed }) else { return false }
        kept = true
        return true
    }

    /// Whether the holder took the lock parked: this process held the `flock` since its last
    /// holder let go, so no other process held the lock in between. Only for the holder.
    var keptSinceRelease: Bool { kept }

    /// One non-blocking `flock` — never on a closed handle, whose descriptor number may be
    /// another file's by now (a save queued across the store's close, say).
    private func tryLockUnlessClosed() throws(LogError) -> Bool {
        handleLock.lock()
        defer { handleLock.unlock() }
        guard !closed else { throw LogError(.closed, "The store is closed.", file: handle.path) }
        do { return try handle.tryLockExclusive() } catch { throw LogError.io(error, "Locking \(handle.path)") }
    }

    /// Lets go of the lock (on the thread that acquired it). `keeping`: parks it — keeps the
    /// `flock` — when no process sleeps for it, the handle is open and this process has not held
    /// the `flock` for ``keptNanosecondsMax`` yet; otherwise releases it.
    func release(keeping: Bool) {
        if keeping && park() { return }
        release()
    }

    /// Lets go of the lock keeping the `flock` (on the thread that acquired it) — parks it — when
    /// no process sleeps for it, the handle is open and this process has not held the `flock` for
    /// ``keptNanosecondsMax`` yet, and returns `true`. Otherwise returns `false` still holding
    /// the lock: the caller then calls ``release()`` (after whatever must precede a real release).
    func park() -> Bool {
        guard let releaser, let wake, wake.sleepers == 0 else { return false }
        let now = monotonicNanoseconds()
        guard now &- flockedAt < Self.keptNanosecondsMax else {
            holdOffUntil = now + Self.holdOffNanoseconds
            return false
        }
        guard !handleLock.withLock({ closed }) else { return false }
        parked = true
        parkedAt = now
        mutex.unlock()
        releaser.parked()
        return true
    }

    /// Sets (or, `nil`, clears) what runs just before a parked `flock` is let go.
    func setBeforeParkedRelease(_ hook: (@Sendable (_ mayWait: Bool) -> Bool)?) {
        beforeParkedRelease.withLock { $0 = hook }
    }

    /// Releases the lock if it is parked and no thread holds it now — at close, so that the
    /// before-parked-release hook runs while the files are open. Never waits: the closing thread
    /// may hold the mutex (a store whose open fails in its turn closes the log there), and a
    /// holder releases it itself.
    func releaseIfParked() {
        guard mutex.try() else { return }
        guard parked, beforeParkedRelease.withLock({ $0 })?(false) ?? true else { return mutex.unlock() }
        parked = false
        release()
    }

    /// Called by the ``ParkedLockReleaser``'s thread: releases the lock if it is parked and no
    /// thread of this process holds it, once it has been idle ``parkedIdleNanosecondsMax``, or a
    /// process sleeps for it, or this one has held the `flock` for ``keptNanosecondsMax``.
    /// Returns whether it is still parked (look again later).
    func releaseIfParkedTooLong() -> Bool {
        // A holder now will park or release it itself when done (and tell the releaser).
        guard mutex.try() else { return false }
        guard parked else {
            mutex.unlock()
            return false
        }
        let now = monotonicNanoseconds()
        let idle = now &- parkedAt >= Self.parkedIdleNanosecondsMax
        let waited = (wake?.sleepers ?? 0) != 0
        let long = now &- flockedAt >= Self.keptNanosecondsMax
        guard idle || waited || long else {
            mutex.unlock()
            return true
        }
        // The hook could not run without waiting (its owner's lock is busy): look again later —
        // once this process has held the `flock` for the bound, the hook waits for that lock (a
        // holder of it never waits for this lock's mutex, D11's lock order), so a waiting process
        // waits at most about the bound plus one hold of it (review of eb0cf20, finding 2).
        guard beforeParkedRelease.withLock({ $0 })?(long) ?? true else {
            mutex.unlock()
            return true
        }
        parked = false
        if long { holdOffUntil = now + Self.holdOffNanoseconds }
        release()
        return false
    }

    /// Releases the `flock`, then the mutex (on the thread that acquired it), then wakes the
    /// processes sleeping for the lock.
    func release() {
        // A failed LOCK_UN leaves the flock until the handle closes; nothing to repair here. A
        // closed handle released it already (and its descriptor number may be another file's now).
        handleLock.withLock {
            if !closed { try? handle.unlock() }
        }
        mutex.unlock()
        wake?.signalRelease()
    }

    func close() {
        handleLock.withLock {
            guard !closed else { return }
            closed = true
            // Explicitly, not only by the close: a descriptor a `fork` without `exec` duplicated
            // would keep a parked `flock` alive in the child (review of b7bde05, finding 7).
            try? handle.unlock()
            handle.close()
        }
        // A thread of this process asleep for the lock looks again now, and finds it closed. A
        // parked `flock` went with the handle: the other processes' sleepers look again too.
        wake?.wakeSleepers()
        wake?.signalRelease()
    }
}

/// The thread that releases parked locks (``SharedFileLock/release(keeping:)``) a process no
/// longer uses: one per store shared by writers, started at the first park, asleep (no timer)
/// while nothing is parked, and looking every ``SharedFileLock/parkedIdleNanosecondsMax`` while
/// something is. A look takes a lock's mutex only with `try`: it never waits for a holder, so a
/// parked lock is let go within about that time whatever this process's other threads do (no
/// cycle of waits across processes can form through a parked lock). `TURN`'s hook, which writes
/// the turn slot first, only tries the log's lock too — until the `flock` has been held for
/// ``SharedFileLock/keptNanosecondsMax``; then it waits for it (its holders never wait for
/// anything a parked lock holds up: the lock order puts `TURN`'s mutex first).
///
/// A park costs the parker two atomic operations: `condition` is taken only to start the thread
/// or to wake it from an untimed sleep (with 8 savers, taking it at every park made them queue on
/// it behind each other and the thread).
final class ParkedLockReleaser: @unchecked Sendable {
    // @unchecked: `locks`, `stopped` and `thread` under `condition` only; `pending` and `idle`
    // atomic.
    private let condition = NSCondition()
    private var locks: [SharedFileLock] = []
    private var stopped = false
    private var thread: Thread?
    /// A lock was parked since the thread last looked.
    private let pending = Atomic<Bool>(false)
    /// The thread is asleep without a timer, or not started: a park must wake or start it. A
    /// parker stores `pending` then loads `idle`; the thread stores `idle` then exchanges
    /// `pending` (all sequentially consistent): one of them sees the other's store, so no park
    /// is left unlooked-at while the thread sleeps.
    private let idle = Atomic<Bool>(true)

    init() {}

    /// The locks to look at (before any of them is parked).
    func watch(_ locks: [SharedFileLock]) {
        condition.withLock { self.locks = locks }
    }

    /// A lock was parked: looked at within about ``SharedFileLock/parkedIdleNanosecondsMax``.
    func parked() {
        pending.store(true, ordering: .sequentiallyConsistent)
        guard idle.load(ordering: .sequentiallyConsistent) else { return }
        condition.lock()
        defer { condition.unlock() }
        guard !stopped else { return }
        if thread == nil {
            let thread = Thread { [self] in run() }
            thread.name = "LogStore lock releaser"
            self.thread = thread
            idle.store(false, ordering: .sequentiallyConsistent)
            thread.start()
        } else {
            condition.signal()
        }
    }

    /// Ends the thread (the locks' handles are closed after this, which drops parked `flock`s).
    func stop() {
        condition.lock()
        stopped = true
        // The locks refer to this releaser: the cycle ends here.
        locks.removeAll()
        condition.signal()
        condition.unlock()
    }

    private func run() {
        condition.lock()
        // Bounded by `stop()`: each pass sleeps (until a park, or for the idle time).
        while !stopped {
            idle.store(true, ordering: .sequentiallyConsistent)
            guard pending.exchange(false, ordering: .sequentiallyConsistent) else {
                condition.wait()
                continue
            }
            idle.store(false, ordering: .sequentiallyConsistent)
            // Bounded: every pass waits for the idle time first, and a lock still parked is
            // looked at again only after another.
            while !stopped {
                _ = condition.wait(
                    until: Date(timeIntervalSinceNow: Double(SharedFileLock.parkedIdleNanosecondsMax) / 1e9))
                guard !stopped else { break }
                let locks = self.locks
                condition.unlock()
                var stillParked = false
                for lock in locks where lock.releaseIfParkedTooLong() { stillParked = true }
                condition.lock()
                // Parked again meanwhile (its holder told `pending`), or still parked: look again.
                if !pending.exchange(false, ordering: .sequentiallyConsistent) && !stillParked { break }
            }
        }
        condition.unlock()
    }
}
