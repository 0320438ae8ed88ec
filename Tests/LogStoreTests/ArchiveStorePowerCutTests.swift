import Foundation
import LogStore
import LogStoreEngine
import LogStoreTestSupport
import SampleTrips
import Testing

/// The JSON archive store through the simulated file system: a power cut at any point of a save
/// leaves the file as it was before the save or as it is after it, never a mix, and every save
/// that returned survives.
@Suite struct ArchiveStorePowerCutTests {
    static let path = "/data/store/trips.json"

    static func open(_ fileSystem: SimulatedFileSystem, durable: Bool = true) throws -> ModelContainer {
        var configuration = ArchiveStoreConfiguration(path: path, isDurable: durable)
        configuration.fileSystem = fileSystem
        return try ModelContainer(for: sampleTripsModels, configuration: configuration)
    }

    /// The trip names in the store, sorted (what a save changes).
    static func names(_ container: ModelContainer) throws -> [String] {
        try ModelContext(container).fetch(FetchDescriptor<Trip>()).map(\.name).sorted()
    }

    static func insertTrip(_ container: ModelContainer, _ number: Int) throws {
        let context = ModelContext(container)
        let start = Date(timeIntervalSince1970: 1_750_000_000 + Double(number) * 86_400)
        context.insert(Trip(name: "Trip \(number)", destination: "Somewhere", startDate: start, endDate: start + 3_600))
        try context.save()
    }

    /// Every step of a durable save (create the temporary file, write it, fsync it, rename it,
    /// fsync the directory) fails in turn; then the power goes, keeping a random subset of what
    /// was not synced. The reopened store holds every earlier save and either all or none of the
    /// failed one.
    @Test(arguments: [SimulatedFileSystem.Operation.open, .write, .sync, .rename, .syncDirectory], 0..<8)
    func aSaveCutAtAnyStepLeavesTheOldOrTheNewFile(step: SimulatedFileSystem.Operation, seed: Int) throws {
        let fileSystem = SimulatedFileSystem()
        let container = try Self.open(fileSystem)
        let savedCount = seed % 4 + 1
        for number in 0..<savedCount { try Self.insertTrip(container, number) }
        let before = try Self.names(container)

        fileSystem.injectFault(step, path: .any)
        #expect(throws: ArchiveStoreError.self) { try Self.insertTrip(container, 99) }
        fileSystem.clearFaults()
        let cut = fileSystem.powerCut(seed: UInt64(seed))

        let recovered = try Self.names(try Self.open(cut))
        let after = (before + ["Trip 99"]).sorted()
        #expect(recovered == before || recovered == after, "step \(step), seed \(seed): \(recovered)")
        if step == .open || step == .write || step == .sync {
            // The rename never ran: the new file cannot be there.
            #expect(recovered == before, "step \(step), seed \(seed)")
        }
        // The reopened store removed the failed save's temporary file and saves again.
        #expect(try cut.contentsOfDirectory("/data/store").allSatisfy { !$0.hasSuffix(".tmp") })
        let reopened = try Self.open(cut)
        try Self.insertTrip(reopened, 100)
        #expect(try Self.names(reopened).contains("Trip 100"))
    }

    /// A power cut right after saves returned keeps all of them.
    @Test(arguments: 0..<16)
    func everyAcknowledgedSaveSurvivesAPowerCut(seed: Int) throws {
        let fileSystem = SimulatedFileSystem()
        let container = try Self.open(fileSystem)
        let count = seed % 5 + 1
        for number in 0..<count { try Self.insertTrip(container, number) }
        let cut = fileSystem.powerCut(seed: UInt64(seed))
        #expect(try Self.names(try Self.open(cut)) == (0..<count).map { "Trip \($0)" }.sorted())
    }
}
