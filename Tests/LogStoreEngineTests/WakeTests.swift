import Foundation
import LogStoreTestSupport
import Synchronization
import Testing

@testable import LogStoreEngine

/// `WAKE` (FORMAT.md §10.2): a process waiting for `TURN`, `SYNC` or `MAINTENANCE` sleeps on a
/// futex in a shared mapping until the holder releases, instead of retrying its `flock` on a
/// timer. Two `SharedWriters` opened on one directory stand for two processes (a `flock` belongs
/// to the open file description).
@Suite struct WakeTests {
    /// How long a waiter's futex sleep may last here without a wake-up: far longer than any
    /// hand-over the tests accept, so only the release's wake-up can end the wait in time.
    static let longSleep: UInt64 = 20_000_000_000

    /// A fresh directory, created (the lock files go straight into it).
    static func directory(_ label: String) throws -> TemporaryDirectory {
        let temporary = TemporaryDirectory(label)
        try FileManager.default.createDirectory(atPath: temporary.path, withIntermediateDirectories: false)
        return temporary
    }

    @Test func aReleaseWakesTheOtherProcessSleepingForTheLock() throws {
        let temporary = try Self.directory("wake")
        defer { temporary.remove() }
        let holder = try SharedWriters.open(directory: temporary.path, fileSystem: PosixFileSystem(), wakeSleepNanosecondsMax: Self.longSleep)
        let waiter = try SharedWriters.open(directory: temporary.path, fileSystem: PosixFileSystem(), wakeSleepNanosecondsMax: Self.longSleep)
        defer {
            holder.close()
            waiter.close()
        }
        #expect(holder.turn.wake != nil && waiter.turn.wake != nil, "WAKE was not mapped")
        for lock in [\SharedWriters.maintenance, \.turn, \.sync] {
            try holder[keyPath: lock].acquire(for: "hold it in the test")
            let acquiredAt = Mutex<UInt64?>(nil)
            let thread = Thread {
                // Bounded: the lock's 30 s wait.
                try? waiter[keyPath: lock].acquire(for: "wait in the test")
                acquiredAt.withLock { $0 = monotonicNanoseconds() }
                waiter[keyPath: lock].release()
            }
            thread.start()
            // Until the waiter sleeps on the futex (bounded: 10 s), so that only the wake-up can
            // end its sleep in time.
            let asleepBy = monotonicNanoseconds() + 10_000_000_000
            while holder[keyPath: lock].wake!.sleepers == 0 && monotonicNanoseconds() < asleepBy { usleep(1_000) }
            #expect(holder[keyPath: lock].wake!.sleepers == 1, "\(lock): the waiter never slept")
            #expect(acquiredAt.withLock { $0 } == nil, "\(lock): acquired while the other held it")
            let releasedAt = monotonicNanoseconds()
            holder[keyPath: lock].release()
            // Bounded: 10 s, against a futex sleep of 20 s without the wake-up.
            while acquiredAt.withLock({ $0 }) == nil && monotonicNanoseconds() - releasedAt < 10_000_000_000 { usleep(1_000) }
            let handOver = try #require(acquiredAt.withLock { $0 }, "\(lock): the release did not wake the waiter") - releasedAt
            // Generous for a loaded 2-core machine; the futex sleep alone would be 20 s.
            #expect(handOver < 5_000_000_000, "\(lock): hand-over took \(handOver / 1_000_000) ms")
        }
    }

    /// Closing the store wakes its own thread asleep for a lock: it throws `closed` at once
    /// rather than after its sleep.
    @Test func closingWakesThisProcesssSleeperWhichThrowsClosed() throws {
        let temporary = try Self.directory("wake-close")
        defer { temporary.remove() }
        let holder = try SharedWriters.open(directory: temporary.path, fileSystem: PosixFileSystem())
        defer { holder.close() }
        let waiter = try SharedWriters.open(directory: temporary.path, fileSystem: PosixFileSystem(), wakeSleepNanosecondsMax: Self.longSleep)
        try holder.turn.acquire(for: "hold it in the test")
        defer { holder.turn.release() }
        let outcome = Mutex<LogError?>(nil)
        let thread = Thread {
            do throws(LogError) {
                try waiter.turn.acquire(for: "wait in the test")
                waiter.turn.release()
            } catch {
                outcome.withLock { $0 = error }
            }
        }
        thread.start()
        let asleepBy = monotonicNanoseconds() + 10_000_000_000
        while waiter.turn.wake!.sleepers == 0 && monotonicNanoseconds() < asleepBy { usleep(1_000) }
        let closedAt = monotonicNanoseconds()
        waiter.close()
        while outcome.withLock({ $0 }) == nil && monotonicNanoseconds() - closedAt < 10_000_000_000 { usleep(1_000) }
        #expect(outcome.withLock { $0 }?.code == .closed, "the sleeper did not wake at the close")
    }

    /// A store opened alone zeroes `WAKE`: a sleepers' count a killed process left high (here,
    /// bytes of 0xFF) would otherwise cost every release a wake-up call for good.
    @Test func aStoreOpenedAloneZeroesWake() throws {
        let temporary = TemporaryDirectory("wake-alone")
        defer { temporary.remove() }
        var options = LogOptions()
        options.allowsOtherWriters = true
        try Log.open(directory: temporary.path, options: options).close()
        let path = LogFileNames.join(temporary.path, FormatConstants.wakeFileName)
        try Data(repeating: 0xFF, count: FormatConstants.wakeFileByteCount).write(to: URL(fileURLWithPath: path))
        let log = try Log.open(directory: temporary.path, options: options)
        #expect(log.core.writers?.turn.wake?.sleepers == 0)
        try log.close()
        // Release counters may have moved since (a turn at the close); every sleepers' count is
        // back to zero, and so is the reserved rest.
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        for channel in 0..<3 {
            let sleepers = channel * FormatConstants.wakeChannelByteCount + 4
            #expect(bytes[sleepers..<sleepers + 4].allSatisfy { $0 == 0 }, "channel \(channel)")
        }
        #expect(bytes[(3 * FormatConstants.wakeChannelByteCount)...].allSatisfy { $0 == 0 })
    }

    /// A holder that releases without waking anyone — killed (the kernel drops its `flock`), or a
    /// build without `WAKE` — only delays the waiter by its bounded sleep.
    @Test func aReleaseWithoutAWakeUpIsSeenAfterTheBoundedSleep() throws {
        let temporary = try Self.directory("wake-silent")
        defer { temporary.remove() }
        let waiter = try SharedWriters.open(directory: temporary.path, fileSystem: PosixFileSystem(), wakeSleepNanosecondsMax: 20_000_000)
        defer { waiter.close() }
        #expect(waiter.sync.wake != nil)
        let raw = try PosixFileSystem().openFile(LogFileNames.join(temporary.path, FormatConstants.syncLockFileName), mode: .createOrOpen)
        defer { raw.close() }
        #expect(try raw.tryLockExclusive())
        let acquired = Atomic<Bool>(false)
        let thread = Thread {
            try? waiter.sync.acquire(for: "wait in the test")
            acquired.store(true, ordering: .sequentiallyConsistent)
            waiter.sync.release()
        }
        thread.start()
        usleep(50_000)
        let early = acquired.load(ordering: .sequentiallyConsistent)
        #expect(!early)
        try raw.unlock()
        let releasedAt = monotonicNanoseconds()
        // Bounded: 10 s.
        while !acquired.load(ordering: .sequentiallyConsistent) && monotonicNanoseconds() - releasedAt < 10_000_000_000 { usleep(1_000) }
        let seen = acquired.load(ordering: .sequentiallyConsistent)
        #expect(seen, "a silent release was never seen")
    }

    /// The file: one page, the store's file mode, a control file `verify` knows; and when
    /// something else has the name (a directory here), waiters retry on a timer and nothing fails.
    @Test func wakeIsOnePageOfTheStoresModeAndOptional() throws {
        let temporary = try Self.directory("wake-file")
        defer { temporary.remove() }
        let writers = try SharedWriters.open(directory: temporary.path, fileSystem: PosixFileSystem())
        let path = LogFileNames.join(temporary.path, FormatConstants.wakeFileName)
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect(attributes[.size] as? Int == FormatConstants.wakeFileByteCount)
        #expect((attributes[.posixPermissions] as? Int).map { $0 & 0o777 } == 0o600)
        #expect(FormatConstants.controlFileNames.contains(FormatConstants.wakeFileName))
        writers.close()

        let other = try Self.directory("wake-taken")
        defer { other.remove() }
        try FileManager.default.createDirectory(
            atPath: LogFileNames.join(other.path, FormatConstants.wakeFileName), withIntermediateDirectories: false)
        let polling = try SharedWriters.open(directory: other.path, fileSystem: PosixFileSystem())
        defer { polling.close() }
        #expect(polling.turn.wake == nil)
        try polling.turn.acquire(for: "take it in the test")
        polling.turn.release()

        // A second name of another file is not mapped (its first page would be changed).
        let linked = try Self.directory("wake-linked")
        defer { linked.remove() }
        let segment = LogFileNames.join(linked.path, "someone-elses-file")
        try Data(repeating: 7, count: 10).write(to: URL(fileURLWithPath: segment))
        try FileManager.default.linkItem(atPath: segment, toPath: LogFileNames.join(linked.path, FormatConstants.wakeFileName))
        let unlinked = try SharedWriters.open(directory: linked.path, fileSystem: PosixFileSystem())
        #expect(unlinked.turn.wake == nil)
        unlinked.close()
        #expect(try Data(contentsOf: URL(fileURLWithPath: segment)) == Data(repeating: 7, count: 10))

        // A short file with anything in it is grown to one page and works.
        let short = try Self.directory("wake-short")
        defer { short.remove() }
        try Data(repeating: 0xFF, count: 100).write(to: URL(fileURLWithPath: LogFileNames.join(short.path, FormatConstants.wakeFileName)))
        let grown = try SharedWriters.open(directory: short.path, fileSystem: PosixFileSystem())
        defer { grown.close() }
        #expect(grown.sync.wake != nil)
        #expect((try FileManager.default.attributesOfItem(atPath: LogFileNames.join(short.path, FormatConstants.wakeFileName)))[.size] as? Int == 4096)
        try grown.sync.acquire(for: "take it in the test")
        grown.sync.release()
    }
}
