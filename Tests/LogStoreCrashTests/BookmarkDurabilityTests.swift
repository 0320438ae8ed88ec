import Foundation
import LogStore
import LogStoreEngine
import LogStoreTestSupport
import Testing

/// Found by the simulator (`SimulatorTests`, seeds 1, 14 and 31 of its first run): a consumer's
/// acknowledgement or removal — a bookmark record with no sync of its own — could lie after L's
/// record, so the history deletion it allowed synced only through L and wrote its checkpoint; a
/// power cut then lost the bookmark record, and the reopened store had L past the consumer's
/// surviving, older bookmark: history the consumer was promised (D7) was gone.
@Suite struct BookmarkDurabilityTests {
    static let directory = "/bookmarks"

    static func open(_ fileSystem: SimulatedFileSystem) throws -> LogStore {
        try LogStore(
            LogStoreConfiguration(
                schema: SimulatorTests.schema, directory: directory, checkpointIntervalByteCount: 0,
                fileSystem: fileSystem))
    }

    static func save(_ store: LogStore, _ number: Int) throws -> DefaultHistoryToken {
        try store.save(
            DataStoreSaveChangesRequest(inserted: [
                DefaultSnapshot(
                    persistentIdentifier: .temporary(entityName: "Item"),
                    values: ["key": .string("k\(number)"), "value": .int(Int64(number)), "payload": .string("")])
            ])
        ).token!
    }

    @Test func bookmarkRecordsAreDurableBeforeTheDeletionsCheckpoint() throws {
        let fileSystem = SimulatedFileSystem()
        let store = try Self.open(fileSystem)
        let tokens = try (0..<3).map { try Self.save(store, $0) }
        try store.registerHistoryConsumer("mirror", after: tokens[0])
        try store.acknowledgeHistory("mirror", through: tokens[2])
        let compaction = try store.deleteHistory(HistoryDescriptor(), force: false)
        #expect(compaction.lowWaterMark == tokens[2])
        let cut = fileSystem.powerCut(persistingAllUnsynced: false)
        try? store.close()

        let reopened = try Self.open(cut)
        defer { try? reopened.close() }
        #expect(reopened.historyLowWaterMark == tokens[2])
        #expect(reopened.historyConsumers.map(\.name) == ["mirror"])
        #expect(reopened.historyConsumers.first?.token == tokens[2], "the acknowledgement that let L move survives")
    }

    @Test func aConsumersRemovalIsDurableBeforeTheDeletionItAllowed() throws {
        let fileSystem = SimulatedFileSystem()
        let store = try Self.open(fileSystem)
        let tokens = try (0..<3).map { try Self.save(store, $0) }
        try store.registerHistoryConsumer("mirror", after: tokens[0])
        #expect(try store.deleteHistory(HistoryDescriptor(), force: false).lowWaterMark == tokens[0])
        try store.unregisterHistoryConsumer("mirror")
        #expect(try store.deleteHistory(HistoryDescriptor(), force: false).lowWaterMark == tokens[2])
        let cut = fileSystem.powerCut(persistingAllUnsynced: false)
        try? store.close()

        let reopened = try Self.open(cut)
        defer { try? reopened.close() }
        #expect(reopened.historyLowWaterMark == tokens[2])
        #expect(reopened.historyConsumers.isEmpty, "the removal that let L pass the bookmark survives")
    }
}
