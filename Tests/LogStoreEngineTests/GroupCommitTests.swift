import Foundation
import LogStoreTestSupport
import Synchronization
import Testing

@testable import LogStoreEngine

@Suite struct GroupCommitTests {
    /// Thread 1 appends and its sync is held open; threads 2–8 append meanwhile. On release,
    /// exactly one more sync covers all seven, and none of them returned before it.
    @Test func appendsWaitingBehindAHeldSyncShareTheNextOne() throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem, preallocates: false))
        let syncsAtOpen = fileSystem.syncCount
        fileSystem.holdSyncs()
        let done = DispatchSemaphore(value: 0)
        let syncCountAtReturn = Mutex<[Int: Int]>([:])
        func appendOnThread(_ number: Int) {
            Thread {
                _ = try? log.append(Array("thread \(number)".utf8))
                let completed = fileSystem.syncCount
                syncCountAtReturn.withLock { $0[number] = completed }
                done.signal()
            }.start()
        }
        appendOnThread(1)
        #expect(fileSystem.waitUntilSyncsHeld(count: 1))
        for number in 2...8 { appendOnThread(number) }
        // Wait until all seven have written their records and are waiting for durability.
        let deadline = Date().addingTimeInterval(10)
        while log.statistics.appendCount < 8 && Date() < deadline { Thread.sleep(forTimeInterval: 0.001) }
        #expect(log.statistics.appendCount == 8)
        #expect(syncCountAtReturn.withLock { $0.isEmpty })
        fileSystem.releaseSyncs()
        for _ in 1...8 { done.wait() }

        #expect(fileSystem.syncCount == syncsAtOpen + 2)
        #expect(log.statistics.syncCount == 2)
        let returns = syncCountAtReturn.withLock { $0 }
        #expect(returns[1]! >= syncsAtOpen + 1)
        for number in 2...8 { #expect(returns[number]! == syncsAtOpen + 2, "thread \(number) returned early") }
        #expect(try readAll(log).count == 8)
        try log.close()
    }

    @Test func manyThreadsShareSyncs() throws {
        let fileSystem = SimulatedFileSystem()
        fileSystem.setSyncLatency(.microseconds(200))
        let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        let done = DispatchSemaphore(value: 0)
        for thread in 0..<8 {
            Thread {
                for number in 0..<50 { _ = try? log.append(Array("t\(thread) n\(number)".utf8)) }
                done.signal()
            }.start()
        }
        for _ in 0..<8 { done.wait() }
        let statistics = log.statistics
        #expect(statistics.appendCount == 400)
        #expect(statistics.syncCount < 400)
        #expect(try readAll(log).count == 400)
        try log.close()
    }

    @Test func batchedModeSyncsWithinTheInterval() throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(
            directory: storePath,
            options: simulatedOptions(fileSystem, durability: .batched(syncIntervalMax: .milliseconds(20))))
        let position = try log.append(Array("batched".utf8))
        #expect(log.visibleEnd == position.endOffset)  // visible once written in batched mode
        let deadline = Date().addingTimeInterval(5)
        while log.durableEnd < position.endOffset && Date() < deadline { Thread.sleep(forTimeInterval: 0.005) }
        #expect(log.durableEnd == position.endOffset)
        try log.close()
    }

    @Test func unsyncedBytesNeverExceedTheBound() throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(
            directory: storePath, options: simulatedOptions(fileSystem, durability: .none, preallocates: false))
        var generator = SeededGenerator(seed: 31)
        for number in 0..<40 {
            let position = try log.write(
                payload(number: number, byteCount: 300_000, compressible: false, generator: &generator))
            #expect(position.endOffset - log.durableEnd <= FormatConstants.unsyncedByteCountMax)
        }
        try log.close()
    }
}
