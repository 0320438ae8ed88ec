import Foundation
import LogStoreEngine
import LogStoreTestSupport
import SampleTrips
import Testing

@testable import LogStore

/// The store answers the WWDC24 history session's `findTrips` predicate
/// (`$0.livingAccommodation?.persistentModelID == modelID`) itself, from the stored references,
/// instead of declining it and letting the context evaluate it over every trip; and a predicate it
/// recognises only in part (`a && b`) is narrowed by the part it knows (issue 13).
@Suite struct RelationshipPushDownTests {
    /// 60 trips; every other one has an accommodation; some have bucket-list items.
    static func store() throws -> (ModelContainer, [LivingAccommodation]) {
        let configuration = LogStoreConfiguration(directory: "/trips", fileSystem: SimulatedFileSystem())
        let container = try ModelContainer(for: sampleTripsModels, configuration: configuration)
        let context = ModelContext(container)
        var accommodations: [LivingAccommodation] = []
        for number in 0..<60 {
            let trip = SampleTrips.Trip(
                name: "\(["alpha", "beta", "gamma"][number % 3]) \(number)", destination: "d\(number % 7)",
                startDate: Date(timeIntervalSince1970: Double(number) * 86_400),
                endDate: Date(timeIntervalSince1970: Double(number + 3) * 86_400))
            context.insert(trip)
            if number % 2 == 0 {
                let stay = LivingAccommodation(address: "street \(number)", placeName: "place \(number)", isConfirmed: false)
                stay.trip = trip
                accommodations.append(stay)
            }
            for item in 0..<(number % 4) {
                let entry = BucketListItem(title: "item \(item)", details: "", hasReservation: false, isInPlan: true)
                entry.trip = trip
            }
        }
        try context.save()
        return (container, accommodations)
    }

    /// What the context finds by evaluating the predicate itself over every trip.
    static func evaluatedInMemory(_ container: ModelContainer, _ predicate: Predicate<SampleTrips.Trip>) throws
        -> Set<String>
    {
        let all = try ModelContext(container).fetch(FetchDescriptor<SampleTrips.Trip>())
        return Set(try all.filter { try predicate.evaluate($0) }.map(\.name))
    }

    @Test func theSessionsFindTripsPredicateIsPushedDownAndAgreesWithEvaluation() throws {
        let (container, accommodations) = try Self.store()
        for stay in accommodations.prefix(12) {
            let modelID = stay.persistentModelID
            let predicate = #Predicate<SampleTrips.Trip> { $0.livingAccommodation?.persistentModelID == modelID }
            #expect(PredicatePushDown.compile(predicate) != nil, "the store declined findTrips' predicate")
            // Straight to the store: a store that declined would throw preferInMemoryFilter.
            let store = try #require(container.dataStore(as: LogStore.self))
            let pushed = try store.fetch(
                DataStoreFetchRequest(descriptor: FetchDescriptor<SampleTrips.Trip>(predicate: predicate)))
            #expect(pushed.fetchedSnapshots.count == 1)
            let names = Set(try ModelContext(container).fetch(FetchDescriptor(predicate: predicate)).map(\.name))
            #expect(names == [stay.trip!.name])
            #expect(names == (try Self.evaluatedInMemory(container, predicate)))
        }
        // `!=` and a non-optional spelling through flatMap's other side.
        let first = accommodations[0].persistentModelID
        let others = #Predicate<SampleTrips.Trip> { $0.livingAccommodation?.persistentModelID != first }
        #expect(PredicatePushDown.compile(others) != nil)
        let otherNames = Set(try ModelContext(container).fetch(FetchDescriptor(predicate: others)).map(\.name))
        #expect(otherNames.count == 59, "trips without an accommodation have a nil identifier, which differs")
        #expect(otherNames == (try Self.evaluatedInMemory(container, others)))
        // An identifier of another entity matches nothing.
        let tripID = try ModelContext(container).fetch(FetchDescriptor<SampleTrips.Trip>())[0].persistentModelID
        let wrongEntity = #Predicate<SampleTrips.Trip> { $0.livingAccommodation?.persistentModelID == tripID }
        #expect(try ModelContext(container).fetch(FetchDescriptor(predicate: wrongEntity)).isEmpty)
        // The constant on the left, and `nil` as the constant (a trip without an accommodation).
        let flipped = #Predicate<SampleTrips.Trip> { first == $0.livingAccommodation?.persistentModelID }
        #expect(PredicatePushDown.compile(flipped) != nil)
        let flippedNames = Set(try ModelContext(container).fetch(FetchDescriptor(predicate: flipped)).map(\.name))
        #expect(flippedNames == [accommodations[0].trip!.name])
        let none: PersistentIdentifier? = nil
        let withoutStay = #Predicate<SampleTrips.Trip> { $0.livingAccommodation?.persistentModelID == none }
        #expect(PredicatePushDown.compile(withoutStay) != nil)
        let withoutNames = Set(try ModelContext(container).fetch(FetchDescriptor(predicate: withoutStay)).map(\.name))
        #expect(withoutNames.count == 30)
        #expect(withoutNames == (try Self.evaluatedInMemory(container, withoutStay)))
    }

    @Test func otherUsesOfARelationshipAreStillDeclinedAndEvaluatedByTheContext() throws {
        let (container, _) = try Self.store()
        let byAddress = #Predicate<SampleTrips.Trip> { $0.livingAccommodation?.address == "street 4" }
        #expect(PredicatePushDown.compile(byAddress) == nil)
        let names = try ModelContext(container).fetch(FetchDescriptor(predicate: byAddress)).map(\.name)
        #expect(names == ["beta 4"])
    }

    @Test func aConjunctionWithOneUnrecognisedSideIsNarrowedByTheOther() throws {
        let (container, _) = try Self.store()
        let predicate = #Predicate<SampleTrips.Trip> { $0.name.starts(with: "gamma") && $0.bucketList.count >= 2 }
        #expect(PredicatePushDown.compile(predicate) == nil, "bucketList.count is not recognised")
        let candidates = try #require(PredicatePushDown.compileConjuncts(predicate))
        // The candidates are the gamma trips: a superset the context filters.
        let store = try #require(container.dataStore(as: LogStore.self))
        var request = FetchDescriptor<SampleTrips.Trip>(predicate: predicate)
        request.candidatesOnly = true
        let fetched = try store.fetch(DataStoreFetchRequest(descriptor: request))
        #expect(fetched.fetchedSnapshots.count == 20)
        _ = candidates
        // Through the context: exactly the evaluated answer, sorted and windowed by the context.
        var descriptor = FetchDescriptor<SampleTrips.Trip>(predicate: predicate, sortBy: [SortDescriptor(\.name)])
        descriptor.fetchOffset = 1
        descriptor.fetchLimit = 4
        let names = try ModelContext(container).fetch(descriptor).map(\.name)
        let expected = try Self.evaluatedInMemory(container, predicate).sorted()
        #expect(names == Array(expected.dropFirst().prefix(4)))
        #expect(try ModelContext(container).fetchCount(FetchDescriptor(predicate: predicate)) == expected.count)
        // Nothing recognised at all: no candidate filter, every row comes back.
        let opaque = #Predicate<SampleTrips.Trip> { $0.bucketList.count >= 2 }
        #expect(PredicatePushDown.compileConjuncts(opaque) == nil)
        #expect(
            Set(try ModelContext(container).fetch(FetchDescriptor(predicate: opaque)).map(\.name))
                == (try Self.evaluatedInMemory(container, opaque)))
    }
}
