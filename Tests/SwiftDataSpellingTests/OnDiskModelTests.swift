import Foundation
import LogStore
import LogStoreTestSupport
import Testing

/// `@Model` classes through `ModelContainer(for:configurations:)` on a store in a real temporary
/// directory: round trips with `#Predicate` fetches and reopening, change tracking in a context
/// that holds many models, upserts, cascades, inverses that are saved, and observation.
@Suite struct OnDiskModelTests {
    static let start = Date(timeIntervalSince1970: 1_750_000_000)

    static func open(_ directory: TemporaryDirectory) throws -> ModelContainer {
        try ModelContainer(for: Trip.self, Note.self, configurations: LogStoreConfiguration(directory: directory.path))
    }

    static func trip(_ name: String, destination: String = "Portugal", day: Double = 0) -> Trip {
        Trip(name: name, destination: destination, startDate: start + day * 86_400, endDate: start + (day + 3) * 86_400)
    }

    static func transactions(_ container: ModelContainer) throws -> [DefaultHistoryTransaction] {
        try #require(container.dataStore(as: LogStore.self)).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
    }

    @Test func sampleTripsRoundTripThroughPredicatesAndAReopen() throws {
        let directory = TemporaryDirectory("macros-roundtrip")
        do {
            let container = try Self.open(directory)
            let context = ModelContext(container)
            let lisbon = Self.trip("Lisbon")
            lisbon.bucketList.append(BucketListItem(title: "Tram 28", details: "", hasReservation: false, isInPlan: true))
            lisbon.bucketList.append(BucketListItem(title: "Fado", details: "Alfama", hasReservation: true, isInPlan: false))
            lisbon.livingAccommodation = LivingAccommodation(address: "Rua Augusta 1", placeName: "Casa", isConfirmed: true)
            context.insert(lisbon)
            context.insert(Self.trip("Madrid", destination: "Spain", day: 10))
            try context.save()
            try container.dataStore(as: LogStore.self)?.close()
        }
        let container = try Self.open(directory)
        let context = ModelContext(container)
        let cutoff = Self.start + 5 * 86_400
        let early = try context.fetch(FetchDescriptor<Trip>(
            predicate: #Predicate { $0.startDate < cutoff && $0.destination == "Portugal" }, sortBy: [SortDescriptor(\.name)]))
        #expect(early.map(\.name) == ["Lisbon"])
        let reserved = try context.fetch(FetchDescriptor<BucketListItem>(predicate: #Predicate { $0.hasReservation }))
        #expect(reserved.map(\.title) == ["Fado"])
        #expect(reserved.first?.trip === early.first)
        #expect(early.first?.bucketList.count == 2)
        #expect(early.first?.livingAccommodation?.trip === early.first)
        #expect(!context.hasChanges)
    }

    @Test func aLongLivedContextSavesOnlyTheChangedModel() throws {
        let directory = TemporaryDirectory("macros-long-lived")
        let container = try Self.open(directory)
        let count = 10_000
        do {
            let context = ModelContext(container)
            let trip = Self.trip("Big")
            trip.bucketList = (0..<count).map {
                BucketListItem(title: "item \($0)", details: "", hasReservation: false, isInPlan: false)
            }
            context.insert(trip)
            try context.save()
        }
        let longLived = ModelContext(container)
        let items = try longLived.fetch(FetchDescriptor<BucketListItem>())
        #expect(items.count == count)
        #expect(!longLived.hasChanges)
        let before = try Self.transactions(container).count

        // One change among 10,000 registered models: the save carries that model alone.
        let clock = ContinuousClock()
        items[1234].isInPlan = true
        #expect(longLived.hasChanges)
        let longLivedSave = try clock.measure { try longLived.save() }
        let last = try #require(try Self.transactions(container).last)
        #expect(try Self.transactions(container).count == before + 1)
        #expect(last.changes.map(\.changedPersistentIdentifier) == [items[1234].persistentModelID])
        guard case let .update(update) = last.changes.first else {
            Issue.record("expected one update, got \(last.changes)")
            return
        }
        #expect(update.values == ["isInPlan": .bool(true)])

        // The same save from a fresh context that holds only that model.
        let fresh = ModelContext(container)
        let title = "item 4321"
        let one = try #require(try fresh.fetch(FetchDescriptor<BucketListItem>(predicate: #Predicate { $0.title == title })).first)
        one.isInPlan = true
        var freshSave = try clock.measure { try fresh.save() }
        // Timings vary on a shared machine (the whole suite runs in parallel: one run measured
        // 31 ms against 5 ms, where alone both take 4 ms), so each side is the fastest of three
        // saves of one changed model; the ratio is reported, the bound is loose (encoding every
        // registered model made the long-lived save ~12x slower than this).
        var longLivedFastest = longLivedSave
        for round in 1...2 {
            items[1234 + round].isInPlan = true
            longLivedFastest = min(longLivedFastest, try clock.measure { try longLived.save() })
            let other = try #require(
                try fresh.fetch(FetchDescriptor<BucketListItem>(predicate: #Predicate { $0.title == title })).first)
            other.isInPlan.toggle()
            freshSave = min(freshSave, try clock.measure { try fresh.save() })
        }
        print("long-lived context (\(count) models) save: \(longLivedFastest); fresh context save: \(freshSave)")
        #expect(longLivedFastest < freshSave * 4 + .milliseconds(5))
        #expect(!longLived.hasChanges && !fresh.hasChanges)
    }

    @Test func anInsertCollidingOnTheUniqueConstraintUpdatesTheStoredTrip() throws {
        let directory = TemporaryDirectory("macros-upsert")
        let container = try Self.open(directory)
        let first = ModelContext(container)
        first.insert(Self.trip("Porto", destination: "Portugal"))
        try first.save()
        let second = ModelContext(container)
        second.insert(Self.trip("Porto", destination: "Douro"))
        try second.save()
        let last = try #require(try Self.transactions(container).last)
        #expect(last.changes.count == 1)
        if case .update = last.changes.first {} else { Issue.record("expected an update, got \(last.changes)") }
        let trips = try ModelContext(container).fetch(FetchDescriptor<Trip>())
        #expect(trips.map(\.destination) == ["Douro"])
    }

    @Test func deletingATripCascadesAndKeepsItsPreservedValues() throws {
        let directory = TemporaryDirectory("macros-cascade")
        let container = try Self.open(directory)
        let context = ModelContext(container)
        let trip = Self.trip("Faro")
        trip.bucketList.append(BucketListItem(title: "Beach", details: "", hasReservation: false, isInPlan: true))
        trip.livingAccommodation = LivingAccommodation(address: "Rua 9", placeName: "Villa", isConfirmed: false)
        context.insert(trip)
        try context.save()
        context.delete(trip)
        try context.save()
        let last = try #require(try Self.transactions(container).last)
        let deleted = last.changes.compactMap { change -> String? in
            if case let .delete(delete) = change { delete.changedPersistentIdentifier.entityName } else { nil }
        }
        #expect(deleted.sorted() == ["BucketListItem", "LivingAccommodation", "Trip"])
        let tombstone = last.changes.compactMap { change -> [String: AttributeValue]? in
            if case let .delete(delete) = change, delete.changedPersistentIdentifier.entityName == "Trip" {
                delete.tombstoneValues
            } else { nil }
        }.first
        #expect(tombstone?["name"] == .string("Faro"))
        #expect(try context.fetchCount(FetchDescriptor<BucketListItem>()) == 0)
        #expect(try context.fetchCount(FetchDescriptor<LivingAccommodation>()) == 0)
    }

    @Test func anInverseSetOnAFetchedModelIsSavedOnBothSides() throws {
        let directory = TemporaryDirectory("macros-inverse")
        do {
            let container = try Self.open(directory)
            let context = ModelContext(container)
            let lisbon = Self.trip("Lisbon"), porto = Self.trip("Porto", day: 5)
            lisbon.bucketList.append(BucketListItem(title: "Tram", details: "", hasReservation: false, isInPlan: false))
            context.insert(lisbon)
            context.insert(porto)
            try context.save()

            let other = ModelContext(container)
            let trips = try other.fetch(FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.name)]))
            let (fetchedLisbon, fetchedPorto) = (trips[0], trips[1])
            // Moving the item: its old trip's list loses it, the new one's gains it.
            let tram = try #require(fetchedLisbon.bucketList.first)
            tram.trip = fetchedPorto
            #expect(fetchedLisbon.bucketList.isEmpty)
            #expect(fetchedPorto.bucketList.map(\.title) == ["Tram"])
            // A new item set on the fetched side only: saved through the trip's relationship.
            let cellar = BucketListItem(title: "Cellar", details: "", hasReservation: false, isInPlan: true)
            cellar.trip = fetchedPorto
            try other.save()
            try container.dataStore(as: LogStore.self)?.close()
        }
        let context = ModelContext(try Self.open(directory))
        let trips = try context.fetch(FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.name)]))
        #expect(trips.map { $0.bucketList.map(\.title).sorted() } == [[], ["Cellar", "Tram"]])
        #expect(trips[1].bucketList.allSatisfy { $0.trip === trips[1] })
    }

    @Test func otherShapesRoundTripWithManyToManyInverses() throws {
        let directory = TemporaryDirectory("macros-shapes")
        do {
            let container = try Self.open(directory)
            let context = ModelContext(container)
            let plain = Note(title: "plain")
            let rich = Note(title: "rich", words: ["a", "b", "c"])
            rich.body = "text"
            rich.rating = 4
            rich.score = 2.5
            rich.attachment = Data([1, 2, 3])
            let work = Label(name: "work"), home = Label(name: "home")
            rich.labels = [work, home]
            plain.labels.append(home)
            #expect(home.notes.map(\.title) == ["rich", "plain"])
            #expect(work.notes.first === rich)
            rich.isExpanded = true
            context.insert(rich)
            context.insert(plain)
            try context.save()
            try container.dataStore(as: LogStore.self)?.close()
        }
        let context = ModelContext(try Self.open(directory))
        let unrated = try context.fetch(FetchDescriptor<Note>(predicate: #Predicate { $0.rating == nil }))
        #expect(unrated.map(\.title) == ["plain"])
        let rich = try #require(try context.fetch(FetchDescriptor<Note>(predicate: #Predicate { $0.score > 1 })).first)
        #expect(rich.body == "text" && rich.rating == 4 && rich.wordCount == 3)
        #expect(rich.attachment == Data([1, 2, 3]))
        #expect(!rich.isExpanded) // transient: not stored
        #expect(Set(rich.labels.map(\.name)) == ["work", "home"])
        let home = try #require(rich.labels.first { $0.name == "home" })
        #expect(Set(home.notes.map(\.title)) == ["rich", "plain"])
        // Removing one side of the many-to-many removes the other.
        rich.labels.removeAll { $0 === home }
        #expect(home.notes.map(\.title) == ["plain"])
    }

    @Test func observationFiresForSetsAndForRollbackOfFetchedModels() throws {
        let directory = TemporaryDirectory("macros-observation")
        let container = try Self.open(directory)
        let context = ModelContext(container)
        context.insert(Self.trip("Lisbon"))
        try context.save()
        let other = ModelContext(container)
        let trip = try #require(try other.fetch(FetchDescriptor<Trip>()).first)
        let changed = ChangeFlag()
        withObservationTracking { _ = trip.destination } onChange: { changed.set() }
        trip.destination = "Spain"
        #expect(changed.value)
        let restored = ChangeFlag()
        withObservationTracking { _ = trip.destination } onChange: { restored.set() }
        other.rollback()
        #expect(trip.destination == "Portugal")
        #expect(restored.value)
    }

    @Test func fetchingManyModelsIsNoChangeAndSavesNothing() throws {
        let directory = TemporaryDirectory("macros-fetch-clean")
        let container = try Self.open(directory)
        let context = ModelContext(container)
        for index in 0..<500 { context.insert(Note(title: "note \(index)")) }
        try context.save()
        let before = try Self.transactions(container).count
        let reader = ModelContext(container)
        #expect(try reader.fetch(FetchDescriptor<Note>()).count == 500)
        #expect(!reader.hasChanges)
        try reader.save()
        #expect(try Self.transactions(container).count == before)
    }
}
