import Foundation

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
final class SharedFileLock: @unchecked Sendable {
    // @unchecked: `handle` is a constant; `mutex` is an NSLock, locked and unlocked on one thread;
    // `closed` is read and written under `handleLock` only.
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

    private init(name: String, directory: String, handle: any FileHandle, wake: WakeChannel?, wakeSleepNanosecondsMax: UInt64) {
        self.name = name
        self.directory = directory
        self.handle = handle
        self.wake = wake
        self.wakeSleepNanosecondsMax = wakeSleepNanosecondsMax
    }

    /// Opens (creating it in place when missing) the lock file `name` of `directory`; `wake`, when
    /// given, is this lock's channel in the `WAKE` mapping.
    static func open(
        _ name: String, directory: String, fileSystem: any FileSystem, wake: WakeChannel? = nil,
        wakeSleepNanosecondsMax: UInt64 = WakeChannel.sleepNanosecondsMax
    ) throws(LogError) -> SharedFileLock {
        let path = LogFileNames.join(directory, name)
        do {
            return SharedFileLock(
                name: name, directory: directory, handle: try fileSystem.openFile(path, mode: .createOrOpen), wake: wake,
                wakeSleepNanosecondsMax: wakeSleepNanosecondsMax)
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
            if granted { return nil }
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

    /// Takes the lock only when both the mutex and the `flock` are free now.
    func tryAcquire() -> Bool {
        guard mutex.try() else { return false }
        if (try? tryLockUnlessClosed()) == true { return true }
        mutex.unlock()
        return false
    }

    /// One non-blocking `flock` — never on a closed handle, whose descriptor number may be
    /// another file's by now (a save queued across the store's close, say).
    private func tryLockUnlessClosed() throws(LogError) -> Bool {
        handleLock.lock()
        defer { handleLock.unlock() }
        guard !closed else { throw LogError(.closed, "The store is closed.", file: handle.path) }
        do { return try handle.tryLockExclusive() } catch { throw LogError.io(error, "Locking \(handle.path)") }
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
            handle.close()
        }
        // A thread of this process asleep for the lock looks again now, and finds it closed.
        wake?.wakeSleepers()
    }
}
