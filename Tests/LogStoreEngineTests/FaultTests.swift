import Foundation
import LogStoreTestSupport
import Testing

@testable import LogStoreEngine

/// I/O errors: a full disk on a write is recoverable; any failed sync (and any other write
/// error) is fail-stop — cut back to the durable end, read-only until reopened.
@Suite struct FaultTests {
    private func openWithRecords(
        _ fileSystem: SimulatedFileSystem, count: Int = 3,
        preallocates: Bool = false
    ) throws -> (Log, [LogRecord]) {
        let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem, preallocates: preallocates))
        for number in 0..<count { try log.append(Array("durable \(number)".utf8)) }
        return (log, try readAll(log))
    }

    @Test func fullDiskOnWriteThrowsAndAppendsWorkAgainOnceSpaceIsFreed() throws {
        let fileSystem = SimulatedFileSystem()
        let (log, before) = try openWithRecords(fileSystem)
        let end = log.visibleEnd
        fileSystem.setCapacity(byteCount: fileSystem.usedByteCount + 50)
        var generator = SeededGenerator(seed: 41)
        let incompressible = payload(number: 1, byteCount: 500, compressible: false, generator: &generator)
        let error = logError { try log.append(incompressible) }
        #expect(error?.code == .outOfSpace)
        #expect(error?.underlying?.code == ErrorCode.noSpace)
        #expect(!log.isReadOnly)
        #expect(log.visibleEnd == end)
        #expect(try readAll(log) == before)
        // The bytes that did reach the file were zeroed: a crash now would find a clean end.
        let segment = fileSystem.bytes(at: segmentPath(0))!
        #expect(segment[(Int(end) + 64)...].allSatisfy { $0 == 0 })

        fileSystem.setCapacity(byteCount: nil)
        let next = try log.append(incompressible)
        #expect(next.offset == end)
        try log.close()
        let reopened = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        #expect(try readAll(reopened).count == before.count + 1)
        try reopened.close()
    }

    @Test func partialWriteOnAFullDiskIsZeroed() throws {
        let fileSystem = SimulatedFileSystem()
        let (log, before) = try openWithRecords(fileSystem)
        let end = log.visibleEnd
        fileSystem.failWrite(code: ErrorCode.noSpace, writingByteCount: 40, path: .suffix(".log"))
        #expect(logError { try log.append([UInt8](repeating: 9, count: 300)) }?.code == .outOfSpace)
        let segment = fileSystem.bytes(at: segmentPath(0))!
        #expect(segment[(Int(end) + 64)...].allSatisfy { $0 == 0 })
        try log.append(Array("after".utf8))
        #expect(try readAll(log).count == before.count + 1)
        try log.close()
    }

    @Test(arguments: [ErrorCode.ioError, ErrorCode.noSpace])
    func failedSyncCutsBackAndMakesTheLogReadOnly(code: Int32) throws {
        let fileSystem = SimulatedFileSystem()
        let (log, before) = try openWithRecords(fileSystem)
        let end = log.durableEnd
        fileSystem.failSync(code: code, path: .suffix(".log"))
        let error = logError { try log.append(Array("lost".utf8)) }
        #expect(error?.code == .syncFailed)
        #expect(error?.underlying?.code == code)
        #expect(log.isReadOnly)
        #expect(logError { try log.append(Array("refused".utf8)) }?.code == .readOnly)
        #expect(log.visibleEnd == end)
        #expect(try readAll(log) == before)
        // The failed record was zeroed and that was synced, before the error reached us.
        #expect(fileSystem.durableBytes(at: segmentPath(0))![(Int(end) + 64)...].allSatisfy { $0 == 0 })
        #expect(logError { try log.close() } == nil)  // the failure was already reported
        let reopened = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        #expect(try readAll(reopened) == before)
        try reopened.append(Array("after reopen".utf8))
        #expect(try readAll(reopened).count == before.count + 1)
        try reopened.close()
    }

    @Test func failedSyncWakesEveryWaiterWithTheError() async throws {
        let fileSystem = SimulatedFileSystem()
        let (log, _) = try openWithRecords(fileSystem)
        fileSystem.holdSyncs()
        fileSystem.failSync(path: .suffix(".log"))
        let results = await withTaskGroup(of: LogError.Code?.self) { group in
            for number in 0..<5 {
                group.addTask {
                    do throws(LogError) {
                        try await log.append(Array("waiting \(number)".utf8))
                        return nil
                    } catch { return error.code }
                }
            }
            _ = fileSystem.waitUntilSyncsHeld(count: 1)
            fileSystem.releaseSyncs()
            var codes: [LogError.Code?] = []
            for await code in group { codes.append(code) }
            return codes
        }
        // Each append either failed with the sync error or was refused as read-only afterwards.
        #expect(results.allSatisfy { $0 == .syncFailed || $0 == .readOnly })
        #expect(results.contains(.syncFailed))
        try log.close()
    }

    @Test func ioErrorOnWriteIsFailStop() throws {
        let fileSystem = SimulatedFileSystem()
        let (log, before) = try openWithRecords(fileSystem)
        fileSystem.failWrite(code: ErrorCode.ioError, writingByteCount: 10, path: .suffix(".log"))
        #expect(logError { try log.append(Array("eio".utf8)) }?.code == .ioError)
        #expect(logError { try log.append(Array("refused".utf8)) }?.code == .readOnly)
        #expect(try readAll(log) == before)
        try log.close()
        let reopened = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        #expect(try readAll(reopened) == before)
        try reopened.close()
    }

    @Test func aReadErrorDuringRecoveryIsAnIOErrorNotATornTail() throws {
        let fileSystem = SimulatedFileSystem()
        let (log, before) = try openWithRecords(fileSystem)
        try log.close()
        let bytesBefore = fileSystem.bytes(at: segmentPath(0))
        fileSystem.failRead(after: 1, path: .suffix(".log"))
        let error = logError { _ = try Log.open(directory: storePath, options: simulatedOptions(fileSystem)) }
        #expect(error?.code == .ioError)
        #expect(fileSystem.bytes(at: segmentPath(0)) == bytesBefore)
        let reopened = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        #expect(try readAll(reopened) == before)
        #expect(!reopened.recoveryReport.droppedAnything)
        try reopened.close()
    }

    @Test func fullDiskDuringPreallocationCostsNothingButSpeed() throws {
        let fileSystem = SimulatedFileSystem()
        let (log, before) = try openWithRecords(fileSystem, preallocates: true)
        fileSystem.setCapacity(byteCount: fileSystem.usedByteCount + 4000)
        var written = 0
        var generator = SeededGenerator(seed: 42)
        while written < 1000,
            (try? log.append(payload(number: written, byteCount: 100, compressible: false, generator: &generator)))
                != nil
        {
            written += 1
        }
        #expect(written > 0)
        #expect(!log.isReadOnly)
        fileSystem.setCapacity(byteCount: nil)
        try log.append([UInt8](repeating: 4, count: 100))
        #expect(try readAll(log).count == before.count + written + 1)
        try log.close()
    }
}
