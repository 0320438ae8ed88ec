import Foundation
import LogStoreEngine
import LogStoreTestSupport
import SampleTrips
import Testing

@testable import LogStore

/// Regression tests from the crash-safety review of the store layer.
@Suite struct StoreFailureTests {
    /// In `.none`/`.batched` mode a save is published at write; after a failed sync cuts the log
    /// back, the store serves exactly what the log holds.
    @Test func afterAFailedSyncInNoneModeTheStoreServesOnlyWhatTheLogHolds() throws {
        let fileSystem = SimulatedFileSystem()
        let (container, store) = try CheckpointTests.open(fileSystem, durability: .none)
        let context = ModelContext(container)
        context.insert(Trip(name: "durable", destination: "", startDate: Date(), endDate: Date()))
        try context.save()
        try store.log.sync()
        fileSystem.failSync(path: .suffix(".log"))
        context.insert(Trip(name: "cut back", destination: "", startDate: Date(), endDate: Date()))
        try context.save()  // returns after the write in .none mode
        #expect(throws: (any Error).self) { try store.log.sync() }  // fail-stop: cut back to the durable end
        #expect(store.allSnapshots()["Trip"]?.map { $0["name"] } == [.string("durable")])
        #expect((store.currentToken?.offset ?? .max) < store.logEndOffset)
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<Trip>()) == 1)
        try? store.close()
    }

    /// A schema record that checks out under its CRC but repeats an entity id is refused as
    /// malformed instead of crashing the process.
    @Test func aSchemaTableWithRepeatedIdsIsRefused() throws {
        var table = try #require(
            try SchemaTable().extended(
                toCover: Schema([
                    Schema.Entity("A", attributes: [.init("x", .int)]),
                    Schema.Entity("B", attributes: [.init("y", .int)]),
                ]))?.table)
        table.entities[1].id = table.entities[0].id
        #expect(throws: ByteReaderError.self) { _ = try SchemaTable.decode(table.encoded()) }
        var attributes = try #require(
            try SchemaTable().extended(
                toCover: Schema([
                    Schema.Entity("A", attributes: [.init("x", .int), .init("y", .int)])
                ]))?.table)
        attributes.entities[0].attributes[1].id = attributes.entities[0].attributes[0].id
        #expect(throws: ByteReaderError.self) { _ = try SchemaTable.decode(attributes.encoded()) }
    }
}
