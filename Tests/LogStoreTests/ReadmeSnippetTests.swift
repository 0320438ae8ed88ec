// The README's four-step usage and its "Queries, uniqueness and time travel" section, verbatim but
// for the type name, the directory and the expectations: if this stops compiling or passing, the
// README is wrong.
import Foundation
import LogStore
import LogStoreTestSupport
import SampleTrips
import Testing

// 1. Declare a model, as in SwiftData.
@Model
final class ReadmeTrip {
    #Unique<ReadmeTrip>([\.name, \.startDate])  // a colliding insert updates the stored trip

    @Attribute(.preserveValueOnDeletion) var name: String
    var destination: String
    var startDate: Date

    init(name: String, destination: String, startDate: Date) {
        self.name = name
        self.destination = destination
        self.startDate = startDate
    }
}

@Test func readmeSnippetRunsAsWritten() throws {
    let temporary = TemporaryDirectory("readme")
    let directory = temporary.path
    defer { temporary.remove() }
    // 2. Open a container on a store directory (created when missing).
    let container = try ModelContainer(
        for: ReadmeTrip.self,
        configurations: LogStoreConfiguration(directory: directory))

    // 3. Insert and save through a context: one save, one durable transaction record.
    let context = ModelContext(container)
    context.insert(ReadmeTrip(name: "Lisbon", destination: "Portugal", startDate: .now))
    try context.save()

    // 4. Fetch with Foundation's #Predicate and SortDescriptor.
    var descriptor = FetchDescriptor<ReadmeTrip>(
        predicate: #Predicate { $0.destination == "Portugal" },
        sortBy: [SortDescriptor(\.startDate)])
    descriptor.fetchLimit = 10
    let trips = try context.fetch(descriptor)
    #expect(trips.map(\.name) == ["Lisbon"])
    #expect(container.schema.entity(named: "ReadmeTrip")?.uniquenessConstraints == [["name", "startDate"]])
}

@Test func readmeQueriesSectionRunsAsWritten() throws {
    let temporary = TemporaryDirectory("readme-queries")
    let directory = temporary.path
    defer { temporary.remove() }

    var configuration = LogStoreConfiguration(directory: directory)
    configuration.uniqueCollisionPolicy = .upsert  // the default; .throw refuses a colliding insert
    let container = try ModelContainer(for: sampleTripsModels, configuration: configuration)
    let store = container.dataStore(as: LogStore.self)!
    let context = ModelContext(container)

    let start = Date(timeIntervalSince1970: 1_750_000_000)
    let lisbon = Trip(name: "Lisbon", destination: "Portugal", startDate: start, endDate: start + 4 * 86_400)
    lisbon.bucketList = [BucketListItem(title: "Tram 28", details: "ride it end to end")]
    lisbon.livingAccommodation = LivingAccommodation(address: "Rua Augusta 1", placeName: "Casa")
    context.insert(lisbon)
    try context.save()
    let afterFirstSave = store.currentToken!

    // A #Predicate fetch with a sort and a limit: the store evaluates all three itself.
    let country = "Portugal"
    var descriptor = FetchDescriptor<Trip>(
        predicate: #Predicate { $0.destination == country && $0.name.contains("is") },
        sortBy: [SortDescriptor(\.startDate, order: .reverse)])
    descriptor.fetchLimit = 5
    let trips = try context.fetch(descriptor)
    #expect(trips.map(\.name) == ["Lisbon"])

    // Large fetches a batch at a time.
    var titles: [String] = []
    try context.enumerate(FetchDescriptor<BucketListItem>(), batchSize: 5000) { item in titles.append(item.title) }
    #expect(titles == ["Tram 28"])

    // Upsert: the same name and dates update the stored trip (same identifier, new destination).
    context.insert(
        Trip(name: "Lisbon", destination: "Portugal (Alfama)", startDate: start, endDate: start + 4 * 86_400))
    try context.save()
    #expect(try ModelContext(container).fetch(FetchDescriptor<Trip>()).map(\.destination) == ["Portugal (Alfama)"])

    // Time travel: the models exactly as they were right after the first save.
    let then = try LogStore.replay(directory: directory, until: .token(afterFirstSave))
    #expect(then.entity(named: "Trip")!.rows.map { $0["destination"]! } == [.string("Portugal")])
}
