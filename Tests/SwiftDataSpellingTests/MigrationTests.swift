import Foundation
import LogStore
import LogStoreTestSupport
import Synchronization
import Testing

// SampleTrips-like models through three versions, written as SwiftData code writes them:
// V1 → V2 is lightweight (an attribute added, two renamed with `originalName`); V2 → V3 is custom
// (`willMigrate` tidies the old places, `didMigrate` splits each into a new required `city` and
// `country`, and `place` goes).

enum TripsSchemaV1: VersionedSchema {
    static let versionIdentifier = Schema.Version(1, 0, 0)
    static var models: [any PersistentModel.Type] { [Trip.self, BucketListItem.self] }

    @Model
    final class Trip {
        #Unique<Trip>([\.name, \.startDate])
        @Attribute(.preserveValueOnDeletion) var name: String
        var destination: String
        var startDate: Date
        var rating: Int?
        @Relationship(deleteRule: .cascade, inverse: \BucketListItem.trip)
        var bucketList: [BucketListItem] = [BucketListItem]()

        init(name: String, destination: String, startDate: Date, rating: Int? = nil) {
            self.name = name
            self.destination = destination
            self.startDate = startDate
            self.rating = rating
        }
    }

    @Model
    final class BucketListItem {
        var title: String
        var details: String
        var trip: Trip?

        init(title: String, details: String) {
            self.title = title
            self.details = details
        }
    }
}

enum TripsSchemaV2: VersionedSchema {
    static let versionIdentifier = Schema.Version(2, 0, 0)
    static var models: [any PersistentModel.Type] { [Trip.self, BucketListItem.self] }

    @Model
    final class Trip {
        #Unique<Trip>([\.name, \.startDate])
        @Attribute(.preserveValueOnDeletion) var name: String
        @Attribute(originalName: "destination") var place: String
        var startDate: Date
        var notes: String?
        /// Optional in V1; required here, with a default for the trips that had none.
        var rating: Int = 3
        /// New and required, with a default.
        var isFavorite: Bool = false
        @Relationship(deleteRule: .cascade, inverse: \BucketListItem.trip)
        var bucketList: [BucketListItem] = [BucketListItem]()

        init(name: String, place: String, startDate: Date, notes: String? = nil) {
            self.name = name
            self.place = place
            self.startDate = startDate
            self.notes = notes
        }
    }

    @Model
    final class BucketListItem {
        var title: String
        @Attribute(originalName: "details") var summary: String
        var trip: Trip?

        init(title: String, summary: String) {
            self.title = title
            self.summary = summary
        }
    }
}

enum TripsSchemaV3: VersionedSchema {
    static let versionIdentifier = Schema.Version(3, 0, 0)
    static var models: [any PersistentModel.Type] { [Trip.self, BucketListItem.self] }

    @Model
    final class Trip {
        #Unique<Trip>([\.name, \.startDate])
        @Attribute(.preserveValueOnDeletion) var name: String
        var city: String
        var country: String
        var startDate: Date
        var notes: String?
        var rating: Int = 3
        var isFavorite: Bool = false
        @Relationship(deleteRule: .cascade, inverse: \BucketListItem.trip)
        var bucketList: [BucketListItem] = [BucketListItem]()

        init(name: String, city: String, country: String, startDate: Date, notes: String? = nil) {
            self.name = name
            self.city = city
            self.country = country
            self.startDate = startDate
            self.notes = notes
        }
    }

    @Model
    final class BucketListItem {
        var title: String
        var summary: String
        var trip: Trip?

        init(title: String, summary: String) {
            self.title = title
            self.summary = summary
        }
    }
}

/// The places `willMigrate` read, for `didMigrate` to split (SwiftData's sample keeps them in a
/// static; keyed by identifier here, as tests run side by side on different stores).
let placesBeingSplit = Mutex<[PersistentIdentifier: String]>([:])

enum TripsMigrationPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [TripsSchemaV1.self, TripsSchemaV2.self, TripsSchemaV3.self] }
    static var stages: [MigrationStage] { [migrateV1toV2, migrateV2toV3] }

    static let migrateV1toV2 = MigrationStage.lightweight(fromVersion: TripsSchemaV1.self, toVersion: TripsSchemaV2.self)

    static let migrateV2toV3 = MigrationStage.custom(
        fromVersion: TripsSchemaV2.self, toVersion: TripsSchemaV3.self,
        willMigrate: { context in
            for trip in try context.fetch(FetchDescriptor<TripsSchemaV2.Trip>()) {
                let tidy = trip.place.trimmingCharacters(in: .whitespaces)
                if tidy != trip.place { trip.place = tidy }
                placesBeingSplit.withLock { $0[trip.persistentModelID] = tidy }
            }
            try context.save()
        },
        didMigrate: { context in
            for trip in try context.fetch(FetchDescriptor<TripsSchemaV3.Trip>()) {
                let place = placesBeingSplit.withLock { $0.removeValue(forKey: trip.persistentModelID) } ?? ""
                let parts = place.split(separator: ",", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                trip.city = parts.first ?? ""
                trip.country = parts.count > 1 ? parts[1] : ""
            }
            try context.save()
        })
}

/// The V2 → V3 stage without its `didMigrate`: it leaves the new required attributes empty.
enum TripsPlanWithoutFill: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { TripsMigrationPlan.schemas }
    static var stages: [MigrationStage] {
        [
            TripsMigrationPlan.migrateV1toV2,
            .custom(fromVersion: TripsSchemaV2.self, toVersion: TripsSchemaV3.self, willMigrate: nil, didMigrate: nil),
        ]
    }
}

/// The V2 → V3 stage with a didMigrate that fills nothing, or a willMigrate that throws.
enum TripsPlanWithEmptyDidMigrate: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { TripsMigrationPlan.schemas }
    static var stages: [MigrationStage] {
        [
            TripsMigrationPlan.migrateV1toV2,
            .custom(
                fromVersion: TripsSchemaV2.self, toVersion: TripsSchemaV3.self, willMigrate: nil,
                didMigrate: { context in
                    // Touches only the notes: city and country stay empty.
                    for trip in try context.fetch(FetchDescriptor<TripsSchemaV3.Trip>()) { trip.notes = "seen" }
                }),
        ]
    }
}

struct StageFailure: Error {}

enum TripsPlanWithFailingWillMigrate: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { TripsMigrationPlan.schemas }
    static var stages: [MigrationStage] {
        [
            TripsMigrationPlan.migrateV1toV2,
            .custom(
                fromVersion: TripsSchemaV2.self, toVersion: TripsSchemaV3.self,
                willMigrate: { context in
                    for trip in try context.fetch(FetchDescriptor<TripsSchemaV2.Trip>()) { trip.notes = "half done" }
                    throw StageFailure()
                }, didMigrate: nil),
        ]
    }
}

@Suite struct MigrationTests {
    static let directory = "/trips"
    static let start = Date(timeIntervalSince1970: 1_750_000_000)

    static func configuration(_ fileSystem: SimulatedFileSystem) -> LogStoreConfiguration {
        var configuration = LogStoreConfiguration(directory: directory, fileSystem: fileSystem)
        // Every write to a segment is a record (no zeros ahead, no idle mark): a fault armed for
        // the n-th write hits the n-th record.
        configuration.preallocationAheadByteCount = 0
        configuration.durableEndMarkDelay = nil
        return configuration
    }

    static func open(
        _ version: any VersionedSchema.Type, plan: (any SchemaMigrationPlan.Type)?, _ fileSystem: SimulatedFileSystem
    ) throws -> ModelContainer {
        try ModelContainer(
            for: Schema(versionedSchema: version), migrationPlan: plan, configurations: configuration(fileSystem))
    }

    static func close(_ container: ModelContainer) throws { try container.dataStore(as: LogStore.self)!.close() }

    /// Two V1 trips (one with a bucket-list item), then an edit: three transactions.
    static func writeVersion1(_ fileSystem: SimulatedFileSystem) throws -> [DefaultHistoryToken] {
        let container = try ModelContainer(
            for: TripsSchemaV1.Trip.self, configurations: configuration(fileSystem))
        let store = try #require(container.dataStore(as: LogStore.self))
        let context = ModelContext(container)
        let lisbon = TripsSchemaV1.Trip(name: "Lisbon", destination: "Lisbon, Portugal ", startDate: start, rating: 5)
        lisbon.bucketList.append(TripsSchemaV1.BucketListItem(title: "Tram 28", details: "end to end"))
        context.insert(lisbon)
        try context.save()
        var tokens = [try #require(store.currentToken)]
        context.insert(TripsSchemaV1.Trip(name: "Kyoto", destination: "Kyoto, Japan", startDate: start + 86_400))
        try context.save()
        tokens.append(try #require(store.currentToken))
        lisbon.bucketList[0].details = "from Martim Moniz"
        try context.save()
        tokens.append(try #require(store.currentToken))
        try close(container)
        return tokens
    }

    static func trips(_ state: StoreState) -> [[String: AttributeValue]] {
        (state.entity(named: "Trip")?.rows ?? []).map(\.values).sorted { "\($0["name"]!)" < "\($1["name"]!)" }
    }

    static func fetchHistory(_ container: ModelContainer) throws -> [DefaultHistoryTransaction] {
        try ModelContext(container).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
    }

    static func insertValues(_ transaction: DefaultHistoryTransaction) -> [String: [String: AttributeValue]] {
        var result: [String: [String: AttributeValue]] = [:]
        for change in transaction.changes {
            if case .insert(let insert) = change { result[insert.changedPersistentIdentifier.entityName] = insert.values }
        }
        return result
    }

    @Test("three versions: lightweight (added, renamed), custom (will/did), with history and time travel across each")
    func threeVersions() throws {
        let fileSystem = SimulatedFileSystem()
        let v1Tokens = try Self.writeVersion1(fileSystem)
        let v1State = try LogStore.replay(directory: Self.directory, fileSystem: fileSystem)

        // V1 → V2, lightweight: renamed values keep their identity and history.
        let v2 = try Self.open(TripsSchemaV2.self, plan: TripsMigrationPlan.self, fileSystem)
        do {
            let context = ModelContext(v2)
            let trips = try context.fetch(FetchDescriptor<TripsSchemaV2.Trip>(sortBy: [SortDescriptor(\.name)]))
            #expect(trips.map(\.place) == ["Kyoto, Japan", "Lisbon, Portugal "])
            #expect(trips.map(\.notes) == [nil, nil])
            // Optional to required: Kyoto had no rating and gets the default; Lisbon keeps its 5.
            #expect(trips.map(\.rating) == [3, 5])
            #expect(trips.map(\.isFavorite) == [false, false])
            #expect(trips[1].bucketList.map(\.summary) == ["from Martim Moniz"])
            // A save under V2, then its history beside V1's: V1's changes read under the new names.
            trips[0].notes = "cherry blossoms"
            try context.save()
            let history = try Self.fetchHistory(v2)
            #expect(history.count == 4)
            let firstInsert = Self.insertValues(history[0])
            #expect(firstInsert["Trip"]?["place"] == .string("Lisbon, Portugal "))
            #expect(firstInsert["Trip"]?["destination"] == nil)
            #expect(firstInsert["BucketListItem"]?["summary"] == .string("end to end"))
            // Typed history of V2 models reads V1's update under the renamed key path.
            guard case .update(let update as DefaultHistoryUpdate<TripsSchemaV2.BucketListItem>) = history[2].changes.first
            else {
                Issue.record("\(history[2].changes)")
                return
            }
            #expect(update[\.summary] == "from Martim Moniz")
        }
        let v2Token = try #require(v2.dataStore(as: LogStore.self)!.currentToken)
        try Self.close(v2)

        // V2 → V3, custom: willMigrate writes under V2, didMigrate fills the required city and country.
        let v3 = try Self.open(TripsSchemaV3.self, plan: TripsMigrationPlan.self, fileSystem)
        let store = try #require(v3.dataStore(as: LogStore.self))
        let trips = try ModelContext(v3).fetch(FetchDescriptor<TripsSchemaV3.Trip>(sortBy: [SortDescriptor(\.name)]))
        #expect(trips.map(\.city) == ["Kyoto", "Lisbon"])
        #expect(trips.map(\.country) == ["Japan", "Portugal"])
        #expect(trips.map(\.notes) == ["cherry blossoms", nil])
        #expect(trips.map(\.rating) == [3, 5])
        #expect(trips[1].bucketList.map(\.summary) == ["from Martim Moniz"])
        let history = try Self.fetchHistory(v3)
        #expect(history.count == 6)
        #expect(history.prefix(4).map(\.token) == v1Tokens + [v2Token])
        #expect(history[4].author == "LogStore migration 2.0.0 → 3.0.0 (willMigrate)")
        #expect(history[5].author == "LogStore migration 2.0.0 → 3.0.0 (didMigrate)")
        // The willMigrate transaction is an update of V2's place (read now without it: V3 removed it).
        #expect(history[4].changes.count == 1)
        #expect(history[5].changes.count == 2)
        // V1's insert under V3's names: renamed values kept, removed ones left out.
        let firstInsert = Self.insertValues(history[0])
        #expect(firstInsert["Trip"]?["place"] == nil && firstInsert["Trip"]?["destination"] == nil)
        #expect(firstInsert["Trip"]?["name"] == .string("Lisbon"))
        #expect(firstInsert["BucketListItem"]?["summary"] == .string("end to end"))

        // History fetches bounded before, across and after the migrations.
        var afterV2 = HistoryDescriptor<DefaultHistoryTransaction>()
        afterV2.predicate = #Predicate { $0.token > v2Token }
        #expect(try ModelContext(v3).fetchHistory(afterV2).map(\.token) == [history[4].token, history[5].token])
        let lastV1 = v1Tokens[2]
        var upToV1 = HistoryDescriptor<DefaultHistoryTransaction>()
        upToV1.predicate = #Predicate { $0.token <= lastV1 }
        #expect(try ModelContext(v3).fetchHistory(upToV1).map(\.token) == v1Tokens)
        // From the directory, without model types (the tool's path): the same transactions and names.
        let fromDirectory = try LogStore.fetchHistory(
            directory: Self.directory, fileSystem: fileSystem, HistoryDescriptor<DefaultHistoryTransaction>())
        #expect(fromDirectory.map(\.token) == history.map(\.token))
        #expect(Self.insertValues(fromDirectory[0])["BucketListItem"]?["summary"] == .string("end to end"))
        #expect(Self.insertValues(fromDirectory[0])["Trip"]?["destination"] == nil)

        // Time travel before, across and after each migration: exactly the state of that moment.
        let beforeV2 = try LogStore.replay(directory: Self.directory, fileSystem: fileSystem, until: .token(v1Tokens[2]))
        #expect(Self.trips(beforeV2) == Self.trips(v1State))
        #expect(Self.trips(beforeV2).first?["destination"] == .string("Kyoto, Japan"))
        let atV2 = try LogStore.replay(directory: Self.directory, fileSystem: fileSystem, until: .token(v2Token))
        #expect(Self.trips(atV2).map { $0["place"] } == [.string("Kyoto, Japan"), .string("Lisbon, Portugal ")])
        #expect(Self.trips(atV2).allSatisfy { $0["destination"] == nil })
        #expect(Self.trips(atV2).map { $0["rating"] } == [.int(3), .int(5)])
        #expect(Self.trips(beforeV2).map { $0["rating"] } == [.null, .int(5)])
        let afterWill = try LogStore.replay(
            directory: Self.directory, fileSystem: fileSystem, until: .token(history[4].token))
        #expect(Self.trips(afterWill).map { $0["place"] } == [.string("Kyoto, Japan"), .string("Lisbon, Portugal")])
        let now = try LogStore.replay(directory: Self.directory, fileSystem: fileSystem)
        #expect(Self.trips(now).map { $0["city"] } == [.string("Kyoto"), .string("Lisbon")])
        #expect(Self.trips(now).allSatisfy { $0["place"] == nil })
        #expect(now.lastToken == history[5].token)

        // Reopening replays the migrations' records (no stage runs again), from a checkpoint too.
        _ = try store.checkpoint()
        try Self.close(v3)
        let again = try ModelContainer(
            for: TripsSchemaV3.Trip.self, TripsSchemaV3.BucketListItem.self, migrationPlan: TripsMigrationPlan.self,
            configurations: Self.configuration(fileSystem))
        #expect(try Self.fetchHistory(again).count == 6)
        #expect(
            try ModelContext(again).fetch(FetchDescriptor<TripsSchemaV3.Trip>()).map(\.country).sorted()
                == ["Japan", "Portugal"])
        try Self.close(again)
        // Without the plan the V3 models open it too (the store records 3.0.0); V1's do not.
        let plain = try ModelContainer(for: TripsSchemaV3.Trip.self, configurations: Self.configuration(fileSystem))
        try Self.close(plain)
        #expect(throws: LogStoreError.self) {
            _ = try ModelContainer(for: TripsSchemaV1.Trip.self, configurations: Self.configuration(fileSystem))
        }
    }

    @Test("V1 straight to V3: both stages run in one open")
    func twoStagesInOneOpen() throws {
        let fileSystem = SimulatedFileSystem()
        _ = try Self.writeVersion1(fileSystem)
        let v3 = try Self.open(TripsSchemaV3.self, plan: TripsMigrationPlan.self, fileSystem)
        let trips = try ModelContext(v3).fetch(FetchDescriptor<TripsSchemaV3.Trip>(sortBy: [SortDescriptor(\.name)]))
        #expect(trips.map(\.city) == ["Kyoto", "Lisbon"])
        #expect(trips.map(\.country) == ["Japan", "Portugal"])
        try Self.close(v3)
    }

    @Test("a new required attribute left empty by the custom stage refuses the migration and writes nothing")
    func unfilledRequiredAttributeIsRefused() throws {
        let fileSystem = SimulatedFileSystem()
        _ = try Self.writeVersion1(fileSystem)
        try Self.close(try Self.open(TripsSchemaV2.self, plan: TripsMigrationPlan.self, fileSystem))
        let before = try LogStore.replay(directory: Self.directory, fileSystem: fileSystem)
        do {
            _ = try Self.open(TripsSchemaV3.self, plan: TripsPlanWithoutFill.self, fileSystem)
            Issue.record("the migration left city empty and succeeded")
        } catch let error as LogStoreError {
            #expect(error.code == .schemaMismatch)
            #expect(error.entity == "Trip")
            #expect(["city", "country"].contains(error.attribute ?? ""))
        }
        #expect(try LogStore.replay(directory: Self.directory, fileSystem: fileSystem) == before)
        // A didMigrate that leaves them empty is refused the same way, before anything is written.
        do {
            _ = try Self.open(TripsSchemaV3.self, plan: TripsPlanWithEmptyDidMigrate.self, fileSystem)
            Issue.record("didMigrate left city empty and the migration succeeded")
        } catch let error as LogStoreError {
            #expect(error.code == .schemaMismatch)
            #expect(["city", "country"].contains(error.attribute ?? ""), "\(error)")
            #expect(error.message.contains("2 stored models"), "\(error)")
        }
        #expect(try LogStore.replay(directory: Self.directory, fileSystem: fileSystem) == before)
        // A stage that throws stops the open with its error; its unsaved changes are not written.
        #expect(throws: StageFailure.self) {
            _ = try Self.open(TripsSchemaV3.self, plan: TripsPlanWithFailingWillMigrate.self, fileSystem)
        }
        #expect(try LogStore.replay(directory: Self.directory, fileSystem: fileSystem) == before)
        // The store is still at V2 and the real plan finishes it.
        let v3 = try Self.open(TripsSchemaV3.self, plan: TripsMigrationPlan.self, fileSystem)
        #expect(try ModelContext(v3).fetch(FetchDescriptor<TripsSchemaV3.Trip>()).map(\.city).sorted() == ["Kyoto", "Lisbon"])
        try Self.close(v3)
    }
}

/// A migration cut by a power failure at each of its steps leaves the old version or the new
/// one, never a mix; the next open with the plan finishes it. Every segment write of a
/// migration is one record here (``MigrationTests/configuration(_:)``), so "the n-th write
/// fails" is "the power failed while writing the n-th record".
@Suite struct MigrationPowerCutTests {
    typealias T = MigrationTests
    static let segments = SimulatedFileSystem.PathFilter.suffix(".log")

    /// A store at V2 (V1's three transactions and one V2 save, no pending stage).
    static func storeAtVersion2() throws -> SimulatedFileSystem {
        let fileSystem = SimulatedFileSystem()
        _ = try T.writeVersion1(fileSystem)
        try T.close(try T.open(TripsSchemaV2.self, plan: TripsMigrationPlan.self, fileSystem))
        return fileSystem
    }

    enum Version: Equatable { case v1, v2(tidied: Bool), v3 }

    /// Which version a store's fold is, checking that every model is wholly of that version.
    static func version(_ fileSystem: SimulatedFileSystem) throws -> Version {
        let state = try LogStore.replay(directory: T.directory, fileSystem: fileSystem)
        let trips = T.trips(state)
        let items = state.entity(named: "BucketListItem")?.rows.map(\.values) ?? []
        #expect(trips.count == 2 && items.count == 1)
        if trips.allSatisfy({ $0["destination"] != nil && $0["place"] == nil }) {
            #expect(items.allSatisfy { $0["details"] != nil && $0["summary"] == nil })
            return .v1
        }
        if trips.allSatisfy({ $0["place"] != nil && $0["city"] == nil && $0["destination"] == nil }) {
            #expect(items.allSatisfy { $0["summary"] != nil && $0["details"] == nil })
            let places = trips.map { $0["place"]! }
            #expect(places == [.string("Kyoto, Japan"), .string("Lisbon, Portugal ")] || places == [.string("Kyoto, Japan"), .string("Lisbon, Portugal")])
            return .v2(tidied: places[1] == .string("Lisbon, Portugal"))
        }
        #expect(trips.map { $0["city"] } == [.string("Kyoto"), .string("Lisbon")], "a mix: \(trips)")
        #expect(trips.map { $0["country"] } == [.string("Japan"), .string("Portugal")], "a mix: \(trips)")
        #expect(trips.allSatisfy { $0["place"] == nil && $0["destination"] == nil }, "a mix: \(trips)")
        return .v3
    }

    /// After the cut: the version found is `expected`; the models of that version open it without
    /// a plan; the plan then takes it to V3 with every value right.
    static func expectRecovers(_ cut: SimulatedFileSystem, at expected: Version, _ comment: Comment) throws {
        let found = try version(cut)
        #expect(found == expected, comment)
        let models: any PersistentModel.Type =
            switch found {
            case .v1: TripsSchemaV1.Trip.self
            case .v2: TripsSchemaV2.Trip.self
            case .v3: TripsSchemaV3.Trip.self
            }
        try T.close(try ModelContainer(for: models, configurations: T.configuration(cut)))
        let finished = try T.open(TripsSchemaV3.self, plan: TripsMigrationPlan.self, cut)
        let trips = try ModelContext(finished).fetch(FetchDescriptor<TripsSchemaV3.Trip>(sortBy: [SortDescriptor(\.name)]))
        #expect(trips.map(\.city) == ["Kyoto", "Lisbon"], comment)
        #expect(trips.map(\.country) == ["Japan", "Portugal"], comment)
        #expect(trips[1].bucketList.map(\.summary) == ["from Martim Moniz"], comment)
        let authors = try T.fetchHistory(finished).compactMap(\.author)
        #expect(authors.filter { $0.hasSuffix("(didMigrate)") }.count == 1, comment)
        try T.close(finished)
        #expect(try version(cut) == .v3, comment)
    }

    /// Opens V3 with the plan on `fileSystem` with a fault armed; the open must fail.
    static func failingMigration(_ fileSystem: SimulatedFileSystem, arm: (SimulatedFileSystem) -> Void) {
        arm(fileSystem)
        #expect(throws: (any Error).self) { _ = try T.open(TripsSchemaV3.self, plan: TripsMigrationPlan.self, fileSystem) }
        fileSystem.clearFaults()
    }

    @Test("lightweight step: the power fails while its schema record is written")
    func lightweightSchemaRecord() throws {
        for policy in [SimulatedFileSystem.PowerCutPolicy.nothingUnsynced, .everything] {
            let fileSystem = SimulatedFileSystem()
            _ = try T.writeVersion1(fileSystem)
            fileSystem.failWrite(after: 0, writingByteCount: 20, path: Self.segments)
            #expect(throws: (any Error).self) {
                _ = try T.open(TripsSchemaV2.self, plan: TripsMigrationPlan.self, fileSystem)
            }
            fileSystem.clearFaults()
            try Self.expectRecovers(fileSystem.powerCut(policy), at: .v1, "\(policy)")
        }
    }

    @Test("custom step 1: the power fails while willMigrate's transaction is written")
    func willMigrateTransaction() throws {
        for policy in [SimulatedFileSystem.PowerCutPolicy.nothingUnsynced, .everything] {
            let fileSystem = try Self.storeAtVersion2()
            Self.failingMigration(fileSystem) { $0.failWrite(after: 0, writingByteCount: 40, path: Self.segments) }
            try Self.expectRecovers(fileSystem.powerCut(policy), at: .v2(tidied: false), "\(policy)")
        }
    }

    @Test("custom step 2: the power fails while the schema record is written (willMigrate's save is durable)")
    func schemaRecord() throws {
        for policy in [SimulatedFileSystem.PowerCutPolicy.nothingUnsynced, .everything] {
            let fileSystem = try Self.storeAtVersion2()
            Self.failingMigration(fileSystem) { $0.failWrite(after: 1, writingByteCount: 40, path: Self.segments) }
            try Self.expectRecovers(fileSystem.powerCut(policy), at: .v2(tidied: true), "\(policy)")
        }
    }

    @Test("custom step 3: the power fails while didMigrate's transaction is written, after the schema record")
    func didMigrateTransaction() throws {
        // Whole schema record, nothing or a torn part of the transaction: the schema record alone is void.
        for written in [0, 40] {
            for policy in [SimulatedFileSystem.PowerCutPolicy.nothingUnsynced, .everything] {
                let fileSystem = try Self.storeAtVersion2()
                // ENOSPC: the log stays writable, so the schema record before it is kept (and
                // synced at close), as it would be had the power failed right after it.
                Self.failingMigration(fileSystem) {
                    $0.failWrite(after: 2, code: ENOSPC, writingByteCount: written, path: Self.segments)
                }
                try Self.expectRecovers(fileSystem.powerCut(policy), at: .v2(tidied: true), "\(policy), \(written) bytes")
            }
        }
        // The schema record survived without its transaction and the old models open the store:
        // the void record is closed off before their first save, which must not complete it.
        let fileSystem = try Self.storeAtVersion2()
        Self.failingMigration(fileSystem) { $0.failWrite(after: 2, code: ENOSPC, path: Self.segments) }
        let cut = fileSystem.powerCut(.nothingUnsynced)
        // Read without a writer: the lone schema record is void, so history reads with V2's names.
        let history = try LogStore.fetchHistory(
            directory: T.directory, fileSystem: cut, HistoryDescriptor<DefaultHistoryTransaction>())
        #expect(T.insertValues(history[0])["Trip"]?["place"] == .string("Lisbon, Portugal "))
        let old = try ModelContainer(for: TripsSchemaV2.Trip.self, configurations: T.configuration(cut))
        let context = ModelContext(old)
        let trips = try context.fetch(FetchDescriptor<TripsSchemaV2.Trip>(sortBy: [SortDescriptor(\.name)]))
        trips[0].notes = "saved by the old app"
        try context.save()
        try T.close(old)
        #expect(try Self.version(cut) == .v2(tidied: true))
        try Self.expectRecovers(cut, at: .v2(tidied: true), "old app saved after the cut")
    }

    @Test("custom step 4: the power fails before the sync covering the schema record and didMigrate's transaction")
    func beforeTheLastSync() throws {
        let fileSystem = try Self.storeAtVersion2()
        // didMigrate (of this test's plan) holds every sync from its end on: the schema record
        // and the transaction are written, and the sync covering them waits.
        holdSyncsAfterDidMigrate.withLock { $0 = fileSystem }
        let opener = Thread {
            _ = try? T.open(TripsSchemaV3.self, plan: TripsPlanHoldingLastSync.self, fileSystem)
        }
        opener.start()
        #expect(fileSystem.waitUntilSyncsHeld(count: 1))
        var found: Set<String> = []
        for policy in [SimulatedFileSystem.PowerCutPolicy.nothingUnsynced, .everything]
            + (0..<24).map({ .random(seed: $0) })
        {
            let cut = fileSystem.powerCut(policy)
            let version = try Self.version(cut)
            #expect(version == .v2(tidied: true) || version == .v3, "\(policy)")
            found.insert("\(version)")
            try Self.expectRecovers(cut, at: version, "\(policy)")
        }
        fileSystem.releaseSyncs()
        while !opener.isFinished { Thread.sleep(forTimeInterval: 0.01) }
        // Both outcomes occur among the cuts.
        #expect(found.count == 2, "\(found)")
        try Self.expectRecovers(fileSystem, at: .v3, "no cut")
    }
}

/// The file system ``TripsPlanHoldingLastSync``'s didMigrate holds syncs on.
let holdSyncsAfterDidMigrate = Mutex<SimulatedFileSystem?>(nil)

/// ``TripsMigrationPlan``, whose didMigrate then holds the file system's syncs.
enum TripsPlanHoldingLastSync: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { TripsMigrationPlan.schemas }
    static var stages: [MigrationStage] {
        guard case .custom(_, _, let willMigrate, let didMigrate) = TripsMigrationPlan.migrateV2toV3 else { return [] }
        return [
            TripsMigrationPlan.migrateV1toV2,
            .custom(
                fromVersion: TripsSchemaV2.self, toVersion: TripsSchemaV3.self, willMigrate: willMigrate,
                didMigrate: { context in
                    try didMigrate?(context)
                    holdSyncsAfterDidMigrate.withLock { $0 }?.holdSyncs()
                }),
        ]
    }
}
