import Foundation
import LogStoreTestSupport
import Synchronization
import Testing

@testable import LogStoreEngine

/// Segments across rolls, close and recovery: a roll finishes before the lock is released, the
/// directory entries recovery read are durable before it appends, sealed segments are trimmed, and
/// batched mode syncs every write within its interval.
@Suite struct SegmentLifecycleTests {
    // Found by the crash-safety review of the write paths (F-numbers are its findings); each failed before its fix.
    /// F2: in batched mode, a write shortly after a sync does not wake the syncer, and the
    /// syncer sleeps without a timeout when nothing was unsynced: the write never gets synced.
    @Test(arguments: [false, true]) func batchedModeSyncsEveryWriteWithinTheInterval(preallocates: Bool) throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(
            directory: storePath,
            options: simulatedOptions(
                fileSystem, durability: .batched(syncIntervalMax: .milliseconds(200)),
                preallocates: preallocates))
        let first = try log.append(Array("first".utf8))
        var deadline = Date().addingTimeInterval(5)
        while log.durableEnd < first.endOffset && Date() < deadline { Thread.sleep(forTimeInterval: 0.001) }
        #expect(log.durableEnd == first.endOffset)
        Thread.sleep(forTimeInterval: 0.05)  // the syncer finishes preallocating and sleeps
        let second = try log.append(Array("second".utf8))  // 50 ms after the sync: not 'due'
        deadline = Date().addingTimeInterval(2)  // 10 intervals
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
            _ = try? log.append([UInt8](repeating: 2, count: 100))  // rolls; parks in createSegment
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
        gated.open()  // the roll finishes; then close does
        done.wait()
        closed.wait()
        let second = try Log.open(
            directory: storePath,
            options: simulatedOptions(
                simulated, segmentByteCountMax: 1 << 20,
                preallocates: false))
        try second.append(Array("acknowledged by the second open".utf8))
        try second.close()
        let error = logError { try Log.open(directory: storePath, options: simulatedOptions(simulated)).close() }
        #expect(error == nil)
    }

    /// N: a sealed segment whose trim was lost in a crash is re-trimmed after recovery through a
    /// read-only handle: the ftruncate fails (swallowed) and the zeros stay.
    @Test func aSealedSegmentIsTrimmedAfterRecovery() throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(
            directory: storePath, options: simulatedOptions(fileSystem, segmentByteCountMax: 256, preallocates: false))
        for number in 0..<3 { try log.append([UInt8](repeating: UInt8(number), count: 100)) }
        try log.close()
        let trimmed = fileSystem.bytes(at: segmentPath(0))!
        try fileSystem.setBytes(trimmed + [UInt8](repeating: 0, count: 4096), at: segmentPath(0))  // the trim was lost
        try fileSystem.removeFile(storePath + "/" + LogFileNames.index(0))  // and the index not written
        let reopened = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        try reopened.close()
        print(
            "N: sealed segment size \(fileSystem.bytes(at: segmentPath(0))!.count), expected \(trimmed.count); index exists \(fileSystem.exists(storePath + "/" + LogFileNames.index(0)))"
        )
        #expect(fileSystem.bytes(at: segmentPath(0))!.count == trimmed.count)
    }

    /// F11: a roll whose directory fsync did not happen (process died there; here: it failed)
    /// leaves the new segment's name in the page cache only. The next open adopts the segment
    /// and appends to it without ever fsyncing the directory; a power cut then removes the
    /// segment together with the acknowledged appends in it.
    @Test func recoveryMakesTheDirectoryItReadDurableBeforeAppending() throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(
            directory: storePath, options: simulatedOptions(fileSystem, segmentByteCountMax: 256, preallocates: false))
        try log.append([UInt8](repeating: 1, count: 100))
        fileSystem.failSyncDirectory(path: .exactly(storePath))
        #expect(logError { try log.append([UInt8](repeating: 2, count: 100)) } != nil)  // the roll's directory fsync fails
        try? log.close()
        // Restart (no power cut): the new segment is listed and becomes the last one.
        let reopened = try Log.open(
            directory: storePath, options: simulatedOptions(fileSystem, segmentByteCountMax: 256, preallocates: false))
        try reopened.append(Array("acknowledged".utf8))
        print(
            "F11: segments \(reopened.segmentBaseOffsets); durable names \(fileSystem.durableFileNames(in: storePath))")
        let cut = fileSystem.powerCut(.nothingUnsynced)
        try reopened.close()
        let recovered = try Log.open(directory: storePath, options: simulatedOptions(cut))
        let payloads = try readAll(recovered).map(\.payload)
        print("F11: after power cut \(payloads.count) records, segments \(recovered.segmentBaseOffsets)")
        #expect(
            payloads.contains(Array("acknowledged".utf8)), "an acknowledged append vanished with its segment's name")
        try recovered.close()
    }
}
