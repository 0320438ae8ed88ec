import Foundation
import LogStoreTestSupport
import SampleTrips
import Testing

@testable import LogStore

/// What the demo's booking ran into (found while building `logstore demo`): a context saving a
/// change to one property of a model it holds with a stale value in another property wrote the
/// stale value back, undoing another context's save — the context sends whole models (the
/// `DataStore` contract) and LogStore recorded every value that differed from its own. Now the
/// request names the changed attributes and LogStore records only those (D11 "Lost updates";
/// last writer wins per attribute, as Core Data's property-trump merge policy).
@Suite struct StaleModelSaveTests {
    static func container() throws -> ModelContainer {
        let configuration = LogStoreConfiguration(directory: "/stale", fileSystem: SimulatedFileSystem())
        return try ModelContainer(for: sampleTripsModels + [QueryItem.self], configuration: configuration)
    }

    @Test func aSaveOfOnePropertyDoesNotWriteBackAnotherContextsChange() throws {
        let container = try Self.container()
        let app = ModelContext(container)
        let start = Date(timeIntervalSince1970: 1_777_852_800)
        let trip = SampleTrips.Trip(
            name: "Reykjavík", destination: "Iceland", startDate: start, endDate: start.addingTimeInterval(86_400))
        app.insert(trip)
        try app.save()

        let other = ModelContext(container)
        let copy = try #require(try other.fetch(FetchDescriptor<SampleTrips.Trip>()).first)
        copy.destination = "Iceland (Ring Road)"
        try other.save()

        // `app` still holds destination "Iceland"; it changes the name and the accommodation.
        trip.name = "Reykjavík and around"
        trip.livingAccommodation = LivingAccommodation(address: "Laugavegur 11", placeName: "Hótel Borg")
        try app.save()

        let saved = try #require(try ModelContext(container).fetch(FetchDescriptor<SampleTrips.Trip>()).first)
        #expect(saved.destination == "Iceland (Ring Road)", "the stale destination was written back")
        #expect(saved.name == "Reykjavík and around")
        #expect(saved.livingAccommodation?.placeName == "Hótel Borg")
        // Both contexts' changes of the same attribute: the last save wins.
        copy.name = "Ring Road"
        try other.save()
        #expect(try ModelContext(container).fetch(FetchDescriptor<SampleTrips.Trip>()).first?.name == "Ring Road")
    }

    /// Hand-written models report no changes; the context finds them by comparing with the values
    /// it last saw, and names only those.
    @Test func aHandWrittenModelSendsOnlyWhatDiffersFromWhatTheContextSaw() throws {
        let container = try Self.container()
        let app = ModelContext(container)
        let item = QueryItem()
        item.name = "first"
        item.count = 1
        app.insert(item)
        try app.save()

        let other = ModelContext(container)
        let copy = try #require(try other.fetch(FetchDescriptor<QueryItem>()).first)
        copy.name = "renamed elsewhere"
        try other.save()

        item.count = 2
        try app.save()
        let saved = try #require(try ModelContext(container).fetch(FetchDescriptor<QueryItem>()).first)
        #expect(saved.name == "renamed elsewhere")
        #expect(saved.count == 2)
    }
}
