// Regression tests from the crash-safety review of the write paths: each failed before its fix.
import Foundation
import LogStoreTestSupport
import Synchronization
import Testing
@testable import LogStoreEngine

/// A FileSystem that forwards to a SimulatedFileSystem, but can park the thread that opens a
/// path matching `gatedSuffix` until `open()` is called.
final class GatedFileSystem: FileSystem, @unchecked Sendable {
    let base: SimulatedFileSystem
    let gatedSuffix: String
    private let condition = NSCondition()
    private var armed = false
    private var parked = false
    init(_ base: SimulatedFileSystem, gatedSuffix: String) { self.base = base; self.gatedSuffix = gatedSuffix }
    func arm() { condition.lock(); armed = true; condition.unlock() }
    func waitUntilParked() { condition.lock(); while !parked { condition.wait() }; condition.unlock() }
    func open() { condition.lock(); armed = false; condition.broadcast(); condition.unlock() }
    func openFile(_ path: String, mode: FileOpenMode) throws(FileSystemError) -> any LogStoreEngine.FileHandle {
        if path.hasSuffix(gatedSuffix) {
            condition.lock()
            if armed { parked = true; condition.broadcast(); while armed { condition.wait() } }
            condition.unlock()
        }
        return try base.openFile(path, mode: mode)
    }
    func createDirectory(_ path: String) throws(FileSystemError) { try base.createDirectory(path) }
    func removeFile(_ path: String) throws(FileSystemError) { try base.removeFile(path) }
    func rename(_ source: String, to destination: String) throws(FileSystemError) { try base.rename(source, to: destination) }
    func syncDirectory(_ path: String) throws(FileSystemError) { try base.syncDirectory(path) }
    func contentsOfDirectory(_ path: String) throws(FileSystemError) -> [String] { try base.contentsOfDirectory(path) }
    func kind(of path: String) throws(FileSystemError) -> FileKind? { try base.kind(of: path) }
    func identity(of path: String) throws(FileSystemError) -> FileIdentity { try base.identity(of: path) }
}

@Suite struct CrashReviewFindingsTests {
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
            do { try log.append(Array("A acknowledged?".utf8)); aResult.withLock { $0 = "success" } } catch {
                aResult.withLock { $0 = "\(error)" }
            }
            aDone.signal()
        }.start()
        #expect(fileSystem.waitUntilSyncsHeld(count: 1)) // A leads its fdatasync, held
        fileSystem.failWrite(code: ErrorCode.ioError, path: .suffix(".log"))
        let bDone = DispatchSemaphore(value: 0)
        Thread {
            _ = try? log.append(Array("B".utf8)) // EIO -> failStop -> zero-fill + fdatasync (held too)
            bDone.signal()
        }.start()
        let twoAtOnce = fileSystem.waitUntilSyncsHeld(count: 2, timeout: .seconds(2))
        fileSystem.releaseSyncs()
        aDone.wait(); bDone.wait()
        let aOutcome = aResult.withLock { $0 }
        print("F1: two fdatasyncs at once: \(twoAtOnce); A: \(aOutcome); durableEnd \(log.durableEnd) writtenEnd \(log.writtenEnd)")
        // What A was told must match the disk.
        try log.close()
        let reopened = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        let payloads = try readAll(reopened).map { String(decoding: $0.payload, as: UTF8.self) }
        print("F1: after reopen: \(payloads)")
        #expect(!twoAtOnce, "two fdatasyncs ran at once")
        if aOutcome == "success" { #expect(payloads.contains("A acknowledged?"), "A was acknowledged but its record is gone") }
        _ = durableBefore
        try reopened.close()
    }

    /// F2: in batched mode, a write shortly after a sync does not wake the syncer, and the
    /// syncer sleeps without a timeout when nothing was unsynced: the write never gets synced.
    @Test(arguments: [false, true]) func batchedModeSyncsEveryWriteWithinTheInterval(preallocates: Bool) throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(directory: storePath,
                               options: simulatedOptions(fileSystem, durability: .batched(syncIntervalMax: .milliseconds(200)),
                                                         preallocates: preallocates))
        let first = try log.append(Array("first".utf8))
        var deadline = Date().addingTimeInterval(5)
        while log.durableEnd < first.endOffset && Date() < deadline { Thread.sleep(forTimeInterval: 0.001) }
        #expect(log.durableEnd == first.endOffset)
        Thread.sleep(forTimeInterval: 0.05) // the syncer finishes preallocating and sleeps
        let second = try log.append(Array("second".utf8)) // 50 ms after the sync: not 'due'
        deadline = Date().addingTimeInterval(2) // 10 intervals
        while log.durableEnd < second.endOffset && Date() < deadline { Thread.sleep(forTimeInterval: 0.005) }
        #expect(log.durableEnd == second.endOffset, "batched write not synced within 10 x syncIntervalMax")
        try log.close()
    }

    /// F3: close() returns and releases LOCK while a writer's roll is still creating the next
    /// segment; the segment appears after another open took the store, which then appends to
    /// the old segment: the next open finds a sealed segment running past its successor.
    @Test func closeDuringARollMustNotReleaseTheLockBeforeTheRollEnds() throws {
        let simulated = SimulatedFileSystem()
        let gated = GatedFileSystem(simulated, gatedSuffix: ".log.tmp")
        var options = simulatedOptions(simulated, segmentByteCountMax: 256, preallocates: false)
        options.fileSystem = gated
        let log = try Log.open(directory: storePath, options: options)
        try log.append([UInt8](repeating: 1, count: 100))
        gated.arm()
        let done = DispatchSemaphore(value: 0)
        Thread {
            _ = try? log.append([UInt8](repeating: 2, count: 100)) // rolls; parks in createSegment
            done.signal()
        }.start()
        gated.waitUntilParked()
        // close() must wait for the roll: it may not release the lock while files are being made.
        let closed = DispatchSemaphore(value: 0)
        Thread {
            try? log.close()
            closed.signal()
        }.start()
        #expect(closed.wait(timeout: .now() + 0.3) == .timedOut, "close returned while the roll was still running")
        let early = logError { _ = try Log.open(directory: storePath, options: simulatedOptions(simulated)) }
        #expect(early?.code == .alreadyOpenInProcess || early?.code == .locked)
        gated.open() // the roll finishes; then close does
        done.wait()
        closed.wait()
        let second = try Log.open(directory: storePath, options: simulatedOptions(simulated, segmentByteCountMax: 1 << 20,
                                                                                   preallocates: false))
        try second.append(Array("acknowledged by the second open".utf8))
        try second.close()
        let error = logError { try Log.open(directory: storePath, options: simulatedOptions(simulated)).close() }
        #expect(error == nil)
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
}

@Suite struct CrashReviewSyncAfterFailureTests {
    /// F7: after a fail-stop, writtenEnd was cut back to durableEnd, so Log.sync() (which syncs
    /// "through the written end") returns success. writeCheckpoint relies on it for X.
    @Test func syncOnAFailStoppedLogThrows() throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem, durability: .none, preallocates: false))
        try log.append(Array("durable".utf8)); try log.sync()
        let x = try log.write(Array("not durable".utf8)).endOffset // a checkpoint would take X = written end here
        fileSystem.failSync(path: .suffix(".log"))
        #expect(logError { try log.sync() }?.code == .syncFailed)
        let second = logError { try log.sync() }
        print("F7: second sync(): \(String(describing: second?.code)); X \(x) durableEnd \(log.durableEnd)")
        #expect(second != nil, "sync() reports success on a fail-stopped log although X is not durable")
        try log.close()
    }
}

@Suite struct CrashReviewRepairTests {
    /// F8: repairing a damaged first-segment header unlinks the segment before creating its
    /// replacement; if anything stops the repair there (an error here; a crash after the unlink
    /// reached the journal in real life), a plain open succeeds with the log starting at the
    /// second segment and reports nothing.
    @Test func aRepairStoppedAfterUnlinkingSegmentZeroLeavesAStoreThatOpensSilently() throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem, segmentByteCountMax: 256, preallocates: false))
        for number in 0..<6 { try log.append([UInt8](repeating: UInt8(number), count: 100)) }
        try log.close()
        try fileSystem.corruptByte(at: 0, in: segmentPath(0))
        var options = simulatedOptions(fileSystem)
        options.repairs = true
        fileSystem.failOpen(path: .suffix(".log.tmp"))
        let repairError = logError { try Log.open(directory: storePath, options: options).close() }
        let plain = try? Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        print("F8: repair error \(String(describing: repairError?.code)); plain open start \(String(describing: plain?.startOffset)); "
              + "dropped reported: \(plain?.recoveryReport.droppedAnything as Any); names \(fileSystem.fileNames(in: storePath))")
        #expect(plain == nil || plain!.startOffset == 0, "the store opened with its first segment silently gone")
        try plain?.close()
    }
}

@Suite struct CrashReviewTrimTests {
    /// N: a sealed segment whose trim was lost in a crash is re-trimmed after recovery through a
    /// read-only handle: the ftruncate fails (swallowed) and the zeros stay.
    @Test func aSealedSegmentIsTrimmedAfterRecovery() throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem, segmentByteCountMax: 256, preallocates: false))
        for number in 0..<3 { try log.append([UInt8](repeating: UInt8(number), count: 100)) }
        try log.close()
        let trimmed = fileSystem.bytes(at: segmentPath(0))!
        try fileSystem.setBytes(trimmed + [UInt8](repeating: 0, count: 4096), at: segmentPath(0)) // the trim was lost
        try fileSystem.removeFile(storePath + "/" + LogFileNames.index(0)) // and the index not written
        let reopened = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        try reopened.close()
        print("N: sealed segment size \(fileSystem.bytes(at: segmentPath(0))!.count), expected \(trimmed.count); index exists \(fileSystem.exists(storePath + "/" + LogFileNames.index(0)))")
        #expect(fileSystem.bytes(at: segmentPath(0))!.count == trimmed.count)
    }
}

@Suite struct CrashReviewDirectoryDurabilityTests {
    /// F11: a roll whose directory fsync did not happen (process died there; here: it failed)
    /// leaves the new segment's name in the page cache only. The next open adopts the segment
    /// and appends to it without ever fsyncing the directory; a power cut then removes the
    /// segment together with the acknowledged appends in it.
    @Test func recoveryMakesTheDirectoryItReadDurableBeforeAppending() throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem, segmentByteCountMax: 256, preallocates: false))
        try log.append([UInt8](repeating: 1, count: 100))
        fileSystem.failSyncDirectory(path: .exactly(storePath))
        #expect(logError { try log.append([UInt8](repeating: 2, count: 100)) } != nil) // the roll's directory fsync fails
        try? log.close()
        // Restart (no power cut): the new segment is listed and becomes the last one.
        let reopened = try Log.open(directory: storePath, options: simulatedOptions(fileSystem, segmentByteCountMax: 256, preallocates: false))
        try reopened.append(Array("acknowledged".utf8))
        print("F11: segments \(reopened.segmentBaseOffsets); durable names \(fileSystem.durableFileNames(in: storePath))")
        let cut = fileSystem.powerCut(.nothingUnsynced)
        try reopened.close()
        let recovered = try Log.open(directory: storePath, options: simulatedOptions(cut))
        let payloads = try readAll(recovered).map(\.payload)
        print("F11: after power cut \(payloads.count) records, segments \(recovered.segmentBaseOffsets)")
        #expect(payloads.contains(Array("acknowledged".utf8)), "an acknowledged append vanished with its segment's name")
        try recovered.close()
    }
}
