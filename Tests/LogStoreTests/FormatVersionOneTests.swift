import Foundation
import LogStore
import LogStoreEngine
import LogStoreTestSupport
import SampleTrips
import Testing

/// A store written by the format-version-1 build (`Fixtures/v1-demo`: `logstore demo` at
/// 75575ba, its log trimmed of preallocated zeros; `v1-demo-replay.json` is what that build's
/// `logstore replay` printed) opens with today's build, keeps its models, and takes new saves in a
/// version-2 segment (DECISIONS D12).
@Suite struct FormatVersionOneTests {
    static let directory = "/v1-demo"
    static var fixtures: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")
    }

    static func fixtureDisk() throws -> SimulatedFileSystem {
        let fileSystem = SimulatedFileSystem()
        let source = fixtures.appendingPathComponent("v1-demo")
        for name in try FileManager.default.contentsOfDirectory(atPath: source.path) {
            try fileSystem.setBytes(
                Array(try Data(contentsOf: source.appendingPathComponent(name))), at: directory + "/" + name)
        }
        return fileSystem
    }

    /// Trip names and destinations as the version-1 build's replay printed them.
    static func expectedTrips() throws -> Set<String> {
        let data = try Data(contentsOf: fixtures.appendingPathComponent("v1-demo-replay.json"))
        let json = try JSONSerialization.jsonObject(with: data) as! [String: Any]
        let trips = (json["entities"] as! [String: Any])["Trip"] as! [[String: Any]]
        return Set(
            trips.map { trip in
                let values = trip["values"] as! [String: Any]
                let name = (values["name"] as! [String: Any])["string"] as! String
                let destination = (values["destination"] as! [String: Any])["string"] as! String
                return "\(name) in \(destination)"
            })
    }

    static func container(_ fileSystem: SimulatedFileSystem) throws -> ModelContainer {
        try ModelContainer(
            for: sampleTripsModels, configuration: LogStoreConfiguration(directory: directory, fileSystem: fileSystem))
    }

    @Test func aVersionOneStoreKeepsItsModelsAndTakesNewSavesInAVersionTwoSegment() throws {
        let fileSystem = try Self.fixtureDisk()
        let expected = try Self.expectedTrips()
        #expect(expected.count == 2)

        let container = try Self.container(fileSystem)
        let context = ModelContext(container)
        let trips = try context.fetch(FetchDescriptor<Trip>())
        #expect(Set(trips.map { "\($0.name) in \($0.destination)" }) == expected)
        #expect(trips.allSatisfy { $0.livingAccommodation != nil })
        #expect(trips.map(\.bucketList.count).sorted() == [0, 2])

        let added = Trip(
            name: "Porto", destination: "Portugal", startDate: Date(timeIntervalSince1970: 0),
            endDate: Date(timeIntervalSince1970: 86_400))
        context.insert(added)
        try context.save()
        try container.dataStore(as: LogStore.self)!.close()
        let segments = try Log.inspect(directory: Self.directory, fileSystem: fileSystem).segments
        // New saves go to a version-2 segment at the old end. The version-1 segment, sealed by that
        // roll, lies wholly below the demo's history low-water mark (its checkpoint at 1691), so
        // history compaction may delete it: only the last segment is certain to stay.
        #expect(segments.last?.baseOffset == 1691, "new saves go to a version-2 segment")
        #expect(segments.last?.recordCount == 1)
        #expect(segments.map(\.baseOffset).allSatisfy { $0 == 0 || $0 == 1691 })

        let reopened = try Self.container(fileSystem)
        let again = try ModelContext(reopened).fetch(FetchDescriptor<Trip>())
        #expect(Set(again.map { "\($0.name) in \($0.destination)" }) == expected.union(["Porto in Portugal"]))
        try reopened.dataStore(as: LogStore.self)!.close()

        let report = try Log.verify(directory: Self.directory, fileSystem: fileSystem)
        #expect(report.problems.isEmpty, "\(report.problems)")
        let inspection = try Log.inspect(directory: Self.directory, fileSystem: fileSystem)
        #expect(inspection.formatVersion == 1, "store.meta keeps the version the store was created with")
    }
}
