import Foundation
import LogStoreEngine
import LogStoreTestSupport
import SampleTrips
import Testing

@testable import LogStore

/// Issue 14, item 7: a damaged checkpoint made every open fail with an error naming `logstore
/// repair`, and repair answered "Nothing to repair: every record checks out". Repair now sets the
/// checkpoint aside (into the store's `repair-<UTC time>` folder) and the store opens from the log.
@Suite struct CheckpointRepairTests {
    /// Every trip, with what its saves changed, sorted: the state to compare.
    static func trips(_ container: ModelContainer) throws -> [String] {
        let context = ModelContext(container)
        return try context.fetch(FetchDescriptor<Trip>()).map {
            "\($0.name)|\($0.destination)|\($0.bucketList.count)|\($0.livingAccommodation?.isConfirmed as Any)"
        }.sorted()
    }

    @Test(arguments: ["bit flip", "cut mid-record", "file header"])
    func aDamagedCheckpointMadeEveryOpenFailAndRepairSaidNothingToRepair(damage: String) throws {
        var random = CheckpointTests.Random(state: 99)
        var names = 0
        let fileSystem = SimulatedFileSystem()
        var (container, store) = try CheckpointTests.open(fileSystem)
        try CheckpointTests.randomSaves(container, count: 25, random: &random, names: &names)
        let offset = try store.checkpoint()
        try CheckpointTests.randomSaves(container, count: 10, random: &random, names: &names)
        let expected = try Self.trips(container)
        try store.close()
        let name = CheckpointFileName.name(offset: offset)
        let path = CheckpointTests.directory + "/" + name
        let size = fileSystem.bytes(at: path)!.count
        switch damage {
        case "bit flip": try fileSystem.corruptByte(at: size / 2, in: path, mask: 0x10)
        case "cut mid-record": try fileSystem.truncateFile(path, toByteCount: size - 3)
        default: try fileSystem.corruptByte(at: 17, in: path)
        }
        let damaged = fileSystem.bytes(at: path)!

        CheckpointTests.expectCorruption(naming: name) { _ = try CheckpointTests.open(fileSystem) }
        do {
            _ = try CheckpointTests.open(fileSystem)
        } catch {
            #expect("\(error)".contains("logstore repair"), "the error sends the user to repair: \(error)")
        }

        var options = LogOptions()
        options.fileSystem = fileSystem
        options.repairs = true
        let log = try Log.open(directory: CheckpointTests.directory, options: options)
        let report = log.recoveryReport
        try log.close()
        #expect(report.deletedCheckpoints == [name])
        #expect(report.truncatedAt == nil && report.droppedRecords.isEmpty, "no record was dropped")
        #expect(report.repairNotes.contains { $0.hasPrefix("\(name) set aside") }, "\(report.repairNotes)")
        let folder = try #require(report.setAsideDirectory)
        #expect(fileSystem.bytes(at: folder + "/" + name) == damaged)

        (container, store) = try CheckpointTests.open(fileSystem)
        #expect(store.openedFromCheckpointOffset == nil, "opened from the log alone")
        #expect(try Self.trips(container) == expected, "every saved model is back")
        try store.close()
    }
}
