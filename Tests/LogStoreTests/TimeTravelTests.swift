import ArgumentParser
import Foundation
import LogStoreEngine
import LogStoreTestSupport
import SampleTrips
import Testing

@testable import LogStore
@testable import LogStoreCommands

/// `LogStore.replay(directory:until:)` and `logstore replay --until`.
@Suite struct TimeTravelTests {
    static func json(_ token: DefaultHistoryToken) throws -> String {
        String(decoding: try JSONEncoder().encode(token), as: UTF8.self)
    }

    static func expectState(_ state: StoreState, equals snapshots: [String: [DefaultSnapshot]]) {
        for entity in ["Trip", "BucketListItem", "LivingAccommodation"] {
            #expect(StoreReplayTests.rows(state, entity) == (snapshots[entity] ?? []), "\(entity)")
        }
    }

    @Test(
        "replay(until:) gives the state exactly as after each save, from the log start or the newest checkpoint before it"
    )
    func untilEachSave() throws {
        let fileSystem = SimulatedFileSystem()
        var configuration = LogStoreConfiguration(directory: StoreReplayTests.directory, fileSystem: fileSystem)
        configuration.checkpointIntervalByteCount = 0
        // Two read-only replays are compared while the store is open: no idle durable-end mark
        // may be half written between them (the second would report it as an unread tail).
        configuration.durableEndMarkDelay = nil
        let container = try ModelContainer(for: sampleTripsModels, configuration: configuration)
        let store = try #require(container.dataStore(as: LogStore.self))
        var history = try StoreReplayTests.saveHistory(container)  // 4 saves
        let checkpoint = try store.checkpoint()  // after the 4th save
        let context = ModelContext(container)
        context.insert(Trip(name: "Porto", destination: "Portugal", startDate: day(40), endDate: day(42)))
        try context.save()
        history.append((store.currentToken!, store.allSnapshots()))
        let porto = try context.fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.name == "Porto" }))
        porto[0].destination = "Portugal (north)"
        try context.save()
        history.append((store.currentToken!, store.allSnapshots()))
        #expect(Set(history.map(\.0)).count == 6)

        for (index, (token, snapshots)) in history.enumerated() {
            let state = try LogStore.replay(
                directory: StoreReplayTests.directory, fileSystem: fileSystem, until: .token(token))
            Self.expectState(state, equals: snapshots)
            #expect(state.lastToken == token)
            // Saves 4 to 6 start from the checkpoint written right after save 4 (X = its end).
            #expect(state.checkpointOffset == (index >= 3 ? checkpoint : nil), "save \(index + 1)")
            let bare = try LogStore.replay(
                directory: StoreReplayTests.directory, fileSystem: fileSystem,
                until: .offset(token.offset))
            #expect(bare == state)
        }
    }

    @Test("replay(until:) refuses another store's token, a check mismatch, a position past the end or inside a record")
    func invalidPositions() throws {
        let fileSystem = SimulatedFileSystem()
        // Without the idle durable-end mark: on a loaded machine it landed at the end read below
        // (more than 1 s after the last save), and `.offset(end)` was then a mark, not past the end.
        let container = try StoreReplayTests.container(fileSystem, idleMarks: false)
        let history = try StoreReplayTests.saveHistory(container)
        let store = try #require(container.dataStore(as: LogStore.self))
        let token = history[1].0
        let directory = StoreReplayTests.directory
        func replay(_ position: HistoryPosition) throws(LogStoreError) -> StoreState {
            try LogStore.replay(directory: directory, fileSystem: fileSystem, until: position)
        }
        let foreign = DefaultHistoryToken(storeIdentifier: UUID(), offset: token.offset, check: token.check)
        #expect(throws: LogStoreError.historyTokenOfAnotherStore(foreign, store: token.storeIdentifier)) {
            try replay(.token(foreign))
        }
        let wrongCheck = DefaultHistoryToken(
            storeIdentifier: token.storeIdentifier, offset: token.offset, check: token.check ^ 1)
        #expect {
            try replay(.token(wrongCheck))
        } throws: { error in
            if let error = error as? LogStoreError, error.code == .historyTokenInvalid {
                return error.token == wrongCheck && error.message.contains("has check \(token.check)")
            }
            return false
        }
        let end = store.logEndOffset
        #expect(throws: LogStoreError.historyPositionPastEnd(offset: end, end: end)) { try replay(.offset(end)) }
        do {
            _ = try replay(.offset(token.offset + 1))
            Issue.record("a position inside a record was accepted")
        } catch {
            guard case LogStoreError.historyPositionNotATransaction = error else {
                Issue.record("\(error)")
                return
            }
        }
        // The log's first record is the schema record, not a transaction.
        do {
            _ = try replay(.offset(0))
            Issue.record("a schema record was accepted")
        } catch {
            guard case LogStoreError.historyPositionNotATransaction = error else {
                Issue.record("\(error)")
                return
            }
            #expect(error.message.contains("schema"))
        }
    }

    @Test("logstore replay --until prints the state after that save; bad positions exit with code 2")
    func command() throws {
        let temporary = TemporaryDirectory("until")
        let directory = temporary.path
        defer { temporary.remove() }
        let container = try ModelContainer(
            for: sampleTripsModels, configuration: LogStoreConfiguration(directory: directory))
        let history = try StoreReplayTests.saveHistory(container)
        try container.dataStore(as: LogStore.self)!.close()

        for (token, snapshots) in history {
            for position in [try Self.json(token), String(token.offset)] {
                let state = try ReplayCommand.state(directory: directory, until: position)
                Self.expectState(state, equals: snapshots)
                let output = ReplayJSON(state)
                #expect(output.lastToken == token)
                #expect(
                    output.entities["Trip"]?.map { $0.id }
                        == snapshots["Trip"]?.map { $0.persistentIdentifier.primaryKey.uuidString })
                #expect(ReplayCommand.text(state).contains("the last at log offset \(Format.grouped(token.offset))"))
            }
        }
        // After the upsert (save 3) Oslo's destination changed; after the delete (save 4) Lisbon is gone.
        let third = try ReplayCommand.state(directory: directory, until: Self.json(history[2].0))
        #expect(ReplayCommand.text(third).contains("Norway (fjords)") && ReplayCommand.text(third).contains("Lisbon"))
        let fourth = try ReplayCommand.state(directory: directory, until: Self.json(history[3].0))
        #expect(!ReplayCommand.text(fourth).contains("Lisbon"))

        let token = history[0].0
        let foreign = DefaultHistoryToken(storeIdentifier: UUID(), offset: token.offset, check: token.check)
        let badCheck = DefaultHistoryToken(
            storeIdentifier: token.storeIdentifier, offset: token.offset, check: token.check &+ 1)
        for bad in [
            "not a position", try Self.json(foreign), try Self.json(badCheck), "999999999", String(token.offset + 1),
        ] {
            let command = try ReplayCommand.parse([directory, "--until", bad, "--json"])
            // Text that is no position at all is a usage error (64); a well-formed position the
            // store refuses is exit code 2.
            #expect(throws: ExitCode(bad == "not a position" ? 64 : 2), "\(bad)") { try command.run() }
        }
    }
}

/// Delete rules and the unique collision policy on the SampleTrips model.
@Suite struct DeleteRuleAndUniqueTests {
    /// A traveller who may not be deleted while they still have trips (deny).
    final class Traveller: PersistentModel {
        static let schemaProperties: [ModelProperty<Traveller>] = [
            .attribute("name", \.name),
            .toMany("trips", \.trips, deleteRule: .deny),
        ]
        let modelState = ModelState()
        var name = ""
        var trips: [Trip] = []
        required init() {}
    }

    static func changes(at token: DefaultHistoryToken, of store: LogStore) throws -> [ResolvedChange] {
        let record = try #require(try store.log.firstRecord(atOrAfter: token.offset))
        #expect(record.offset == token.offset && record.type == .transaction)
        let table = store.inner.withLock { $0.table }
        return try TransactionRecord.decode(record.payload, table: table, storeIdentifier: store.identifier).changes
    }

    @Test(
        "Deleting a trip cascades to its bucket list and accommodation; each cascaded delete is a change in the record")
    func cascadeIsRecorded() throws {
        let fileSystem = SimulatedFileSystem()
        let container = try makeContainer(fileSystem)
        let store = try #require(container.dataStore(as: LogStore.self))
        let context = ModelContext(container)
        let trip = Trip(name: "Lisbon", destination: "Portugal", startDate: day(1), endDate: day(5))
        trip.bucketList = [
            BucketListItem(title: "Tram 28", details: "ride"), BucketListItem(title: "Belém", details: "eat"),
        ]
        trip.livingAccommodation = LivingAccommodation(address: "Rua 1", placeName: "Casa")
        let other = Trip(name: "Oslo", destination: "Norway", startDate: day(9), endDate: day(10))
        other.bucketList = [BucketListItem(title: "Fjord", details: "cruise")]
        context.insert(trip)
        context.insert(other)
        try context.save()
        let cascaded = Set(trip.bucketList.map(\.persistentModelID) + [trip.livingAccommodation!.persistentModelID])
        let tripID = trip.persistentModelID

        context.delete(trip)
        try context.save()
        let token = try #require(store.currentToken)
        let changes = try Self.changes(at: token, of: store)
        let deleted = changes.compactMap { change -> PersistentIdentifier? in
            if case .delete(let identifier, _) = change { identifier } else { nil }
        }
        #expect(Set(deleted) == cascaded.union([tripID]))
        #expect(deleted.count == 4)
        // The tombstone keeps the trip's preserved values.
        let tombstone = changes.compactMap { change -> [String: AttributeValue]? in
            if case .delete(let identifier, let tombstone) = change, identifier == tripID { tombstone } else { nil }
        }.first
        #expect(tombstone?["name"] == .string("Lisbon"))
        let fresh = ModelContext(container)
        #expect(try fresh.fetch(FetchDescriptor<BucketListItem>()).map(\.title) == ["Fjord"])
        #expect(try fresh.fetchCount(FetchDescriptor<LivingAccommodation>()) == 0)
        // Replay (open) folds the recorded effects to the same state, without running delete rules.
        let replayed = try LogStore.replay(directory: "/trips", fileSystem: fileSystem)
        #expect(
            StoreReplayTests.rows(replayed, "BucketListItem").map(\.persistentIdentifier)
                == [other.bucketList[0].persistentModelID])
    }

    @Test("A deny rule refuses the delete while trips remain, writes nothing, and allows it once they are gone")
    func denyRefuses() throws {
        let fileSystem = SimulatedFileSystem()
        let container = try ModelContainer(
            for: sampleTripsModels + [Traveller.self],
            configuration: LogStoreConfiguration(directory: "/deny", fileSystem: fileSystem))
        let store = try #require(container.dataStore(as: LogStore.self))
        let context = ModelContext(container)
        let traveller = Traveller()
        traveller.name = "Ana"
        let trip = Trip(name: "Kyoto", destination: "Japan", startDate: day(1), endDate: day(3))
        trip.bucketList = [BucketListItem(title: "Inari", details: "dawn")]
        traveller.trips = [trip]
        context.insert(traveller)
        try context.save()
        let before = store.logEndOffset

        context.delete(traveller)
        #expect(
            throws: LogStoreError.deleteDenied(
                traveller.persistentModelID, relationship: "trips",
                related: trip.persistentModelID)
        ) { try context.save() }
        #expect(store.logEndOffset == before)
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<Traveller>()) == 1)

        context.rollback()
        context.delete(trip)  // cascades to its bucket list, nullifies the traveller's reference
        try context.save()
        let changes = try Self.changes(at: store.currentToken!, of: store)
        #expect(changes.contains(.update(traveller.persistentModelID, ["trips": .array([])])))
        #expect(changes.filter { if case .delete = $0 { true } else { false } }.count == 2)
        context.delete(traveller)
        try context.save()
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<Traveller>()) == 0)
    }

    @Test(
        "uniqueCollisionPolicy .throw names the entity and values and writes nothing; .upsert (default) updates",
        arguments: [UniqueCollisionPolicy.throw, .upsert])
    func uniquePolicy(policy: UniqueCollisionPolicy) throws {
        let fileSystem = SimulatedFileSystem()
        var configuration = LogStoreConfiguration(directory: "/unique", fileSystem: fileSystem)
        configuration.uniqueCollisionPolicy = policy
        let container = try ModelContainer(for: sampleTripsModels, configuration: configuration)
        let store = try #require(container.dataStore(as: LogStore.self))
        let context = ModelContext(container)
        context.insert(Trip(name: "Lisbon", destination: "Portugal", startDate: day(1), endDate: day(5)))
        try context.save()
        let before = store.logEndOffset

        let again = ModelContext(container)
        again.insert(Trip(name: "Lisbon", destination: "Portugal (again)", startDate: day(1), endDate: day(5)))
        let destinations = { try ModelContext(container).fetch(FetchDescriptor<Trip>()).map(\.destination) }
        switch policy {
        case .throw:
            let error = LogStoreError.uniqueConstraintViolation(
                entity: "Trip", constraint: ["name", "startDate", "endDate"],
                values: [.string("Lisbon"), .date(day(1)), .date(day(5))])
            #expect(throws: error) { try again.save() }
            #expect(error.description.contains("Trip") && error.description.contains("\"Lisbon\""))
            #expect(store.logEndOffset == before)
            #expect(try destinations() == ["Portugal"])
            // Two colliding inserts in one save throw too; "e\u{301}" collides with "é".
            let pair = ModelContext(container)
            pair.insert(Trip(name: "Évora", destination: "a", startDate: day(7), endDate: day(8)))
            pair.insert(Trip(name: "E\u{301}vora", destination: "b", startDate: day(7), endDate: day(8)))
            #expect(throws: LogStoreError.self) { try pair.save() }
            #expect(store.logEndOffset == before)
        case .upsert:
            try again.save()
            #expect(try destinations() == ["Portugal (again)"])
        }
    }
}
