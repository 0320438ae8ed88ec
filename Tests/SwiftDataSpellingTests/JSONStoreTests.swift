import Foundation
import LogStore
import LogStoreTestSupport
import Testing

/// The WWDC24 session's JSON store through `ModelContainer`/`ModelContext`: edits, reopen, and
/// same-save relationships — verbatim (with the session's limitation) and in the SDK's form.
@Suite struct JSONStoreTests {
    static let start = Date(timeIntervalSince1970: 1_750_000_000)

    @Test func theSessionsStoreKeepsEditsAndReopens() throws {
        let temporary = TemporaryDirectory("json-store")
        defer { temporary.remove() }
        try FileManager.default.createDirectory(atPath: temporary.path, withIntermediateDirectories: true)
        let fileURL = URL(fileURLWithPath: temporary.appending("trips.json"))
        let schema = Schema([Trip.self])
        let configuration = JSONStoreConfiguration(name: "JSONStore", schema: schema, fileURL: fileURL)
        let container = try ModelContainer(for: schema, configurations: [configuration])
        let context = ModelContext(container)
        context.insert(Trip(name: "Lisbon", destination: "Portugal", startDate: Self.start, endDate: Self.start))
        context.insert(Trip(name: "Kyoto", destination: "Japan", startDate: Self.start, endDate: Self.start))
        try context.save()

        // An edit sends the whole model: the session's store replaces its snapshot and keeps
        // every attribute (it lost all but the changed ones when updates carried only changes).
        let trips = try context.fetch(FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.name)]))
        trips[0].destination = "Honshu"
        try context.save()

        let reopened = try ModelContainer(for: schema, configurations: [configuration])
        let fetched = try ModelContext(reopened).fetch(FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.name)]))
        #expect(fetched.map(\.name) == ["Kyoto", "Lisbon"])
        #expect(fetched.map(\.destination) == ["Honshu", "Portugal"])
        #expect(fetched.allSatisfy { $0.startDate == Self.start })
        // The store's fetch returns every entity's snapshots; the context keeps only Trips.
        #expect(try ModelContext(reopened).fetchCount(FetchDescriptor<Trip>(predicate: #Predicate { _ in true })) == 2)
    }

    /// The session's `save` uses the one-argument `copy`: a trip and its accommodation inserted in
    /// one save refer to each other by temporary identifiers in the file. Fetching then fails
    /// with a clear error naming the reference — and leaves nothing half-filled behind.
    @Test func theSessionsStoreLeavesSameSaveReferencesTemporary() throws {
        let temporary = TemporaryDirectory("json-store")
        defer { temporary.remove() }
        try FileManager.default.createDirectory(atPath: temporary.path, withIntermediateDirectories: true)
        let schema = Schema([Trip.self])
        let configuration = JSONStoreConfiguration(
            name: "JSONStore", schema: schema, fileURL: URL(fileURLWithPath: temporary.appending("trips.json")))
        let container = try ModelContainer(for: schema, configurations: [configuration])
        let context = ModelContext(container)
        let trip = Trip(name: "Lisbon", destination: "Portugal", startDate: Self.start, endDate: Self.start)
        trip.livingAccommodation = LivingAccommodation(address: "Rua 1", placeName: "Casa", isConfirmed: false)
        context.insert(trip)
        try context.save()

        let reader = ModelContext(container)
        #expect(throws: ModelError.self) { try reader.fetch(FetchDescriptor<Trip>()) }
        #expect(throws: ModelError.self) { try reader.fetch(FetchDescriptor<Trip>()) }  // again: no stale half-models
    }

    @Test func theSDKsFormMakesSameSaveReferencesPermanent() throws {
        let temporary = TemporaryDirectory("json-store")
        defer { temporary.remove() }
        try FileManager.default.createDirectory(atPath: temporary.path, withIntermediateDirectories: true)
        let schema = Schema([Trip.self])
        let configuration = RemappingJSONStoreConfiguration(
            name: "JSONStore", schema: schema, fileURL: URL(fileURLWithPath: temporary.appending("trips.json")))
        let container = try ModelContainer(for: schema, configurations: [configuration])
        let context = ModelContext(container)
        let trip = Trip(name: "Lisbon", destination: "Portugal", startDate: Self.start, endDate: Self.start)
        trip.livingAccommodation = LivingAccommodation(address: "Rua 1", placeName: "Casa", isConfirmed: false)
        trip.bucketList = [BucketListItem(title: "Tram 28", details: "", hasReservation: false, isInPlan: true)]
        context.insert(trip)
        try context.save()

        let reopened = try ModelContainer(for: schema, configurations: [configuration])
        let fetched = try #require(try ModelContext(reopened).fetch(FetchDescriptor<Trip>()).first)
        #expect(fetched.livingAccommodation?.placeName == "Casa")
        #expect(fetched.livingAccommodation?.trip === fetched)
        #expect(fetched.bucketList.map(\.title) == ["Tram 28"])
    }
}
