import Foundation
import LogStoreTestSupport
import Synchronization
import Testing

@testable import LogStoreEngine

/// Repair of a damaged store: whatever stops a repair part-way, the store never opens silently
/// without what the repair had not yet put back.
@Suite struct RepairTests {
    // Found by the crash-safety review of the write paths (F-numbers are its findings); each failed before its fix.
    /// F8: repairing a damaged first-segment header unlinks the segment before creating its
    /// replacement; if anything stops the repair there (an error here; a crash after the unlink
    /// reached the journal in real life), a plain open succeeds with the log starting at the
    /// second segment and reports nothing.
    @Test func aRepairStoppedAfterUnlinkingSegmentZeroLeavesAStoreThatOpensSilently() throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(
            directory: storePath, options: simulatedOptions(fileSystem, segmentByteCountMax: 256, preallocates: false))
        for number in 0..<6 { try log.append([UInt8](repeating: UInt8(number), count: 100)) }
        try log.close()
        try fileSystem.corruptByte(at: 0, in: segmentPath(0))
        var options = simulatedOptions(fileSystem)
        options.repairs = true
        fileSystem.failOpen(path: .suffix(".log.tmp"))
        let repairError = logError { try Log.open(directory: storePath, options: options).close() }
        let plain = try? Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        print(
            "F8: repair error \(String(describing: repairError?.code)); plain open start \(String(describing: plain?.startOffset)); "
                + "dropped reported: \(plain?.recoveryReport.droppedAnything as Any); names \(fileSystem.fileNames(in: storePath))"
        )
        #expect(plain == nil || plain!.startOffset == 0, "the store opened with its first segment silently gone")
        try plain?.close()
    }
}
