// The README's History snippet, verbatim between the markers but for the setup around it: if this
// stops compiling or passing, the README is wrong.
import Foundation
import LogStore
import LogStoreTestSupport
import SampleTrips
import Testing

@Test func historyReadmeSnippetRunsAsWritten() throws {
    let temporary = TemporaryDirectory("readme-history")
    let directory = temporary.path
    defer { temporary.remove() }
    let container = try ModelContainer(
        for: sampleTripsModels, configuration: LogStoreConfiguration(directory: directory))
    let context = ModelContext(container)
    let trip = Trip(
        name: "Paris", destination: "France", startDate: Date(timeIntervalSince1970: 0),
        endDate: Date(timeIntervalSince1970: 86_400))
    context.insert(trip)
    try context.save()
    let savedJSON = try JSONEncoder().encode(container.dataStore(as: LogStore.self)!.currentToken!)
    let widget = ModelContext(container)
    widget.author = "widget"
    try widget.fetch(FetchDescriptor<Trip>()).first!.destination = "Île-de-France"
    try widget.save()

    // --- README snippet begins
    // The app kept its token as JSON; the widget saved with `context.author = "widget"`.
    let saved = try JSONDecoder().decode(DefaultHistoryToken.self, from: savedJSON)
    let changes = try context.fetchHistory(
        HistoryDescriptor<DefaultHistoryTransaction>(
            predicate: #Predicate { $0.token > saved && $0.author == "widget" }))
    for transaction in changes {
        for change in transaction.changes {
            switch change {
            case .insert(let insert as DefaultHistoryInsert<Trip>): print("inserted", insert[\.name] ?? "")
            case .update(let update as DefaultHistoryUpdate<Trip>):
                print("updated", update.updatedAttributeNames, update[\.destination] ?? "")  // names and new values
            case .delete(let delete as DefaultHistoryDelete<Trip>):
                print("deleted", delete.tombstone[\.name] ?? "")  // .preserveValueOnDeletion
            default: print("changed", change.changedPersistentIdentifier)  // other models
            }
        }
    }
    let newJSON = try JSONEncoder().encode(changes.last?.token ?? saved)

    // Delete history up to a token: older tokens now throw historyTokenExpired(resumeToken:).
    let store = container.dataStore(as: LogStore.self)!
    let upTo = changes.last?.token ?? saved
    try context.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token <= upTo }))

    // Consumers hold history back until they acknowledge; retention limits keep it bounded.
    try store.registerHistoryConsumer("sync", after: upTo)
    try store.acknowledgeHistory("sync", through: upTo)

    // New transactions as they are saved (in this process).
    Task {
        for try await transaction in store.historyTail(after: upTo) { print(transaction.token) }
    }
    // --- README snippet ends

    #expect(changes.count == 1)
    #expect(try JSONDecoder().decode(DefaultHistoryToken.self, from: newJSON) == upTo)
    #expect(store.historyLowWaterMark == upTo)
    #expect(throws: LogStoreError.historyTokenExpired(resumeToken: upTo)) {
        try context.fetchHistory(
            HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token > saved }))
    }
    try store.close()
}
