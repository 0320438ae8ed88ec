// The README's four-step usage, verbatim but for the type name and the directory: if this stops
// compiling or passing, the README is wrong.
import Foundation
import LogStore
import Testing


// 1. Declare a model: a final class with its stored properties listed by key path.
final class ReadmeTrip: PersistentModel {
    static let schemaProperties: [ModelProperty<ReadmeTrip>] = [
        .attribute("name", \.name, options: [.preserveValueOnDeletion]),
        .attribute("destination", \.destination),
        .attribute("startDate", \.startDate),
    ]
    static let uniquenessConstraints = [["name", "startDate"]]   // #Unique: a collision updates

    let modelState = ModelState()
    var name = ""
    var destination = ""
    var startDate = Date()
    required init() {}
}


@Test func readmeSnippetRunsAsWritten() throws {
    let directory = NSTemporaryDirectory() + "readme-\(UUID())"
    defer { try? FileManager.default.removeItem(atPath: directory) }
    // 2. Open a container on a store directory (created when missing).
    let container = try ModelContainer(for: ReadmeTrip.self,
                                       configurations: LogStoreConfiguration(directory: directory))
    
    // 3. Insert and save through a context: one save, one durable transaction record.
    let context = ModelContext(container)
    let trip = ReadmeTrip()
    trip.name = "Lisbon"
    trip.destination = "Portugal"
    context.insert(trip)
    try context.save()
    
    // 4. Fetch with Foundation's #Predicate and SortDescriptor.
    var descriptor = FetchDescriptor<ReadmeTrip>(predicate: #Predicate { $0.destination == "Portugal" },
                                           sortBy: [SortDescriptor(\.startDate)])
    descriptor.fetchLimit = 10
    let trips = try context.fetch(descriptor)
    #expect(trips.map(\.name) == ["Lisbon"])
}
