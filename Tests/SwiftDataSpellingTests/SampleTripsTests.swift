import Foundation
import LogStore
import LogStoreTestSupport
import Testing

/// The WWDC24 SampleTrips models, declared with `@Model` as in Apple's sessions, through
/// `ModelContainer`/`ModelContext` on a LogStore store.
@Suite struct SampleTripsTests {
    static let start = Date(timeIntervalSince1970: 1_750_000_000)

    static func container(_ fileSystem: SimulatedFileSystem) throws -> ModelContainer {
        // Only Trip is named: BucketListItem and LivingAccommodation are found through its relationships.
        try ModelContainer(for: Trip.self, configurations: LogStoreConfiguration(directory: "/trips", fileSystem: fileSystem))
    }

    static func lisbon() -> Trip {
        let trip = Trip(name: "Lisbon", destination: "Portugal", startDate: start, endDate: start + 4 * 86_400)
        trip.bucketList.append(BucketListItem(title: "Tram 28", details: "end to end", hasReservation: false, isInPlan: true))
        trip.livingAccommodation = LivingAccommodation(address: "Rua Augusta 1", placeName: "Casa", isConfirmed: false)
        return trip
    }

    @Test func relatedModelTypesAreFoundThroughRelationships() throws {
        let container = try Self.container(SimulatedFileSystem())
        #expect(Set(container.schema.entities.map(\.name)) == ["Trip", "BucketListItem", "LivingAccommodation"])
        let trip = try #require(container.schema.entity(named: "Trip"))
        #expect(trip.uniquenessConstraints == [["name", "startDate", "endDate"]])
        #expect(trip.attributes.first { $0.name == "name" }?.options.contains(.preserveValueOnDeletion) == true)
        #expect(trip.relationships.map(\.name) == ["bucketList", "livingAccommodation"])
        #expect(Trip.indexes == [["name"], ["startDate"], ["endDate"], ["name", "startDate", "endDate"]])
    }

    @Test func insertSaveFetchAndReopen() throws {
        let fileSystem = SimulatedFileSystem()
        let container = try Self.container(fileSystem)
        let context = ModelContext(container)
        context.insert(Self.lisbon())
        try context.save()

        let fetched = try ModelContext(container).fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.destination == "Portugal" }))
        #expect(fetched.map(\.name) == ["Lisbon"])
        #expect(fetched.first?.bucketList.map(\.title) == ["Tram 28"])
        #expect(fetched.first?.livingAccommodation?.placeName == "Casa")
        // The inverses came back from the store too.
        #expect(fetched.first?.bucketList.first?.trip === fetched.first)
        #expect(fetched.first?.livingAccommodation?.trip === fetched.first)

        try container.dataStore(as: LogStore.self)!.close()
        let reopened = try ModelContext(try Self.container(fileSystem)).fetch(FetchDescriptor<Trip>())
        #expect(reopened.map(\.name) == ["Lisbon"])
        #expect(reopened.first?.bucketList.first?.trip === reopened.first)
    }

    @Test func inversesAreKeptInStepOnBothSides() {
        let trip = Trip(name: "Porto", destination: "Portugal")
        let item = BucketListItem(title: "Port cellar", details: "", hasReservation: false, isInPlan: false)
        item.trip = trip // the side without `inverse:`
        #expect(trip.bucketList.map(\.title) == ["Port cellar"])
        trip.bucketList = []
        #expect(item.trip == nil)
        let stay = LivingAccommodation(address: "Rua 2", placeName: "Flat", isConfirmed: false)
        trip.livingAccommodation = stay
        #expect(stay.trip === trip)
        let other = LivingAccommodation(address: "Rua 3", placeName: "Hotel", isConfirmed: true)
        trip.livingAccommodation = other
        #expect(stay.trip == nil)
        #expect(other.trip === trip)
        other.trip = nil
        #expect(trip.livingAccommodation == nil)
    }

    @Test func anUpdateSavesOnlyTheChangedModel() throws {
        let container = try Self.container(SimulatedFileSystem())
        let store = try #require(container.dataStore(as: LogStore.self))
        let context = ModelContext(container)
        let trip = Self.lisbon()
        context.insert(trip)
        try context.save()
        trip.livingAccommodation?.isConfirmed = true
        #expect(context.hasChanges)
        try context.save()
        #expect(!context.hasChanges)
        let last = try #require(try store.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).last)
        #expect(last.changes.count == 1)
        guard case let .update(update) = last.changes.first else {
            Issue.record("expected an update, got \(last.changes)")
            return
        }
        #expect(update.changedPersistentIdentifier.entityName == "LivingAccommodation")
        #expect(update.values == ["isConfirmed": .bool(true)])
    }

    @Test func theUniqueConstraintUpsertsAndCascadeDeletes() throws {
        let container = try Self.container(SimulatedFileSystem())
        let context = ModelContext(container)
        context.insert(Self.lisbon())
        try context.save()
        // Deleting the trip takes its bucket list and accommodation with it (cascade).
        let fresh = ModelContext(container)
        fresh.delete(try #require(try fresh.fetch(FetchDescriptor<Trip>()).first))
        try fresh.save()
        #expect(try fresh.fetchCount(FetchDescriptor<BucketListItem>()) == 0)
        #expect(try fresh.fetchCount(FetchDescriptor<LivingAccommodation>()) == 0)

        // The same name and dates again: the second insert updates the first (one trip).
        context.insert(Trip(name: "Porto", destination: "Portugal", startDate: Self.start, endDate: Self.start + 86_400))
        try context.save()
        context.insert(Trip(name: "Porto", destination: "Douro", startDate: Self.start, endDate: Self.start + 86_400))
        try context.save()
        let trips = try ModelContext(container).fetch(FetchDescriptor<Trip>())
        #expect(trips.map(\.destination) == ["Douro"])
    }

    @Test func aFetchIsNotAChangeAndRollbackRestoresTrackedModels() throws {
        let container = try Self.container(SimulatedFileSystem())
        let context = ModelContext(container)
        context.insert(Self.lisbon())
        try context.save()
        let other = ModelContext(container)
        let trip = try #require(try other.fetch(FetchDescriptor<Trip>()).first)
        #expect(!other.hasChanges)
        trip.destination = "Spain"
        #expect(other.hasChanges)
        other.rollback()
        #expect(trip.destination == "Portugal")
        #expect(!other.hasChanges)
        // Setting a value back to the saved one is no change either.
        trip.destination = "Spain"
        trip.destination = "Portugal"
        #expect(!other.hasChanges)
    }

    @Test func aFailedSaveKeepsTrackedChangesPending() throws {
        var configuration = LogStoreConfiguration(directory: "/trips", fileSystem: SimulatedFileSystem())
        configuration.uniqueCollisionPolicy = .throw
        let container = try ModelContainer(for: Trip.self, configurations: configuration)
        let context = ModelContext(container)
        context.insert(Trip(name: "A", destination: "x", startDate: Self.start, endDate: Self.start))
        context.insert(Trip(name: "B", destination: "y", startDate: Self.start, endDate: Self.start))
        try context.save()
        let trips = try context.fetch(FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.name)]))
        trips[1].name = "A"  // collides with the first trip
        #expect(throws: LogStoreError.self) { try context.save() }
        #expect(context.hasChanges)
        trips[1].name = "C"
        try context.save()
        #expect(try ModelContext(container).fetch(FetchDescriptor<Trip>()).map(\.name).sorted() == ["A", "C"])
    }

    @Test func observationSeesModelChanges() throws {
        let trip = Trip(name: "Faro", destination: "Portugal")
        let changed = ChangeFlag()
        withObservationTracking {
            _ = trip.destination
        } onChange: {
            changed.set()
        }
        trip.name = "Faro!" // not observed
        #expect(!changed.value)
        trip.destination = "Algarve"
        #expect(changed.value)
    }

    @Test func modelsAreHashableByIdentity() {
        let first = Trip(name: "Same", destination: "Same")
        let second = Trip(name: "Same", destination: "Same")
        #expect(first == first)
        #expect(first != second)
        #expect(Set([first, second, first]).count == 2)
        #expect(first.id == first.persistentModelID)
    }
}

/// A flag set from an observation callback.
final class ChangeFlag: @unchecked Sendable {
    // @unchecked: set and read on the test's thread (the callback runs synchronously on set).
    private(set) var value = false
    func set() { value = true }
}
