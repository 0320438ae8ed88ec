import Foundation
import LogStoreTestSupport
import Synchronization
import Testing

@testable import LogStoreEngine

/// The syncer thread sleeps when it has nothing to do, and what it does when idle (durable-end
/// marks, zero-fill) never spins it or wedges a writer. Found by the second read of format
/// version 2's writer (D12); each test failed before its fix.
@Suite struct SyncerTests {
    /// Wakes of an idle syncer over `interval`: with a 20 ms mark delay about 15 in 0.3 s; a
    /// syncer that spins on a zero timeout wakes hundreds of thousands of times.
    private static func wakes(of log: Log, over interval: TimeInterval) -> UInt64 {
        let before = log.statistics.syncerWakeCount
        Thread.sleep(forTimeInterval: interval)
        return log.statistics.syncerWakeCount - before
    }

    /// B1: in `.none` mode the written records stay unsynced, so an overdue mark is blocked (it may
    /// only state a durable log); the syncer slept with a zero timeout and spun until close.
    @Test func aMarkBlockedByUnsyncedRecordsDoesNotSpinTheSyncer() throws {
        let fileSystem = SimulatedFileSystem()
        var options = simulatedOptions(fileSystem, durability: .none, preallocates: false)
        options.durableEndMarkDelay = .milliseconds(20)
        let log = try Log.open(directory: storePath, options: options)
        try log.append(Array("unsynced".utf8))
        let wakes = Self.wakes(of: log, over: 0.3)
        #expect(wakes < 200, "the syncer woke \(wakes) times in 0.3 s")
        #expect(log.statistics.markCount == 0, "a mark may not state unsynced records durable")
        try log.close()
        // At close the final sync makes everything durable and the mark follows it.
        let reopened = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        #expect(try readAll(reopened).count == 1)
        try reopened.close()
    }

    /// B1: after a fail-stop no mark is ever written; the syncer still computed the mark's
    /// deadline, found it passed, and spun.
    @Test func aFailStoppedLogDoesNotSpinTheSyncer() throws {
        let fileSystem = SimulatedFileSystem()
        var options = simulatedOptions(fileSystem, preallocates: false)
        options.durableEndMarkDelay = .milliseconds(20)
        let log = try Log.open(directory: storePath, options: options)
        try log.append(Array("durable".utf8))
        fileSystem.failSync(path: .suffix(".log"))
        #expect(throws: LogError.self) { try log.append(Array("not durable".utf8)) }
        #expect(log.isReadOnly)
        let wakes = Self.wakes(of: log, over: 0.3)
        #expect(wakes < 200, "the syncer woke \(wakes) times in 0.3 s")
        try? log.close()
    }

    /// P2: the retry time of a failed zero-fill was never reset, so once it had passed every sleep
    /// of the syncer had a zero timeout.
    @Test func aPastZeroFillRetryTimeIsNoDeadline() throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem, preallocates: false))
        log.core.conditionLock.lock()
        log.core.state.preallocationRetryNanoseconds = 1  // long past
        let timeout = log.core.sleepNanoseconds()
        log.core.conditionLock.unlock()
        #expect(timeout == nil, "an idle log's syncer sleeps until woken, not for \(timeout.map(String.init) ?? "")ns")
        try log.close()
    }

    /// B2: a mark that would run past `segmentByteCountMax` was skipped, leaving the segment's last
    /// group commit stated durable by nothing until a roll that may never come. It is written
    /// (at most 32 bytes past the limit) and the next record rolls.
    @Test func aSegmentWithLessThanAMarkOfRoomLeftStillGetsItsMark() throws {
        let fileSystem = SimulatedFileSystem()
        let segmentByteCountMax: UInt64 = 4096
        var options = simulatedOptions(
            fileSystem, segmentByteCountMax: segmentByteCountMax, preallocates: false, compresses: false)
        options.durableEndMarkDelay = .milliseconds(20)
        let log = try Log.open(directory: storePath, options: options)
        // Header 64 + record (32 + n) leaves 16 bytes: less than a mark's 32.
        let header = UInt64(FormatConstants.segmentHeaderByteCount + FormatConstants.recordHeaderByteCount)
        let filling = try log.append([UInt8](repeating: 7, count: Int(segmentByteCountMax - header - 16)))
        let deadline = Date().addingTimeInterval(10)
        while log.statistics.markCount == 0 && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        #expect(log.statistics.markCount == 1)
        #expect(log.durableEnd == filling.endOffset + 32, "the mark is written and durable")
        #expect(log.statistics.rollCount == 0, "the mark stays in the segment it states")
        let next = try log.append(Array("next".utf8))
        #expect(log.statistics.rollCount == 1, "the next record rolls")
        #expect(next.offset == filling.endOffset + 32)
        try log.close()
        let reopened = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        #expect(try readAll(reopened).map(\.offset) == [filling.offset, next.offset])
        try reopened.close()
    }

    /// P1: a write error fail-stops the log while a leader's fdatasync is in flight and waits for
    /// it; the leader's sync then fails too, and its own fail-stop returned early without waking
    /// the first one: both threads waited for ever.
    @Test func aSyncFailingWhileAnotherThreadFailStopsWakesIt() throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem, preallocates: false))
        try log.append(Array("durable".utf8))
        fileSystem.holdSyncs()
        let done = DispatchGroup()
        done.enter()
        Thread {
            _ = try? log.append(Array("A".utf8))  // leads its fdatasync, held
            done.leave()
        }.start()
        #expect(fileSystem.waitUntilSyncsHeld(count: 1))
        fileSystem.failWrite(code: ErrorCode.ioError, path: .suffix(".log"))
        done.enter()
        Thread {
            _ = try? log.append(Array("B".utf8))  // EIO -> fail-stop, which waits for A's sync
            done.leave()
        }.start()
        // Let B reach its wait, then make A's held sync fail.
        let failingDeadline = Date().addingTimeInterval(10)
        while !log.core.conditionLock.withLock({ log.core.state.isFailing }) && Date() < failingDeadline {
            Thread.sleep(forTimeInterval: 0.005)
        }
        fileSystem.failSync(path: .suffix(".log"))
        fileSystem.releaseSyncs()
        let finished = done.wait(timeout: .now() + 20) == .success
        #expect(finished, "a writer is stuck in fail-stop")
        guard finished else { return }  // closing would wait for the stuck thread
        #expect(log.isReadOnly)
        try? log.close()
        let reopened = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        #expect(try readAll(reopened).map { String(decoding: $0.payload, as: UTF8.self) } == ["durable"])
        try reopened.close()
    }
}
