import Foundation
import LogStore
import LogStoreTestSupport
import Testing

/// SwiftData's `ModelConfiguration` spellings on LogStore.
@Suite struct ModelConfigurationTests {
    @Test func anInMemoryStoreWorksAndIsGoneAfterClose() throws {
        let container = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
        let store = try #require(container.dataStore(as: LogStore.self))
        let directory = store.configuration.directory
        let context = ModelContext(container)
        context.insert(Trip(name: "Lisbon", destination: "Portugal"))
        try context.save()
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<Trip>()) == 1)
        #expect(FileManager.default.fileExists(atPath: directory))
        try store.close()
        #expect(!FileManager.default.fileExists(atPath: directory))
    }

    @Test func aURLConfigurationOpensThatDirectory() throws {
        let temporary = TemporaryDirectory("model-configuration")
        defer { temporary.remove() }
        let url = URL(fileURLWithPath: temporary.appending("Trips.store"))
        let configuration = ModelConfiguration(url: url)
        #expect(configuration.url.path == url.path)
        let container = try ModelContainer(for: Trip.self, configurations: configuration)
        let context = ModelContext(container)
        context.insert(Trip(name: "Lisbon", destination: "Portugal"))
        try context.save()
        try container.dataStore(as: LogStore.self)!.close()
        let reopened = try ModelContainer(for: Schema([Trip.self]), configurations: [ModelConfiguration(url: url)])
        #expect(try ModelContext(reopened).fetch(FetchDescriptor<Trip>()).map(\.name) == ["Lisbon"])
    }

    @Test func aConfigurationThatDisallowsSavesRefusesThem() throws {
        let temporary = TemporaryDirectory("model-configuration")
        defer { temporary.remove() }
        let url = URL(fileURLWithPath: temporary.appending("Trips.store"))
        _ = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(url: url))
        let container = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(url: url, allowsSave: false))
        let context = ModelContext(container)
        context.insert(Trip(name: "Lisbon", destination: "Portugal"))
        #expect(throws: LogStoreError.self) { try context.save() }
    }

    @Test func theDefaultStoreLivesUnderXDGDataHome() {
        let directory = ModelConfiguration().directory
        #expect(directory.hasSuffix("/" + ProcessInfo.processInfo.processName + "/default.store"))
        #expect(ModelConfiguration("Trips").directory.hasSuffix("/Trips.store"))
    }
}
