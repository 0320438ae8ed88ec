import Foundation
import LogStore
import LogStoreEngine
import LogStoreTestSupport
import SampleTrips
import Testing

func makeContainer(_ fileSystem: SimulatedFileSystem, directory: String = "/trips") throws -> ModelContainer {
    try ModelContainer(
        for: sampleTripsModels, configuration: LogStoreConfiguration(directory: directory, fileSystem: fileSystem))
}

func day(_ number: Int) -> Date { Date(timeIntervalSince1970: Double(number) * 86_400) }

/// The stores the context suite runs against: the same `ModelContext` code must behave the same
/// on both.
enum StoreKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    /// LogStore on a simulated file system.
    case log
    /// ArchiveStore on a JSON file under the temporary directory.
    case archive

    var testDescription: String { rawValue }
}

/// One store location for one test: opens, closes and reopens containers on it, and reaches the
/// store API for the tests that bypass the context. An archive's directory is removed at the end.
final class StoreFixture {
    let kind: StoreKind
    let fileSystem = SimulatedFileSystem()
    /// The archive's directory (unused for the log store), removed with the fixture.
    let temporary = TemporaryDirectory("context")
    var directory: String { temporary.path }

    init(_ kind: StoreKind) {
        self.kind = kind
    }

    var archivePath: String { directory + "/trips.json" }

    func open() throws -> ModelContainer {
        switch kind {
        case .log: try makeContainer(fileSystem)
        case .archive:
            try ModelContainer(for: sampleTripsModels, configuration: ArchiveStoreConfiguration(path: archivePath))
        }
    }

    /// Closes the container's store (a LogStore directory must be closed before it is opened again).
    func close(_ container: ModelContainer) throws {
        try container.dataStore(as: LogStore.self)?.close()
    }

    func reopen(_ container: ModelContainer) throws -> ModelContainer {
        try close(container)
        return try open()
    }

    /// A save straight through the store API.
    func save(_ request: DataStoreSaveChangesRequest<DefaultSnapshot>, in container: ModelContainer) throws
        -> DataStoreSaveChangesResult<DefaultSnapshot>
    {
        switch kind {
        case .log: try container.dataStore(as: LogStore.self)!.save(request)
        case .archive: try container.dataStore(as: ArchiveStore.self)!.save(request)
        }
    }

    /// Every stored snapshot, by entity, in insertion order.
    func allSnapshots(_ container: ModelContainer) throws -> [String: [DefaultSnapshot]] {
        switch kind {
        case .log: container.dataStore(as: LogStore.self)!.allSnapshots()
        case .archive: try container.dataStore(as: ArchiveStore.self)!.allSnapshots()
        }
    }
}

/// Trips inserted in this order: name, destination, start day.
private let fiveTrips: [(String, String, Int)] = [
    ("A", "Portugal", 1), ("B", "Spain", 3), ("C", "Portugal", 2), ("D", "Portugal", 7), ("E", "France", 5),
]

private func makeTrip(_ name: String, _ destination: String, _ start: Int) -> Trip {
    Trip(name: name, destination: destination, startDate: day(start), endDate: day(start + 2))
}

@Suite struct ContextTests {
    // MARK: Insert, save, reopen

    @Test("Inserted models are saved, changed, and found again after reopening", arguments: StoreKind.allCases)
    func insertSaveFetchAndReopen(_ kind: StoreKind) throws {
        let fixture = StoreFixture(kind)
        do {
            let container = try fixture.open()
            let context = ModelContext(container)
            let trip = Trip(name: "Lisbon", destination: "Portugal", startDate: day(1), endDate: day(5))
            trip.bucketList = [BucketListItem(title: "Tram 28", details: "ride it")]
            trip.livingAccommodation = LivingAccommodation(address: "Rua 1", placeName: "Casa")
            context.insert(trip)
            #expect(trip.persistentModelID.isTemporary)
            #expect(context.hasChanges)
            try context.save()
            #expect(!trip.persistentModelID.isTemporary)
            #expect(!context.hasChanges)
            trip.destination = "Lisboa"
            #expect(context.hasChanges)
            try context.save()
            try fixture.close(container)
        }
        let container = try fixture.open()
        let context = ModelContext(container)
        let trips = try context.fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.name == "Lisbon" }))
        #expect(trips.count == 1)
        #expect(trips.first?.destination == "Lisboa")
        #expect(trips.first?.bucketList.map(\.title) == ["Tram 28"])
        #expect(trips.first?.livingAccommodation?.placeName == "Casa")
        #expect(try context.fetchCount(FetchDescriptor<BucketListItem>()) == 1)
    }

    @Test("model(for:) returns the registered model, else loads it from the store", arguments: StoreKind.allCases)
    func modelForAnIdentifier(_ kind: StoreKind) throws {
        let fixture = StoreFixture(kind)
        let container = try fixture.open()
        let writer = ModelContext(container)
        let trip = makeTrip("Lisbon", "Portugal", 1)
        trip.livingAccommodation = LivingAccommodation(address: "Rua 1", placeName: "Casa")
        writer.insert(trip)
        // An inserted model not saved yet: its context holds it under its temporary identifier.
        #expect(writer.model(for: trip.persistentModelID) === trip)
        try writer.save()
        let tripID = trip.persistentModelID
        let stayID = try #require(trip.livingAccommodation?.persistentModelID)
        #expect(writer.model(for: tripID) === trip)

        // Another context: loaded from the store, with what it refers to, and registered.
        let reader = ModelContext(container)
        #expect(reader.registeredModel(for: stayID) as LivingAccommodation? == nil)
        let stay = try #require(reader.model(for: stayID) as? LivingAccommodation)
        #expect(stay.placeName == "Casa")
        #expect(stay.trip?.name == "Lisbon")
        #expect((reader.registeredModel(for: stayID) as LivingAccommodation?) === stay)
        #expect(reader.model(for: stayID) === stay)
        #expect(reader.model(for: tripID) === stay.trip)
        // Unsaved changes of a registered model are what it returns.
        stay.placeName = "Casa Nova"
        #expect((reader.model(for: stayID) as? LivingAccommodation)?.placeName == "Casa Nova")
        #expect(reader.hasChanges)

        // A model the store no longer holds: an instance with that identifier and no context.
        writer.delete(trip)
        try writer.save()
        let late = ModelContext(container)
        let gone = late.model(for: tripID)
        #expect(gone is Trip)
        #expect(gone.persistentModelID == tripID)
        #expect(late.registeredModel(for: tripID) as Trip? == nil)
        #expect(!late.hasChanges)
        // Another store's identifier with a primary key this store holds names nothing here.
        let other = ModelContext(container)
        let porto = makeTrip("Porto", "Portugal", 2)
        porto.livingAccommodation = LivingAccommodation(address: "Rua 2", placeName: "Casa Porto")
        other.insert(porto)
        try other.save()
        let portoStayID = try #require(porto.livingAccommodation?.persistentModelID)
        let foreign = try PersistentIdentifier.identifier(
            for: UUID().uuidString, entityName: "LivingAccommodation", primaryKey: portoStayID.primaryKey)
        let probe = ModelContext(container)
        let unbacked = try #require(probe.model(for: foreign) as? LivingAccommodation)
        #expect(unbacked.persistentModelID == foreign)
        #expect(probe.registeredModel(for: foreign) as LivingAccommodation? == nil)
        #expect(probe.registeredModel(for: portoStayID) as LivingAccommodation? == nil, "the local row was loaded")
        // Nor does the store answer it for a predicate or a snapshot (RELIABILITY bug 8).
        let byForeign = try probe.fetch(
            FetchDescriptor<Trip>(predicate: #Predicate { $0.livingAccommodation?.persistentModelID == foreign }))
        #expect(byForeign.isEmpty)
        let byLocal = try probe.fetch(
            FetchDescriptor<Trip>(predicate: #Predicate { $0.livingAccommodation?.persistentModelID == portoStayID }))
        #expect(byLocal.map(\.name) == ["Porto"])
        let notForeign = try probe.fetchCount(
            FetchDescriptor<Trip>(predicate: #Predicate { $0.livingAccommodation?.persistentModelID != foreign }))
        #expect(notForeign == 1)
        switch kind {
        case .log: #expect(container.dataStore(as: LogStore.self)?.snapshot(for: foreign) == nil)
        case .archive: #expect(try container.dataStore(as: ArchiveStore.self)?.snapshot(for: foreign) == nil)
        }
        // A save does not insert a model(for:) instance nothing backs: a reference to it fails.
        let lisbon = makeTrip("Lisbon again", "Portugal", 3)
        probe.insert(lisbon)
        lisbon.livingAccommodation = unbacked
        #expect(throws: (any Error).self) { try probe.save() }
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<LivingAccommodation>()) == 1)
        #expect(try ModelContext(container).fetch(FetchDescriptor<Trip>()).map(\.name) == ["Porto"])
        try fixture.close(container)
    }

    @Test(
        "Temporary identifiers become permanent at save, and references among new models follow",
        arguments: StoreKind.allCases)
    func temporaryIdentifiersAreRemapped(_ kind: StoreKind) throws {
        let fixture = StoreFixture(kind)
        let container = try fixture.open()
        let context = ModelContext(container)
        let trip = makeTrip("Lisbon", "Portugal", 1)
        let items = [
            BucketListItem(title: "Tram 28", details: "ride it"), BucketListItem(title: "Fado", details: "listen"),
        ]
        let stay = LivingAccommodation(address: "Rua 1", placeName: "Casa")
        trip.bucketList = items
        trip.livingAccommodation = stay
        context.insert(trip)
        let models: [any PersistentModel] = [trip, items[0], items[1], stay]
        let temporary = models.map(\.persistentModelID)
        #expect(temporary.allSatisfy { $0.isTemporary })

        try context.save()

        let permanent = models.map(\.persistentModelID)
        #expect(permanent.allSatisfy { !$0.isTemporary })
        #expect(Set(permanent).isDisjoint(with: temporary))
        #expect(Set(permanent.map(\.storeIdentifier)).count == 1)
        #expect(permanent.map(\.entityName) == temporary.map(\.entityName))
        #expect((context.registeredModel(for: permanent[0]) as Trip?) === trip)
        #expect((context.registeredModel(for: temporary[0]) as Trip?) == nil)

        let reopened = try fixture.reopen(container)
        let fresh = ModelContext(reopened)
        let trips = try fresh.fetch(FetchDescriptor<Trip>())
        #expect(trips.map(\.persistentModelID) == [permanent[0]])
        #expect(trips.first?.bucketList.map(\.persistentModelID) == [permanent[1], permanent[2]])
        #expect(trips.first?.bucketList.map(\.title) == ["Tram 28", "Fado"])
        #expect(trips.first?.livingAccommodation?.persistentModelID == permanent[3])
        #expect(Set(try fresh.fetchIdentifiers(FetchDescriptor<BucketListItem>())) == [permanent[1], permanent[2]])
    }

    // MARK: Tracking changes

    @Test(
        "hasChanges follows edits, and rollback reverts changes, drops inserts and undoes deletes",
        arguments: StoreKind.allCases)
    func hasChangesAndRollback(_ kind: StoreKind) throws {
        let fixture = StoreFixture(kind)
        let container = try fixture.open()
        let context = ModelContext(container)
        #expect(!context.hasChanges)
        let lisbon = makeTrip("Lisbon", "Portugal", 1)
        let tram = BucketListItem(title: "Tram 28", details: "ride it")
        lisbon.bucketList = [tram]
        context.insert(lisbon)
        #expect(context.hasChanges)
        try context.save()
        #expect(!context.hasChanges)

        // A changed attribute and a changed relationship are reverted.
        lisbon.destination = "Spain"
        lisbon.bucketList.append(BucketListItem(title: "Fado", details: "listen"))
        #expect(context.hasChanges)
        context.rollback()
        #expect(!context.hasChanges)
        #expect(lisbon.destination == "Portugal")
        #expect(lisbon.bucketList.map { $0 === tram } == [true])

        // An insert is dropped.
        let porto = makeTrip("Porto", "Portugal", 9)
        context.insert(porto)
        #expect(context.hasChanges)
        #expect(try context.fetchCount(FetchDescriptor<Trip>()) == 2)
        context.rollback()
        #expect(!context.hasChanges)
        #expect(porto.modelContext == nil)
        #expect(try context.fetch(FetchDescriptor<Trip>()).map(\.name) == ["Lisbon"])

        // Deletes are undone: the same instances are back.
        context.delete(tram)
        context.delete(lisbon)
        #expect(context.hasChanges)
        #expect(try context.fetchCount(FetchDescriptor<Trip>()) == 0)
        context.rollback()
        #expect(!context.hasChanges)
        #expect(try context.fetch(FetchDescriptor<Trip>()).map { $0 === lisbon } == [true])
        #expect(try context.fetch(FetchDescriptor<BucketListItem>()).map { $0 === tram } == [true])

        // After a rollback of everything, a save writes nothing.
        lisbon.name = "Lisboa"
        context.insert(makeTrip("Faro", "Portugal", 20))
        context.delete(tram)
        context.rollback()
        try context.save()
        let fresh = ModelContext(try fixture.reopen(container))
        let trips = try fresh.fetch(FetchDescriptor<Trip>())
        #expect(trips.map(\.name) == ["Lisbon"])
        #expect(trips.first?.destination == "Portugal")
        #expect(trips.first?.bucketList.map(\.title) == ["Tram 28"])
        #expect(try fresh.fetchCount(FetchDescriptor<BucketListItem>()) == 1)
    }

    @Test("An update of one attribute is saved and seen after reopening", arguments: StoreKind.allCases)
    func updateOneAttribute(_ kind: StoreKind) throws {
        let fixture = StoreFixture(kind)
        let container = try fixture.open()
        let context = ModelContext(container)
        let trip = makeTrip("Lisbon", "Portugal", 1)
        trip.bucketList = [BucketListItem(title: "Tram 28", details: "ride it")]
        context.insert(trip)
        context.insert(makeTrip("Porto", "Portugal", 9))
        try context.save()

        trip.destination = "Lisboa"
        #expect(context.hasChanges)
        try context.save()
        #expect(!context.hasChanges)

        let fresh = ModelContext(try fixture.reopen(container))
        let trips = try fresh.fetch(FetchDescriptor<Trip>())
        #expect(trips.map(\.name) == ["Lisbon", "Porto"])
        #expect(trips.map(\.destination) == ["Lisboa", "Portugal"])
        #expect(trips.first?.persistentModelID == trip.persistentModelID)
        #expect(trips.first?.startDate == day(1))
        #expect(trips.first?.endDate == day(3))
        #expect(trips.first?.bucketList.map(\.title) == ["Tram 28"])
    }

    @Test("Deleting a trip deletes its bucket list and accommodation (cascade)", arguments: StoreKind.allCases)
    func deleteCascades(_ kind: StoreKind) throws {
        let fixture = StoreFixture(kind)
        let container = try fixture.open()
        let context = ModelContext(container)
        let lisbon = makeTrip("Lisbon", "Portugal", 1)
        let tram = BucketListItem(title: "Tram 28", details: "ride it")
        let casa = LivingAccommodation(address: "Rua 1", placeName: "Casa")
        lisbon.bucketList = [tram, BucketListItem(title: "Fado", details: "listen")]
        lisbon.livingAccommodation = casa
        let porto = makeTrip("Porto", "Portugal", 9)
        porto.bucketList = [BucketListItem(title: "Port wine", details: "taste")]
        porto.livingAccommodation = LivingAccommodation(address: "Rua 2", placeName: "Quinta")
        context.insert(lisbon)
        context.insert(porto)
        try context.save()
        #expect(try context.fetchCount(FetchDescriptor<BucketListItem>()) == 3)

        context.delete(lisbon)
        try context.save()
        #expect(!context.hasChanges)
        #expect(try context.fetch(FetchDescriptor<Trip>()).map(\.name) == ["Porto"])
        #expect(try context.fetch(FetchDescriptor<BucketListItem>()).map(\.title) == ["Port wine"])
        #expect(try context.fetchCount(FetchDescriptor<BucketListItem>()) == 1)
        #expect(try context.fetch(FetchDescriptor<LivingAccommodation>()).map(\.placeName) == ["Quinta"])
        // The cascaded models leave the context, as the deleted trip does.
        #expect(lisbon.modelContext == nil)
        #expect(tram.modelContext == nil)
        #expect(casa.modelContext == nil)
        #expect((context.registeredModel(for: tram.persistentModelID) as BucketListItem?) == nil)
        // So editing one afterwards is no change to save (it used to make every later save throw
        // modelNotFound).
        tram.title = "Tram 12"
        #expect(!context.hasChanges)
        try context.save()

        let fresh = ModelContext(try fixture.reopen(container))
        #expect(try fresh.fetch(FetchDescriptor<Trip>()).map(\.name) == ["Porto"])
        #expect(try fresh.fetch(FetchDescriptor<BucketListItem>()).map(\.title) == ["Port wine"])
        #expect(try fresh.fetch(FetchDescriptor<LivingAccommodation>()).map(\.placeName) == ["Quinta"])
    }

    @Test(
        "Inserting a trip with a saved trip's name and dates updates that trip (upsert)", arguments: StoreKind.allCases)
    func uniqueUpsert(_ kind: StoreKind) throws {
        let fixture = StoreFixture(kind)
        let container = try fixture.open()
        let context = ModelContext(container)
        let first = makeTrip("Lisbon", "Portugal", 1)
        context.insert(first)
        try context.save()

        let again = makeTrip("Lisbon", "Spain", 1)
        context.insert(again)
        try context.save()
        #expect(try context.fetchCount(FetchDescriptor<Trip>()) == 1)
        #expect(again.persistentModelID == first.persistentModelID)
        #expect(try context.fetch(FetchDescriptor<Trip>()).map(\.destination) == ["Spain"])

        // From another context that never saw the trip.
        let other = ModelContext(container)
        let third = makeTrip("Lisbon", "France", 1)
        other.insert(third)
        try other.save()
        #expect(third.persistentModelID == first.persistentModelID)
        #expect(try other.fetchCount(FetchDescriptor<Trip>()) == 1)
        #expect(try other.fetch(FetchDescriptor<Trip>()).map(\.destination) == ["France"])

        // Other dates: another trip.
        context.insert(makeTrip("Lisbon", "Portugal", 10))
        try context.save()
        #expect(try context.fetchCount(FetchDescriptor<Trip>()) == 2)

        let fresh = ModelContext(try fixture.reopen(container))
        let trips = try fresh.fetch(FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.startDate)]))
        #expect(trips.map(\.destination) == ["France", "Portugal"])
        #expect(trips.first?.persistentModelID == first.persistentModelID)
    }

    // MARK: Fetching

    @Test(
        "Predicates, sorts, limits and offsets; fetchCount and fetchIdentifiers agree with fetch",
        arguments: StoreKind.allCases)
    func predicateSortLimitOffset(_ kind: StoreKind) throws {
        let fixture = StoreFixture(kind)
        let container = try fixture.open()
        let context = ModelContext(container)
        for (name, destination, start) in fiveTrips { context.insert(makeTrip(name, destination, start)) }
        try context.save()

        let portugal = "Portugal"
        var latestInPortugal = FetchDescriptor<Trip>(
            predicate: #Predicate { $0.destination == portugal },
            sortBy: [SortDescriptor(\.startDate, order: .reverse)])
        latestInPortugal.fetchOffset = 1
        latestInPortugal.fetchLimit = 2
        var window = FetchDescriptor<Trip>()
        window.fetchOffset = 1
        window.fetchLimit = 3
        var byNameDescending = FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.name, order: .reverse)])
        byNameDescending.fetchLimit = 2
        let afterDay2 = day(2)
        var pastTheEnd = FetchDescriptor<Trip>(predicate: #Predicate { $0.startDate > afterDay2 })
        pastTheEnd.fetchOffset = 10
        var windowPastTheEnd = FetchDescriptor<Trip>()
        windowPastTheEnd.fetchOffset = 4
        windowPastTheEnd.fetchLimit = 10
        let cases: [(FetchDescriptor<Trip>, [String])] = [
            (latestInPortugal, ["C", "A"]),
            (window, ["B", "C", "D"]),
            (byNameDescending, ["E", "D"]),
            (
                FetchDescriptor(
                    predicate: #Predicate { $0.startDate > afterDay2 }, sortBy: [SortDescriptor(\.startDate)]),
                ["B", "E", "D"]
            ),
            (pastTheEnd, []),
            (windowPastTheEnd, ["E"]),
            (FetchDescriptor(), ["A", "B", "C", "D", "E"]),
        ]
        func check(_ probe: ModelContext) throws {
            for (descriptor, names) in cases {
                let fetched = try probe.fetch(descriptor)
                #expect(fetched.map(\.name) == names)
                #expect(try probe.fetchCount(descriptor) == fetched.count)
                #expect(try probe.fetchIdentifiers(descriptor) == fetched.map(\.persistentModelID))
            }
        }
        // The context that saved them, then a fresh one after a reopen (the closed container's
        // contexts answer nothing any more).
        try check(context)
        try check(ModelContext(try fixture.reopen(container)))
    }

    @Test(
        "Unsaved inserts are fetched and unsaved deletes are not, unless includePendingChanges is false",
        arguments: StoreKind.allCases)
    func includePendingChanges(_ kind: StoreKind) throws {
        let fixture = StoreFixture(kind)
        let container = try fixture.open()
        let context = ModelContext(container)
        let a = makeTrip("A", "Portugal", 1)
        context.insert(a)
        context.insert(makeTrip("B", "Spain", 3))
        try context.save()

        let c = makeTrip("C", "Portugal", 2)
        context.insert(c)
        context.delete(a)
        let inPortugal = #Predicate<Trip> { $0.destination == "Portugal" }
        var all = FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.name)])
        var portugal = FetchDescriptor<Trip>(predicate: inPortugal)
        #expect(try context.fetch(all).map(\.name) == ["B", "C"])
        #expect(try context.fetchCount(all) == 2)
        #expect(try context.fetchIdentifiers(all) == [context.fetch(all)[0].persistentModelID, c.persistentModelID])
        #expect(try context.fetchIdentifiers(all).last?.isTemporary == true)
        #expect(try context.fetch(portugal).map(\.name) == ["C"])
        #expect(try context.fetchCount(portugal) == 1)
        #expect(try context.fetch(FetchDescriptor<Trip>()).map(\.name).sorted() == ["B", "C"])

        all.includePendingChanges = false
        portugal.includePendingChanges = false
        #expect(try context.fetch(all).map(\.name) == ["A", "B"])
        #expect(try context.fetchCount(all) == 2)
        #expect(try context.fetchIdentifiers(all) == [a.persistentModelID, context.fetch(all)[1].persistentModelID])
        #expect(try context.fetch(portugal).map(\.name) == ["A"])
        #expect(try context.fetchCount(portugal) == 1)
        var unsorted = FetchDescriptor<Trip>()
        unsorted.includePendingChanges = false
        #expect(try context.fetch(unsorted).map(\.name) == ["A", "B"])
        #expect(try context.fetchCount(unsorted) == 2)

        try context.save()
        #expect(try context.fetch(all).map(\.name) == ["B", "C"])
        let fresh = ModelContext(try fixture.reopen(container))
        #expect(try fresh.fetch(all).map(\.name) == ["B", "C"])
    }

    // MARK: Transactions and async save

    @Test("transaction { } saves; a throwing block saves nothing", arguments: StoreKind.allCases)
    func transactionBlock(_ kind: StoreKind) throws {
        struct Abort: Error {}
        let fixture = StoreFixture(kind)
        let container = try fixture.open()
        let context = ModelContext(container)
        let lisbon = makeTrip("Lisbon", "Portugal", 1)
        try context.transaction {
            context.insert(lisbon)
        }
        #expect(!context.hasChanges)
        #expect(!lisbon.persistentModelID.isTemporary)
        #expect(try ModelContext(container).fetch(FetchDescriptor<Trip>()).map(\.name) == ["Lisbon"])

        let porto = makeTrip("Porto", "Portugal", 9)
        #expect(throws: Abort.self) {
            try context.transaction {
                context.insert(porto)
                lisbon.destination = "Mars"
                throw Abort()
            }
        }
        #expect(!context.hasChanges)
        #expect(lisbon.destination == "Portugal")
        #expect(porto.modelContext == nil)
        #expect(porto.persistentModelID.isTemporary)

        let fresh = ModelContext(try fixture.reopen(container))
        let trips = try fresh.fetch(FetchDescriptor<Trip>())
        #expect(trips.map(\.name) == ["Lisbon"])
        #expect(trips.map(\.destination) == ["Portugal"])
    }

    @Test("save() async saves like save()", arguments: StoreKind.allCases)
    func asyncSave(_ kind: StoreKind) async throws {
        let fixture = StoreFixture(kind)
        let container = try fixture.open()
        let context = ModelContext(container)
        let trip = makeTrip("Lisbon", "Portugal", 1)
        trip.bucketList = [BucketListItem(title: "Tram 28", details: "ride it")]
        context.insert(trip)
        try await context.save()
        #expect(!trip.persistentModelID.isTemporary)
        #expect(trip.bucketList.allSatisfy { !$0.persistentModelID.isTemporary })
        #expect(!context.hasChanges)
        trip.destination = "Lisboa"
        try await context.save()
        #expect(!context.hasChanges)

        let fresh = ModelContext(try fixture.reopen(container))
        let trips = try fresh.fetch(FetchDescriptor<Trip>())
        #expect(trips.map(\.destination) == ["Lisboa"])
        #expect(trips.first?.persistentModelID == trip.persistentModelID)
        #expect(trips.first?.bucketList.map(\.title) == ["Tram 28"])
    }

    // MARK: The store refuses bad input

    @Test("Bad saves through the store API throw a typed error and change nothing", arguments: StoreKind.allCases)
    func badInputThroughTheStoreAPI(_ kind: StoreKind) throws {
        let fixture = StoreFixture(kind)
        let container = try fixture.open()
        let context = ModelContext(container)
        let lisbon = makeTrip("Lisbon", "Portugal", 1)
        lisbon.bucketList = [BucketListItem(title: "Tram 28", details: "ride it")]
        context.insert(lisbon)
        try context.save()
        let before = try fixture.allSnapshots(container)
        #expect(before["Trip"]?.count == 1)
        let storeIdentifier = try #require(lisbon.persistentModelID.storeIdentifier)
        let missingStay = try PersistentIdentifier.identifier(
            for: storeIdentifier, entityName: "LivingAccommodation", primaryKey: UUID())
        let missingItem = try PersistentIdentifier.identifier(
            for: storeIdentifier, entityName: "BucketListItem", primaryKey: UUID())
        let missingTrip = try PersistentIdentifier.identifier(for: storeIdentifier, entityName: "Trip", primaryKey: UUID())

        // Every bad insert rides with a good one: the whole save must be refused.
        let goodItem = DefaultSnapshot(
            persistentIdentifier: .temporary(entityName: "BucketListItem"),
            values: [
                "title": .string("Fado"), "details": .string("listen"),
                "hasReservation": .bool(false), "isInPlan": .bool(false),
            ])
        func newTrip(_ values: [String: AttributeValue], dropping dropped: String? = nil) -> DefaultSnapshot {
            var base: [String: AttributeValue] = [
                "name": .string("Porto"), "destination": .string("Portugal"),
                "startDate": .date(day(9)), "endDate": .date(day(11)),
                "bucketList": .array([]), "livingAccommodation": .null,
            ]
            if let dropped { base[dropped] = nil }
            return DefaultSnapshot(
                persistentIdentifier: .temporary(entityName: "Trip"), values: base.merging(values) { $1 })
        }
        func update(_ values: [String: AttributeValue], of identifier: PersistentIdentifier = lisbon.persistentModelID)
            -> DefaultSnapshot
        {
            DefaultSnapshot(persistentIdentifier: identifier, values: values)
        }
        let cases: [(String, DataStoreSaveChangesRequest<DefaultSnapshot>, LogStoreError)] = [
            (
                "unknown entity",
                DataStoreSaveChangesRequest(inserted: [
                    goodItem,
                    DefaultSnapshot(
                        persistentIdentifier: .temporary(entityName: "Spaceship"),
                        values: [:]),
                ]),
                .unknownEntity("Spaceship")
            ),
            (
                "unknown attribute",
                DataStoreSaveChangesRequest(inserted: [goodItem, newTrip(["color": .string("red")])]),
                .unknownAttribute(entity: "Trip", attribute: "color")
            ),
            (
                "wrong value type", DataStoreSaveChangesRequest(inserted: [goodItem, newTrip(["name": .int(3)])]),
                .valueTypeMismatch(entity: "Trip", attribute: "name", expected: "String", value: .int(3))
            ),
            (
                "missing required value",
                DataStoreSaveChangesRequest(inserted: [goodItem, newTrip([:], dropping: "destination")]),
                .missingValue(entity: "Trip", attribute: "destination")
            ),
            (
                "reference to a missing model",
                DataStoreSaveChangesRequest(inserted: [
                    goodItem, newTrip(["livingAccommodation": .reference(missingStay)]),
                ]),
                .missingReference(entity: "Trip", attribute: "livingAccommodation", identifier: missingStay)
            ),
            (
                "wrong value type in an update",
                DataStoreSaveChangesRequest(inserted: [goodItem], updated: [update(["destination": .bool(true)])]),
                .valueTypeMismatch(entity: "Trip", attribute: "destination", expected: "String", value: .bool(true))
            ),
            (
                "unknown attribute in an update",
                DataStoreSaveChangesRequest(inserted: [goodItem], updated: [update(["color": .string("red")])]),
                .unknownAttribute(entity: "Trip", attribute: "color")
            ),
            (
                "reference to a missing model in an update",
                DataStoreSaveChangesRequest(
                    inserted: [goodItem], updated: [update(["bucketList": .array([.reference(missingItem)])])]),
                .missingReference(entity: "Trip", attribute: "bucketList", identifier: missingItem)
            ),
            (
                "update of a model not in the store",
                DataStoreSaveChangesRequest(
                    inserted: [goodItem], updated: [update(["destination": .string("Spain")], of: missingTrip)]),
                .modelNotFound(missingTrip)
            ),
            (
                "delete of a model not in the store",
                DataStoreSaveChangesRequest(inserted: [goodItem], deleted: [update([:], of: missingTrip)]),
                .modelNotFound(missingTrip)
            ),
        ]
        for (label, request, expected) in cases {
            #expect(throws: expected, "\(label)") { _ = try fixture.save(request, in: container) }
            #expect(try fixture.allSnapshots(container) == before, "\(label)")
        }

        // The context is unaffected and keeps working; the refused saves left no trace on disk.
        #expect(!context.hasChanges)
        lisbon.destination = "Lisboa"
        try context.save()
        let reopened = try fixture.reopen(container)
        var expected = before
        expected["Trip"] = before["Trip"]!.map { snapshot in
            var snapshot = snapshot
            snapshot.values["destination"] = .string("Lisboa")
            return snapshot
        }
        #expect(try fixture.allSnapshots(reopened) == expected)
    }
}
