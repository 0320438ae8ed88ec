import Foundation
import LogStore
import LogStoreEngine
import LogStoreTestSupport
import SampleTrips
import Testing

/// `LogStore.replay(directory:fileSystem:through:)`: the read-only fold `logstore replay` prints.
@Suite struct StoreReplayTests {
    static let directory = "/replay"

    /// `idleMarks: false`: no durable-end mark 1 s after the last save (only at close), for a
    /// test that reads the log's end and then expects nothing to follow it.
    static func container(_ fileSystem: SimulatedFileSystem, idleMarks: Bool = true) throws -> ModelContainer {
        var configuration = LogStoreConfiguration(directory: directory, fileSystem: fileSystem)
        if !idleMarks { configuration.durableEndMarkDelay = nil }
        return try ModelContainer(for: sampleTripsModels, configuration: configuration)
    }

    static func day(_ number: Int) -> Date { Date(timeIntervalSince1970: Double(number) * 86_400) }

    /// A few saves of every kind: inserts with relationships, an update from another context, an
    /// upsert, and a delete that cascades. Returns the token and the store's snapshots after each.
    static func saveHistory(_ container: ModelContainer) throws -> [(DefaultHistoryToken, [String: [DefaultSnapshot]])] {
        let store = container.dataStore(as: LogStore.self)!
        var history: [(DefaultHistoryToken, [String: [DefaultSnapshot]])] = []
        func record() { history.append((store.currentToken!, store.allSnapshots())) }

        let app = ModelContext(container)
        app.author = "app"
        let lisbon = Trip(name: "Lisbon", destination: "Portugal", startDate: day(1), endDate: day(5))
        lisbon.bucketList = [
            BucketListItem(title: "Tram 28", details: "ride it"),
            BucketListItem(title: "Belém", details: "pastéis", hasReservation: true),
        ]
        lisbon.livingAccommodation = LivingAccommodation(address: "Rua 1", placeName: "Casa")
        let kyoto = Trip(name: "Kyoto", destination: "Japan", startDate: day(10), endDate: day(20))
        kyoto.bucketList = [BucketListItem(title: "Inari", details: "at dawn", isInPlan: true)]
        kyoto.livingAccommodation = LivingAccommodation(address: "Higashiyama 5", placeName: "Ryokan")
        let oslo = Trip(name: "Oslo", destination: "Norway", startDate: day(30), endDate: day(33))
        app.insert(lisbon)
        app.insert(kyoto)
        app.insert(oslo)
        try app.save()
        record()

        let widget = ModelContext(container)
        widget.author = "widget"
        let fetched = try widget.fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.name == "Kyoto" }))
        fetched.first!.livingAccommodation!.isConfirmed = true
        fetched.first!.destination = "Japan (Kansai)"
        try widget.save()
        record()

        app.insert(Trip(name: "Oslo", destination: "Norway (fjords)", startDate: day(30), endDate: day(33)))
        try app.save()
        record()

        app.delete(lisbon)
        try app.save()
        record()
        return history
    }

    /// The values a model of each SampleTrips entity holds, as the store keeps them.
    static func values(_ trip: Trip) -> [String: AttributeValue] {
        [
            "name": .string(trip.name), "destination": .string(trip.destination), "startDate": .date(trip.startDate),
            "endDate": .date(trip.endDate),
            "bucketList": .array(trip.bucketList.map { .reference($0.persistentModelID) }),
            "livingAccommodation": trip.livingAccommodation.map { .reference($0.persistentModelID) } ?? .null,
        ]
    }

    static func values(_ item: BucketListItem) -> [String: AttributeValue] {
        [
            "title": .string(item.title), "details": .string(item.details),
            "hasReservation": .bool(item.hasReservation),
            "isInPlan": .bool(item.isInPlan),
            "trip": item.trip.map { .reference($0.persistentModelID) } ?? .null,
        ]
    }

    static func values(_ stay: LivingAccommodation) -> [String: AttributeValue] {
        [
            "address": .string(stay.address), "placeName": .string(stay.placeName),
            "isConfirmed": .bool(stay.isConfirmed),
            "trip": stay.trip.map { .reference($0.persistentModelID) } ?? .null,
        ]
    }

    static func rows(_ state: StoreState, _ entityName: String) -> [DefaultSnapshot] {
        state.entity(named: entityName)?.rows ?? []
    }

    @Test func replayReturnsWhatFetchReturns() throws {
        let fileSystem = SimulatedFileSystem()
        let container = try Self.container(fileSystem)
        let history = try Self.saveHistory(container)
        // Beside the live writer: no lock is taken.
        let state = try LogStore.replay(directory: Self.directory, fileSystem: fileSystem)

        let context = ModelContext(container)
        let trips = try context.fetch(FetchDescriptor<Trip>())
        let items = try context.fetch(FetchDescriptor<BucketListItem>())
        let stays = try context.fetch(FetchDescriptor<LivingAccommodation>())
        #expect(trips.map(\.name) == ["Kyoto", "Oslo"])
        #expect(items.map(\.title) == ["Inari"])
        #expect(stays.map(\.placeName) == ["Ryokan"])
        // The same models, in the same (insertion) order, with the same values.
        #expect(
            Self.rows(state, "Trip")
                == trips.map { DefaultSnapshot(persistentIdentifier: $0.persistentModelID, values: Self.values($0)) })
        #expect(
            Self.rows(state, "BucketListItem")
                == items.map { DefaultSnapshot(persistentIdentifier: $0.persistentModelID, values: Self.values($0)) })
        #expect(
            Self.rows(state, "LivingAccommodation")
                == stays.map { DefaultSnapshot(persistentIdentifier: $0.persistentModelID, values: Self.values($0)) })
        #expect(Self.rows(state, "Trip").first?["destination"] == .string("Japan (Kansai)"))
        #expect(Self.rows(state, "Trip").last?["destination"] == .string("Norway (fjords)"))
        #expect(Self.rows(state, "LivingAccommodation").first?["isConfirmed"] == .bool(true))

        let store = container.dataStore(as: LogStore.self)!
        #expect(state.storeIdentifier.uuidString == store.identifier)
        #expect(state.schemaVersion == 1)
        #expect(state.entities.map(\.name) == ["Trip", "BucketListItem", "LivingAccommodation"])
        #expect(
            state.entity(named: "Trip")?.attributeNames
                == ["name", "destination", "startDate", "endDate", "bucketList", "livingAccommodation"])
        #expect(state.transactionCount == history.count)
        #expect(state.lastToken == store.currentToken)
        for entity in state.entities { #expect(entity.rows == store.allSnapshots()[entity.name]) }
    }

    @Test func replayThroughATokenIsTheStateRightAfterThatSave() throws {
        let fileSystem = SimulatedFileSystem()
        let history: [(DefaultHistoryToken, [String: [DefaultSnapshot]])]
        do {
            let container = try Self.container(fileSystem)
            history = try Self.saveHistory(container)
            try container.dataStore(as: LogStore.self)!.close()
        }
        #expect(history.count == 4)
        for (index, (token, snapshots)) in history.enumerated() {
            let state = try LogStore.replay(directory: Self.directory, fileSystem: fileSystem, through: token.offset)
            #expect(state.transactionCount == index + 1)
            #expect(state.lastToken == token)
            for name in ["Trip", "BucketListItem", "LivingAccommodation"] {
                #expect(Self.rows(state, name) == snapshots[name], "\(name) after save \(index + 1)")
            }
        }
        // The offset of a save's record is inclusive: one byte before it, the save is not folded.
        let beforeSecond = try LogStore.replay(
            directory: Self.directory, fileSystem: fileSystem,
            through: history[1].0.offset - 1)
        #expect(beforeSecond.lastToken == history[0].0)
        #expect(Self.rows(beforeSecond, "Trip") == history[0].1["Trip"])
        // Before the first transaction: the schema, and no models.
        let beforeFirst = try LogStore.replay(
            directory: Self.directory, fileSystem: fileSystem,
            through: history[0].0.offset - 1)
        #expect(beforeFirst.schemaVersion == 1)
        #expect(beforeFirst.transactionCount == 0)
        #expect(beforeFirst.lastToken == nil)
        #expect(beforeFirst.entities.allSatisfy { $0.rows.isEmpty })
        // Through the end is everything.
        let all = try LogStore.replay(directory: Self.directory, fileSystem: fileSystem, through: .max)
        #expect(all == (try LogStore.replay(directory: Self.directory, fileSystem: fileSystem)))
        #expect(all.lastToken == history.last!.0)
    }

    @Test func aByteLogHasNoSchema() throws {
        let fileSystem = SimulatedFileSystem()
        var options = LogOptions()
        options.fileSystem = fileSystem
        let log = try Log.open(directory: Self.directory, options: options)
        for number in 0..<5 { _ = try log.append(Array(#"{"n":\#(number)}"#.utf8)) }
        try log.close()
        let state = try LogStore.replay(directory: Self.directory, fileSystem: fileSystem)
        #expect(state.schemaVersion == nil)
        #expect(state.entities.isEmpty)
        #expect(state.transactionCount == 0)
        #expect(state.lastToken == nil)
    }

    @Test func aMissingStoreIsALogError() throws {
        let fileSystem = SimulatedFileSystem()
        #expect {
            try LogStore.replay(directory: "/nowhere", fileSystem: fileSystem)
        } throws: { error in
            guard let error = error as? LogStoreError else { return false }
            return error.code == .notAStore && error.underlying?.code == .notAStore
        }
    }
}
