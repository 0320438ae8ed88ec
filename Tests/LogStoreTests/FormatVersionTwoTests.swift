import Foundation
import LogStore
import LogStoreEngine
import LogStoreTestSupport
import SampleTrips
import Testing

/// A store written by the format-version-2 build (`Fixtures/v2-trips`: the benchmarks' small P5
/// fixture made at f1df393 — 100 Trips inserted in one save, then 2,000 saves of one update each,
/// round-robin, setting destination "Stop <n>" — its log trimmed of preallocated zeros) opens with
/// today's build, keeps its models and history, and takes new saves in version-3 segments, where
/// segment dictionaries begin (docs/FORMAT.md §6.8, §11.4).
@Suite struct FormatVersionTwoTests {
    static let directory = "/v2-trips"

    static func fixtureDisk() throws -> SimulatedFileSystem {
        let fileSystem = SimulatedFileSystem()
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures/v2-trips")
        for name in try FileManager.default.contentsOfDirectory(atPath: source.path) {
            try fileSystem.setBytes(
                Array(try Data(contentsOf: source.appendingPathComponent(name))), at: directory + "/" + name)
        }
        return fileSystem
    }

    static func container(_ fileSystem: SimulatedFileSystem) throws -> ModelContainer {
        try ModelContainer(
            for: sampleTripsModels, configuration: LogStoreConfiguration(directory: directory, fileSystem: fileSystem))
    }

    /// The recipe's end state: Trip k ("Trip 100000k") was last updated by save 1,900 + k.
    static let expected = Set((0..<100).map { "Trip \(1_000_000 + $0) to Stop \(1_900 + $0)" })

    static func segmentVersions(_ fileSystem: SimulatedFileSystem, _ segments: [StoreInspection.Segment]) throws
        -> [UInt32]
    {
        try segments.map { segment in
            let bytes = fileSystem.durableBytes(at: directory + "/" + segment.fileName) ?? []
            return try SegmentHeader.decode(Array(bytes.prefix(64))).get().formatVersion
        }
    }

    @Test func aVersionTwoStoreKeepsItsModelsAndContinuesInVersionThreeSegmentsWithDictionaries() throws {
        let fileSystem = try Self.fixtureDisk()
        let container = try Self.container(fileSystem)
        let context = ModelContext(container)
        let trips = try context.fetch(FetchDescriptor<Trip>())
        #expect(Set(trips.map { "\($0.name) to \($0.destination)" }) == Self.expected)
        #expect(try context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).count == 2_001)

        // 400 saves of one Trip: more than 32 KiB of payloads, so the version-3 segment the open
        // rolled to is left early for one that begins with a dictionary.
        for number in 0..<400 {
            context.insert(
                Trip(
                    name: "New \(number)", destination: "Porto, Portugal",
                    startDate: Date(timeIntervalSince1970: Double(number) * 86_400),
                    endDate: Date(timeIntervalSince1970: Double(number + 7) * 86_400)))
            try context.save()
        }
        try #require(container.dataStore(as: LogStore.self)).close()

        let segments = try Log.inspect(directory: Self.directory, fileSystem: fileSystem).segments
        let bases = segments.map(\.baseOffset)
        #expect(bases.count == 3 && bases.first == 0 && bases.dropFirst().first == 242_901, "\(bases)")
        #expect(try Self.segmentVersions(fileSystem, segments) == [2, 3, 3])
        let log = try Log.openReadOnly(directory: Self.directory, fileSystem: fileSystem)
        #expect(try log.firstRecord(atOrAfter: bases[2], includingMarks: true)?.type == .dictionary)
        var iterator = try log.records(from: bases[2])
        var compressed = 0
        var transactions = 0
        while let record = try iterator.next() {
            guard record.type == .transaction else { continue }
            transactions += 1
            if record.usesDictionary { compressed += 1 }
        }
        #expect(transactions > 100 && compressed == transactions, "\(compressed) of \(transactions) against the dictionary")
        try log.close()

        let reopened = try Self.container(fileSystem)
        let again = try ModelContext(reopened).fetch(FetchDescriptor<Trip>())
        #expect(again.count == 500)
        #expect(Set(again.filter { $0.name.hasPrefix("Trip ") }.map { "\($0.name) to \($0.destination)" }) == Self.expected)
        try reopened.dataStore(as: LogStore.self)!.close()

        let report = try Log.verify(directory: Self.directory, fileSystem: fileSystem)
        #expect(report.problems.isEmpty, "\(report.problems)")
        let inspection = try Log.inspect(directory: Self.directory, fileSystem: fileSystem)
        #expect(inspection.formatVersion == 2, "store.meta keeps the version the store was created with")
    }
}
