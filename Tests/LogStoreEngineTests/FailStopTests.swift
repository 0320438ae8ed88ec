import Foundation
import LogStoreTestSupport
import Synchronization
import Testing

@testable import LogStoreEngine

/// A failed `fdatasync` or write stops the log safely: nothing undurable is acknowledged or read
/// again in this boot, the log is cut back to its durable end, and it is read-only until reopened.
@Suite struct FailStopTests {
    // Found by the crash-safety review of the write paths (F-numbers are its findings); each failed before its fix.
    /// F1: a non-ENOSPC write error runs failStop (zero-fill + fdatasync) while another thread's
    /// fdatasync is in flight; when that sync returns it sets durableEnd past the cut, so its
    /// append returns success although its record was zeroed.
    @Test func failStopDuringALeadersSyncMustNotAcknowledgeTheZeroedRecord() throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem, preallocates: false))
        try log.append(Array("durable".utf8))
        let durableBefore = log.durableEnd
        fileSystem.holdSyncs()
        let aResult = Mutex<String>("pending")
        let aDone = DispatchSemaphore(value: 0)
        Thread {
            do {
                try log.append(Array("A acknowledged?".utf8))
                aResult.withLock { $0 = "success" }
            } catch {
                aResult.withLock { $0 = "\(error)" }
            }
            aDone.signal()
        }.start()
        #expect(fileSystem.waitUntilSyncsHeld(count: 1))  // A leads its fdatasync, held
        fileSystem.failWrite(code: ErrorCode.ioError, path: .suffix(".log"))
        let bDone = DispatchSemaphore(value: 0)
        Thread {
            _ = try? log.append(Array("B".utf8))  // EIO -> failStop -> zero-fill + fdatasync (held too)
            bDone.signal()
        }.start()
        let twoAtOnce = fileSystem.waitUntilSyncsHeld(count: 2, timeout: .seconds(2))
        fileSystem.releaseSyncs()
        aDone.wait()
        bDone.wait()
        let aOutcome = aResult.withLock { $0 }
        print(
            "F1: two fdatasyncs at once: \(twoAtOnce); A: \(aOutcome); durableEnd \(log.durableEnd) writtenEnd \(log.writtenEnd)"
        )
        // What A was told must match the disk.
        try log.close()
        let reopened = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        let payloads = try readAll(reopened).map { String(decoding: $0.payload, as: UTF8.self) }
        print("F1: after reopen: \(payloads)")
        #expect(!twoAtOnce, "two fdatasyncs ran at once")
        if aOutcome == "success" {
            #expect(payloads.contains("A acknowledged?"), "A was acknowledged but its record is gone")
        }
        _ = durableBefore
        try reopened.close()
    }

    /// F4: when the cut-back after a failed fdatasync cannot zero the tail (try? swallows it),
    /// the non-durable record stays in the page cache; after close the next open accepts it, and
    /// a power cut then drops an acknowledged append that follows it.
    @Test func aFailedSyncsRecordNeverReappearsInTheSameBoot() throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem, preallocates: false))
        try log.append(Array("durable".utf8))
        var generator = SeededGenerator(seed: 7)
        let lost = payload(number: 99, byteCount: 3000, compressible: false, generator: &generator)
        // fsyncgate: the failed sync marks the pages clean; only the cut-back keeps them from being read.
        fileSystem.failSync(path: .suffix(".log"))
        #expect(logError { try log.append(lost) }?.code == .syncFailed)
        try log.close()
        let reopened = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        #expect(!(try readAll(reopened)).contains { $0.payload == lost })
        try reopened.append(Array("acknowledged".utf8))
        let cut = fileSystem.powerCut(.nothingUnsynced)
        try reopened.close()
        let recovered = try Log.open(directory: storePath, options: simulatedOptions(cut))
        #expect(try readAll(recovered).map(\.payload).contains(Array("acknowledged".utf8)))
        try recovered.close()
    }

    @Test func aFailedCutBackKeepsTheStoreLockedForTheRestOfTheProcess() throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem, preallocates: false))
        try log.append(Array("durable".utf8))
        fileSystem.failSync(path: .suffix(".log"))
        fileSystem.failTruncate(path: .suffix(".log"))
        #expect(logError { try log.append(Array("lost".utf8)) }?.code == .syncFailed)
        try log.close()
        // The undurable bytes may still be in the page cache: no open in this process may read them.
        let refused = logError { _ = try Log.open(directory: storePath, options: simulatedOptions(fileSystem)) }
        #expect(refused?.code == .alreadyOpenInProcess)
        #expect(refused?.message.contains("Restart the process") == true)
        // After a power cut (a new boot) the store opens, without the record that never became durable.
        let cut = fileSystem.powerCut(.nothingUnsynced)
        let recovered = try Log.open(directory: storePath, options: simulatedOptions(cut))
        #expect(try readAll(recovered).map(\.payload) == [Array("durable".utf8)])
        try recovered.close()
    }

    /// F7: after a fail-stop, writtenEnd was cut back to durableEnd, so Log.sync() (which syncs
    /// "through the written end") returns success. writeCheckpoint relies on it for X.
    @Test func syncOnAFailStoppedLogThrows() throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(
            directory: storePath, options: simulatedOptions(fileSystem, durability: .none, preallocates: false))
        try log.append(Array("durable".utf8))
        try log.sync()
        let x = try log.write(Array("not durable".utf8)).endOffset  // a checkpoint would take X = written end here
        fileSystem.failSync(path: .suffix(".log"))
        #expect(logError { try log.sync() }?.code == .syncFailed)
        let second = logError { try log.sync() }
        print("F7: second sync(): \(String(describing: second?.code)); X \(x) durableEnd \(log.durableEnd)")
        #expect(second != nil, "sync() reports success on a fail-stopped log although X is not durable")
        try log.close()
    }
}
