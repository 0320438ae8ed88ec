import Foundation
import LogStore
import LogStoreTestSupport
import SampleTrips
import Testing

/// `container.mainContext` as SwiftData has it: one main-actor context per container, with
/// autosave on, so ported code that never calls `save()` keeps its data.
@Suite @MainActor struct MainContextTests {
    static func container(_ fileSystem: SimulatedFileSystem) throws -> ModelContainer {
        try ModelContainer(
            for: Trip.self, configurations: LogStoreConfiguration(directory: "/trips", fileSystem: fileSystem))
    }

    static func trip(_ name: String) -> Trip {
        Trip(
            name: name, destination: "Portugal", startDate: Date(timeIntervalSince1970: 1_750_000_000),
            endDate: Date(timeIntervalSince1970: 1_750_086_400))
    }

    /// Waits (bounded) for the main context's autosave to run.
    static func waitForAutosave(_ context: ModelContext) async {
        for _ in 0..<1_000 where context.hasChanges { await Task.yield() }
    }

    @Test func mainContextIsOneContext() throws {
        let container = try Self.container(SimulatedFileSystem())
        #expect(container.mainContext === container.mainContext)
        #expect(container.mainContext.autosaveEnabled)
        #expect(!ModelContext(container).autosaveEnabled)
    }

    @Test func anInsertIntoTheMainContextIsSavedWithoutSave() async throws {
        let fileSystem = SimulatedFileSystem()
        let container = try Self.container(fileSystem)
        container.mainContext.insert(Self.trip("Lisbon"))
        #expect(container.mainContext.hasChanges)
        await Self.waitForAutosave(container.mainContext)
        #expect(!container.mainContext.hasChanges)
        #expect(container.mainContext.lastAutosaveError == nil)
        // Another context, and a reopen, see it.
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<Trip>()) == 1)
        try container.dataStore(as: LogStore.self)!.close()
        #expect(
            try ModelContext(try Self.container(fileSystem)).fetch(FetchDescriptor<Trip>()).map(\.name) == ["Lisbon"])
    }

    /// SwiftData autosaves at close too: changes the main context has not saved yet are saved by
    /// `container.close()`, which then closes the store.
    @Test func closingTheContainerSavesTheMainContextsChangesAndClosesTheStore() throws {
        let fileSystem = SimulatedFileSystem()
        let container = try Self.container(fileSystem)
        container.mainContext.insert(Self.trip("Lisbon"))
        try container.close()
        #expect(!container.mainContext.hasChanges)
        try container.close()  // twice is harmless
        // A closed container answers nothing from memory.
        let fetchError = #expect(throws: LogStoreError.self) { try ModelContext(container).fetch(FetchDescriptor<Trip>()) }
        #expect(fetchError?.underlying?.code == .closed, "\(String(describing: fetchError))")
        let store = try #require(container.dataStore(as: LogStore.self))
        let historyError = #expect(throws: LogStoreError.self) {
            try store.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        }
        #expect(historyError?.description.contains("is closed") == true, "\(String(describing: historyError))")
        // The lock is released and the save is there.
        let reopened = try Self.container(fileSystem)
        #expect(try ModelContext(reopened).fetch(FetchDescriptor<Trip>()).map(\.name) == ["Lisbon"])
        try reopened.close()
    }

    @Test func changesMadeInOneTurnAreOneSave() async throws {
        let container = try Self.container(SimulatedFileSystem())
        let store = try #require(container.dataStore(as: LogStore.self))
        for name in ["Lisbon", "Porto", "Faro"] { container.mainContext.insert(Self.trip(name)) }
        await Self.waitForAutosave(container.mainContext)
        let transactions = try store.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        #expect(transactions.count == 1)
        #expect(transactions.first?.changes.count == 3)
    }

    @Test func aContextYouMakeDoesNotAutosave() async throws {
        let container = try Self.container(SimulatedFileSystem())
        let context = ModelContext(container)
        context.insert(Self.trip("Lisbon"))
        for _ in 0..<100 { await Task.yield() }
        #expect(context.hasChanges)
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<Trip>()) == 0)
    }

    @Test func aFailedAutosaveIsKept() async throws {
        var configuration = LogStoreConfiguration(directory: "/trips", fileSystem: SimulatedFileSystem())
        configuration.uniqueCollisionPolicy = .throw
        let container = try ModelContainer(for: Trip.self, configurations: configuration)
        container.mainContext.insert(Self.trip("Lisbon"))
        await Self.waitForAutosave(container.mainContext)
        container.mainContext.insert(Self.trip("Lisbon"))
        for _ in 0..<1_000 where container.mainContext.lastAutosaveError == nil { await Task.yield() }
        let error = try #require(container.mainContext.lastAutosaveError as? LogStoreError)
        #expect(error.code == .uniqueConstraintViolation)
        #expect(container.mainContext.hasChanges)
    }
}
