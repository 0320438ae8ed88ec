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

    /// Found by the simulator (seed 5664): a sync failing in the background (the batched
    /// syncer's) cut back a save acknowledged after the newest checkpoint, taking the written end
    /// back to that checkpoint's X. `checkpoint()` then saw "nothing written since X" and returned
    /// X — success, which promises that everything written before it is durable — while the save
    /// was gone. A checkpoint on a fail-stopped store must throw.
    @Test func aCheckpointAfterAFailStopThrowsRatherThanCallingTheCutSaveDurable() throws {
        let fileSystem = SimulatedFileSystem()
        let (container, store) = try CheckpointTests.open(fileSystem, durability: .none)
        let context = ModelContext(container)
        context.insert(Trip(name: "durable", destination: "", startDate: Date(), endDate: Date()))
        try context.save()
        let x = try store.checkpoint()
        #expect(store.newestCheckpointOffset == x)
        fileSystem.failSync(path: .suffix(".log"))
        context.insert(Trip(name: "cut back", destination: "", startDate: Date(), endDate: Date()))
        try context.save()  // acknowledged after the write in .none mode
        // The failing sync (here asked for directly; in the simulator the batched syncer ran it)
        // cuts the log back to X.
        #expect(throws: (any Error).self) { try store.log.sync() }
        #expect(store.log.writtenEnd == x)
        let error = #expect(throws: LogStoreError.self) { try store.checkpoint() }
        #expect(error?.code == .readOnly)
        #expect(store.newestCheckpointOffset == x)
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
