import Foundation
import LogStoreTestSupport
import Observation
import SampleTrips
import Synchronization
import Testing

@testable import LogStore

/// A fetch refreshes the registered models it returns (DECISIONS.md D11): attributes without a
/// pending change take the stored values that another context (or, through the same path, another
/// process) saved; pending changes stay and win at the next save.
@Suite struct FetchRefreshTests {
    static func container() throws -> ModelContainer {
        let configuration = LogStoreConfiguration(directory: "/refresh", fileSystem: SimulatedFileSystem())
        return try ModelContainer(for: sampleTripsModels + [QueryItem.self], configuration: configuration)
    }

    static let start = Date(timeIntervalSince1970: 1_777_852_800)

    @Test func aFetchShowsAnotherContextsSaveInTheRegisteredInstance() throws {
        let container = try Self.container()
        let app = ModelContext(container)
        let trip = SampleTrips.Trip(name: "Oslo", destination: "Norway", startDate: Self.start, endDate: Self.start)
        app.insert(trip)
        try app.save()

        let widget = ModelContext(container)
        let copy = try #require(try widget.fetch(FetchDescriptor<SampleTrips.Trip>()).first)
        copy.destination = "Norway (fjords)"
        copy.livingAccommodation = LivingAccommodation(address: "Karl Johans gate 31", placeName: "Grand Hotel")
        try widget.save()

        #expect(trip.destination == "Norway", "nothing changes before the app fetches")
        let fetched = try app.fetch(FetchDescriptor<SampleTrips.Trip>())
        #expect(fetched.count == 1 && fetched[0] === trip, "the registered instance is returned")
        #expect(trip.destination == "Norway (fjords)")
        #expect(trip.livingAccommodation?.placeName == "Grand Hotel")
        #expect(!app.hasChanges, "a refresh is not a change to save")
    }

    @Test func aPendingChangeIsKeptAndWinsWhileOtherAttributesRefresh() throws {
        let container = try Self.container()
        let app = ModelContext(container)
        let trip = SampleTrips.Trip(name: "Lima", destination: "Peru", startDate: Self.start, endDate: Self.start)
        app.insert(trip)
        try app.save()

        let widget = ModelContext(container)
        let copy = try #require(try widget.fetch(FetchDescriptor<SampleTrips.Trip>()).first)
        copy.name = "Lima and Cusco"
        copy.destination = "Peru (Andes)"
        try widget.save()

        trip.name = "Lima only"  // pending in the app
        _ = try app.fetch(FetchDescriptor<SampleTrips.Trip>())
        #expect(trip.name == "Lima only", "a pending change is never overwritten by a fetch")
        #expect(trip.destination == "Peru (Andes)", "an attribute without a pending change is refreshed")
        #expect(app.hasChanges)
        try app.save()

        let saved = try #require(try ModelContext(container).fetch(FetchDescriptor<SampleTrips.Trip>()).first)
        #expect(saved.name == "Lima only", "the pending change wins at the save (last writer)")
        #expect(saved.destination == "Peru (Andes)", "and the refresh did not write the old value back")
    }

    /// A property set to the value it already had (a text field's binding) is not a pending change:
    /// the refresh takes the other save's value, and the next save does not write the old one back.
    @Test func aSameValueAssignmentIsNotAPendingChange() throws {
        let container = try Self.container()
        let app = ModelContext(container)
        let trip = SampleTrips.Trip(name: "Riga", destination: "Latvia", startDate: Self.start, endDate: Self.start)
        app.insert(trip)
        try app.save()
        let other = ModelContext(container)
        try #require(try other.fetch(FetchDescriptor<SampleTrips.Trip>()).first).destination = "Latvia (coast)"
        try other.save()

        trip.destination = trip.destination  // "Latvia", as saved
        _ = try app.fetch(FetchDescriptor<SampleTrips.Trip>())
        #expect(trip.destination == "Latvia (coast)")
        #expect(!app.hasChanges)
        try app.save()
        let saved = try #require(try ModelContext(container).fetch(FetchDescriptor<SampleTrips.Trip>()).first)
        #expect(saved.destination == "Latvia (coast)")
    }

    @Test func observersSeeARefreshedAttribute() throws {
        let container = try Self.container()
        let app = ModelContext(container)
        let trip = SampleTrips.Trip(name: "Quito", destination: "Ecuador", startDate: Self.start, endDate: Self.start)
        app.insert(trip)
        try app.save()
        let other = ModelContext(container)
        try #require(try other.fetch(FetchDescriptor<SampleTrips.Trip>()).first).destination = "Galápagos"
        try other.save()

        let changed = Mutex(false)
        withObservationTracking { _ = trip.destination } onChange: { changed.withLock { $0 = true } }
        _ = try app.fetch(FetchDescriptor<SampleTrips.Trip>())
        #expect(changed.withLock { $0 })
        #expect(trip.destination == "Galápagos")
    }

    /// A save reads every property of the models it writes from their slots, not through their
    /// getters: saving inside an observation scope (a view's body) observes none of them, so a
    /// later change does not call the scope back.
    @Test func aSaveObservesNoPropertyItReads() throws {
        let container = try Self.container()
        let app = ModelContext(container)
        let trip = SampleTrips.Trip(name: "Quito", destination: "Ecuador", startDate: Self.start, endDate: Self.start)
        app.insert(trip)
        let changed = Mutex(false)
        let saved: Result<Void, any Error> = withObservationTracking { Result { try app.save() } } onChange: {
            changed.withLock { $0 = true }
        }
        try saved.get()
        trip.destination = "Galápagos"
        trip.name = "Quito again"
        #expect(!changed.withLock { $0 })
        try app.save()
        let fetched = try #require(try ModelContext(container).fetch(FetchDescriptor<SampleTrips.Trip>()).first)
        #expect(fetched.destination == "Galápagos" && fetched.name == "Quito again")
    }

    /// Hand-written models have no change tracking: what differs from the values the context last
    /// saw is pending.
    @Test func aHandWrittenModelKeepsWhatDiffersFromWhatTheContextSaw() throws {
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
        copy.count = 2
        try other.save()

        item.count = 10  // pending
        _ = try app.fetch(FetchDescriptor<QueryItem>())
        #expect(item.name == "renamed elsewhere")
        #expect(item.count == 10)
        try app.save()
        let saved = try #require(try ModelContext(container).fetch(FetchDescriptor<QueryItem>()).first)
        #expect(saved.name == "renamed elsewhere" && saved.count == 10)
    }
}

/// Slot shapes the macro must get right at compile time and at run time: an implicitly unwrapped
/// optional (held as `T?`) and a model whose every property has an initial value (its `init()` sets
/// no slot). (`willSet`/`didSet` on a persisted property is a compile-time error.)
@Model final class SlotShapes {
    var note: String!
    var count: Int = 1
    var tags: [String] = []
    var touched: Int = 0

    init(note: String?) { self.note = note }
}

@Suite struct SlotShapeTests {
    @Test func implicitlyUnwrappedAndInitialValuePropertiesRoundTrip() throws {
        let container = try ModelContainer(
            for: [SlotShapes.self],
            configuration: LogStoreConfiguration(directory: "/slots", fileSystem: SimulatedFileSystem()))
        let context = ModelContext(container)
        let shapes = SlotShapes(note: nil)
        #expect(shapes.note == nil && shapes.count == 1 && shapes.tags.isEmpty)
        shapes.touched = 5
        context.insert(shapes)
        try context.save()
        let other = SlotShapes(note: "kept")
        other.count = 3
        context.insert(other)
        try context.save()

        let fetched = try ModelContext(container).fetch(
            FetchDescriptor<SlotShapes>(sortBy: [SortDescriptor(\.count)]))
        #expect(fetched.map { $0.note as String? } == [nil, "kept"])
        #expect(fetched.map { $0.count } == [1, 3])
        #expect(fetched.map { $0.touched } == [5, 0])
        // A blank instance keeps its initial values: a predicate on them is pushed down right.
        let ones = try ModelContext(container).fetch(FetchDescriptor<SlotShapes>(predicate: #Predicate { $0.count == 1 }))
        #expect(ones.count == 1)
    }
}
