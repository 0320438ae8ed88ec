import Foundation
import LogStore
import LogStoreTestSupport
import SampleTrips
import Synchronization
import Testing

/// What only the JSON archive store has: its file. The context behaviour it shares with LogStore
/// is in ContextTests, which runs against both.
@Suite struct ArchiveStoreTests {
    /// A temporary directory removed at the end of the test.
    final class Directory {
        let temporary = TemporaryDirectory("archive")
        var path: String { temporary.path }
        var file: String { path + "/store/trips.json" }
        func names() throws -> [String] {
            try FileManager.default.contentsOfDirectory(atPath: path + "/store").sorted()
        }
    }

    func open(_ path: String) throws -> ModelContainer {
        try ModelContainer(for: sampleTripsModels, configuration: ArchiveStoreConfiguration(path: path))
    }

    func json(_ path: String) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
    }

    /// An `await save()`, then — before it resumes — a synchronous save of a later change to the
    /// same attribute: the file ends with the later value. (Each asynchronous save ran on a
    /// `Thread` of its own, and the synchronous save usually took the file first.)
    @available(macOS 26.0, *)
    @MainActor @Test func savesAreWrittenInTheOrderTheyWereCalled() async throws {
        func saveSynchronously(_ context: ModelContext) throws { try context.save() }
        let directory = Directory()
        let container = try open(directory.file)
        let context = ModelContext(container)
        let trip = Trip(name: "ordered", destination: "zero", startDate: day(1), endDate: day(2))
        context.insert(trip)
        try saveSynchronously(context)
        for round in 0..<20 {
            trip.destination = "async \(round)"
            let first = Task.immediate { @MainActor in try await context.save() }
            trip.destination = "sync \(round)"
            try saveSynchronously(context)
            try await first.value
            let saved = try ModelContext(container).fetch(FetchDescriptor<Trip>()).first { $0.name == "ordered" }
            #expect(saved?.destination == "sync \(round)")
        }
    }

    @Test func theFileIsOneJSONDocumentWithTheStoreIdentifierAndSnapshotsInInsertionOrder() throws {
        let directory = Directory()
        let container = try open(directory.file)
        let store = try #require(container.dataStore(as: ArchiveStore.self))
        #expect(try directory.names() == ["trips.json"])
        #expect(try json(directory.file)["snapshots"] as? [Any] != nil)

        let context = ModelContext(container)
        let trip = Trip(name: "Lisbon", destination: "Portugal", startDate: day(1), endDate: day(3))
        trip.livingAccommodation = LivingAccommodation(address: "Rua 1", placeName: "Casa")
        context.insert(trip)
        context.insert(Trip(name: "Porto", destination: "Portugal", startDate: day(5), endDate: day(6)))
        try context.save()
        #expect(trip.persistentModelID.storeIdentifier == store.identifier)

        let document = try json(directory.file)
        #expect(document["format"] as? Int == ArchiveStore.formatVersion)
        #expect(document["storeIdentifier"] as? String == store.identifier)
        let snapshots = try #require(document["snapshots"] as? [[String: Any]])
        #expect(snapshots.count == 3)
        let names = snapshots.compactMap { ($0["values"] as? [String: Any])?["name"] as? [String: Any] }.compactMap {
            $0["string"] as? String
        }
        #expect(names == ["Lisbon", "Porto"])
        // No temporary files are left behind.
        #expect(try directory.names() == ["trips.json"])

        // Reopening keeps the identifier.
        let reopened = try #require(try open(directory.file).dataStore(as: ArchiveStore.self))
        #expect(reopened.identifier == store.identifier)
    }

    @Test func saveResultsRemapIdentifiersAndCarryNoToken() throws {
        let directory = Directory()
        let store = try #require(try open(directory.file).dataStore(as: ArchiveStore.self))
        let temporary = PersistentIdentifier.temporary(entityName: "LivingAccommodation")
        let result = try store.save(
            DataStoreSaveChangesRequest(inserted: [
                DefaultSnapshot(
                    persistentIdentifier: temporary,
                    values: ["address": .string("Rua 1"), "placeName": .string("Casa"), "isConfirmed": .bool(true)])
            ]))
        let permanent = try #require(result.remappedIdentifiers[temporary])
        #expect(permanent.storeIdentifier == store.identifier)
        #expect(result.storeIdentifier == store.identifier)
        #expect(result.token == nil)
        #expect(try store.snapshot(for: permanent)?.values["placeName"] == .string("Casa"))
        // A save that changes nothing writes nothing.
        let before = try Data(contentsOf: URL(fileURLWithPath: directory.file))
        _ = try store.save(
            DataStoreSaveChangesRequest(updated: [
                DefaultSnapshot(
                    persistentIdentifier: permanent,
                    values: ["placeName": .string("Casa")])
            ]))
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory.file)) == before)
    }

    @Test func aRefusedSaveLeavesTheFileUntouched() throws {
        let directory = Directory()
        let container = try open(directory.file)
        let context = ModelContext(container)
        context.insert(Trip(name: "Lisbon", destination: "Portugal", startDate: day(1), endDate: day(3)))
        try context.save()
        let before = try Data(contentsOf: URL(fileURLWithPath: directory.file))
        let store = try #require(container.dataStore(as: ArchiveStore.self))
        #expect(throws: LogStoreError.unknownEntity("Spaceship")) {
            try store.save(
                DataStoreSaveChangesRequest(inserted: [
                    DefaultSnapshot(persistentIdentifier: .temporary(entityName: "Spaceship"), values: [:])
                ]))
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory.file)) == before)
        #expect(try directory.names() == ["trips.json"])
    }

    @Test func eraseDeletesTheFile() throws {
        let directory = Directory()
        let container = try open(directory.file)
        let store = try #require(container.dataStore(as: ArchiveStore.self))
        let context = ModelContext(container)
        context.insert(Trip(name: "Lisbon", destination: "Portugal", startDate: day(1), endDate: day(3)))
        try context.save()

        try store.erase()
        #expect(!FileManager.default.fileExists(atPath: directory.file))
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<Trip>()) == 0)
        try store.erase()

        // The store stays usable: the next save writes a new file under the same identifier.
        let again = ModelContext(container)
        let porto = Trip(name: "Porto", destination: "Portugal", startDate: day(5), endDate: day(6))
        again.insert(porto)
        try again.save()
        #expect(try json(directory.file)["storeIdentifier"] as? String == store.identifier)
        #expect(try ModelContext(container).fetch(FetchDescriptor<Trip>()).map(\.name) == ["Porto"])
    }

    @Test func openRemovesItsOwnLeftoverTemporaryFilesOnly() throws {
        let directory = Directory()
        _ = try open(directory.file)
        let store = directory.path + "/store/"
        _ = FileManager.default.createFile(
            atPath: store + ".trips.json.\(UUID().uuidString).tmp", contents: Data("{".utf8))
        _ = FileManager.default.createFile(atPath: store + "notes.txt", contents: Data("keep".utf8))
        _ = try open(directory.file)
        #expect(try directory.names() == ["notes.txt", "trips.json"])
    }

    @Test func unreadableFilesAreClearErrors() throws {
        let directory = Directory()
        _ = try open(directory.file)
        try Data("{\"format\":1,".utf8).write(to: URL(fileURLWithPath: directory.file))
        #expect {
            _ = try open(directory.file)
        } throws: { error in
            guard case .corruptArchive(let path, _)? = error as? ArchiveStoreError else { return false }
            return path == URL(fileURLWithPath: directory.file).standardizedFileURL.path
        }

        try Data("{\"format\":2,\"storeIdentifier\":\"x\",\"snapshots\":[],\"more\":{}}".utf8).write(
            to: URL(fileURLWithPath: directory.file))
        #expect {
            _ = try open(directory.file)
        } throws: { error in
            guard case .unsupportedFormat(_, 2)? = error as? ArchiveStoreError else { return false }
            return true
        }
    }

    @Test func aFileReplacedByAnotherStoreIsRefused() throws {
        let directory = Directory()
        let first = try #require(try open(directory.file).dataStore(as: ArchiveStore.self))
        let other = directory.path + "/other.json"
        let second = try #require(try open(other).dataStore(as: ArchiveStore.self))
        try FileManager.default.removeItem(atPath: directory.file)
        try FileManager.default.copyItem(atPath: other, toPath: directory.file)
        #expect(
            throws: ArchiveStoreError.foreignArchive(
                path: first.path, expected: first.identifier, found: second.identifier)
        ) {
            _ = try first.fetchCount(DataStoreFetchRequest(descriptor: FetchDescriptor<Trip>()))
        }
    }

    @Test func nonFiniteDoublesRoundTrip() throws {
        let directory = Directory()
        let schema = Schema([Schema.Entity("Reading", attributes: [.init("value", .double)])])
        let store = try ArchiveStore(ArchiveStoreConfiguration(schema: schema, path: directory.file))
        let values: [Double] = [1.5, .infinity, -.infinity, .nan, -0.0, .leastNonzeroMagnitude]
        let temporaries = values.map { _ in PersistentIdentifier.temporary(entityName: "Reading") }
        let result = try store.save(
            DataStoreSaveChangesRequest(
                inserted: zip(temporaries, values).map {
                    DefaultSnapshot(persistentIdentifier: $0, values: ["value": .double($1)])
                }))
        let reopened = try ArchiveStore(ArchiveStoreConfiguration(schema: schema, path: directory.file))
        for (temporary, value) in zip(temporaries, values) {
            let stored = try reopened.snapshot(for: try #require(result.remappedIdentifiers[temporary]))?.values[
                "value"]
            guard case .double(let read)? = stored else {
                Issue.record("\(value) came back as \(String(describing: stored))")
                continue
            }
            #expect(read.bitPattern == value.bitPattern || (read.isNaN && value.isNaN), "\(value)")
        }
    }

    @Test func concurrentSavesFromTwoStoresOnOneFileLoseNothing() throws {
        let directory = Directory()
        let schema = Schema([Schema.Entity("Reading", attributes: [.init("value", .int)])])
        let stores = [
            try ArchiveStore(ArchiveStoreConfiguration(schema: schema, path: directory.file, isDurable: false)),
            try ArchiveStore(ArchiveStoreConfiguration(schema: schema, path: directory.file, isDurable: false)),
        ]
        #expect(stores[0].identifier == stores[1].identifier)
        let failures = Mutex(0)
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for index in 0..<10 {
                let snapshot = DefaultSnapshot(
                    persistentIdentifier: .temporary(entityName: "Reading"),
                    values: ["value": .int(Int64(worker * 100 + index))])
                do { _ = try stores[worker % 2].save(DataStoreSaveChangesRequest(inserted: [snapshot])) } catch {
                    failures.withLock { $0 += 1 }
                }
            }
        }
        #expect(failures.withLock { $0 } == 0)
        let all = try stores[0].allSnapshots()["Reading"] ?? []
        #expect(Set(all.map { $0.values["value"] }).count == 80)
    }
}
