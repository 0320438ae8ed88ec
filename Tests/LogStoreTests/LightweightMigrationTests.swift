import Foundation
import LogStore
import LogStoreEngine
import LogStoreTestSupport
import Testing

// Hand-written models of one entity, "Part", through the lightweight changes a plan can make,
// and a second entity, "Bin", that a version removes and a later one adds again.

final class PartV1: PersistentModel {
    static let entityName = "Part"
    static let schemaProperties: [ModelProperty<PartV1>] = [.attribute("name", \.name), .attribute("size", \.size)]
    let modelState = ModelState()
    var name = ""
    var size: Int?
    required init() {}
}

final class BinV1: PersistentModel {
    static let entityName = "Bin"
    static let schemaProperties: [ModelProperty<BinV1>] = [.attribute("label", \.label)]
    let modelState = ModelState()
    var label = ""
    required init() {}
}

/// `size` made required with a default (stored parts without one get 7); `Bin` removed.
final class PartV2: PersistentModel {
    static let entityName = "Part"
    static let schemaProperties: [ModelProperty<PartV2>] = [
        .attribute("name", \.name), .attribute("size", \.size, defaultValue: 7),
    ]
    let modelState = ModelState()
    var name = ""
    var size = 0
    required init() {}
}

/// `size` removed; `weight` added (optional).
final class PartV3: PersistentModel {
    static let entityName = "Part"
    static let schemaProperties: [ModelProperty<PartV3>] = [.attribute("name", \.name), .attribute("weight", \.weight)]
    let modelState = ModelState()
    var name = ""
    var weight: Double?
    required init() {}
}

/// `size` added again (a new attribute: the removed one's values stay gone); `Bin` added again.
final class PartV4: PersistentModel {
    static let entityName = "Part"
    static let schemaProperties: [ModelProperty<PartV4>] = [
        .attribute("name", \.name), .attribute("weight", \.weight), .attribute("size", \.size),
    ]
    let modelState = ModelState()
    var name = ""
    var weight: Double?
    var size: Int?
    required init() {}
}

/// `name` renamed to `title` with `originalName`, without a plan.
final class PartRenamed: PersistentModel {
    static let entityName = "Part"
    static let schemaProperties: [ModelProperty<PartRenamed>] = [
        .attribute("title", \.title).renamed(from: "name"), .attribute("size", \.size),
    ]
    let modelState = ModelState()
    var title = ""
    var size: Int?
    required init() {}
}

enum PartsV1: VersionedSchema {
    static let versionIdentifier = Schema.Version(1, 0, 0)
    static var models: [any PersistentModel.Type] { [PartV1.self, BinV1.self] }
}
enum PartsV2: VersionedSchema {
    static let versionIdentifier = Schema.Version(2, 0, 0)
    static var models: [any PersistentModel.Type] { [PartV2.self] }
}
enum PartsV3: VersionedSchema {
    static let versionIdentifier = Schema.Version(3, 0, 0)
    static var models: [any PersistentModel.Type] { [PartV3.self] }
}
enum PartsV4: VersionedSchema {
    static let versionIdentifier = Schema.Version(4, 0, 0)
    static var models: [any PersistentModel.Type] { [PartV4.self, BinV1.self] }
}

enum PartsPlan: SchemaMigrationPlan {
    static var schemas: [any VersionedSchema.Type] { [PartsV1.self, PartsV2.self, PartsV3.self, PartsV4.self] }
    static var stages: [MigrationStage] {
        [
            .lightweight(fromVersion: PartsV1.self, toVersion: PartsV2.self),
            .lightweight(fromVersion: PartsV2.self, toVersion: PartsV3.self),
            .lightweight(fromVersion: PartsV3.self, toVersion: PartsV4.self),
        ]
    }
}

@Suite struct LightweightMigrationTests {
    let fileSystem = SimulatedFileSystem()
    static let directory = "/parts"

    func open(_ version: any VersionedSchema.Type, plan: (any SchemaMigrationPlan.Type)? = PartsPlan.self) throws
        -> ModelContainer
    {
        try ModelContainer(
            for: version.models, migrationPlan: plan,
            configuration: LogStoreConfiguration(directory: Self.directory, fileSystem: fileSystem))
    }

    func close(_ container: ModelContainer) throws { try container.dataStore(as: LogStore.self)!.close() }

    func parts(until token: DefaultHistoryToken? = nil) throws -> [[String: AttributeValue]] {
        let state =
            if let token {
                try LogStore.replay(directory: Self.directory, fileSystem: fileSystem, until: .token(token))
            } else {
                try LogStore.replay(directory: Self.directory, fileSystem: fileSystem)
            }
        return (state.entity(named: "Part")?.rows ?? []).map(\.values)
    }

    func history(_ container: ModelContainer) throws -> [DefaultHistoryTransaction] {
        try ModelContext(container).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
    }

    /// Two parts (one without a size) and a bin, in one save, under V1.
    func writeVersion1() throws -> DefaultHistoryToken {
        let container = try open(PartsV1.self)
        let context = ModelContext(container)
        for (name, size) in [("bolt", 3), ("nut", nil)] as [(String, Int?)] {
            let part = PartV1()
            part.name = name
            part.size = size
            context.insert(part)
        }
        let bin = BinV1()
        bin.label = "A1"
        context.insert(bin)
        try context.save()
        let token = try #require(container.dataStore(as: LogStore.self)!.currentToken)
        try close(container)
        return token
    }

    @Test("optional to required fills the default; a removed entity's models and history go; time travel before is exact")
    func fillAndRemoveEntity() throws {
        let v1 = try writeVersion1()
        let v2 = try open(PartsV2.self)
        let parts = try ModelContext(v2).fetch(FetchDescriptor<PartV2>(sortBy: [SortDescriptor(\.name)]))
        #expect(parts.map(\.size) == [3, 7])
        // The Bin entity is gone from the store; its insert is left out of V1's transaction.
        #expect(try self.parts().count == 2)
        let history = try history(v2)
        #expect(history.count == 1)
        #expect(history[0].changes.count == 2)
        #expect(history[0].changes.allSatisfy { $0.changedPersistentIdentifier.entityName == "Part" })
        try close(v2)
        // Before the migration, the log says what V1 stored: the bin, and no size for the nut.
        let before = try LogStore.replay(directory: Self.directory, fileSystem: fileSystem, until: .token(v1))
        #expect(before.entity(named: "Bin")?.rows.count == 1)
        #expect(Set(try self.parts(until: v1).map { $0["size"] ?? .null }) == [.int(3), .null])
    }

    @Test("a removed attribute's values go; added again later, it is a new attribute and old values stay gone")
    func removeAndAddAgain() throws {
        _ = try writeVersion1()
        let v4 = try open(PartsV4.self)  // three stages in one open
        let context = ModelContext(v4)
        let parts = try context.fetch(FetchDescriptor<PartV4>(sortBy: [SortDescriptor(\.name)]))
        #expect(parts.map(\.size) == [nil, nil])
        #expect(parts.map(\.weight) == [nil, nil])
        #expect(try ModelContext(v4).fetchCount(FetchDescriptor<BinV1>()) == 0)
        // V1's insert read with the V4 table: the old size (a retired id) is not the new size.
        let history = try history(v4)
        #expect(history.count == 1)
        for change in history[0].changes {
            guard case .insert(let insert) = change else { continue }
            #expect(insert.values["size"] == nil, "\(insert.values)")
            #expect(insert.values["name"] != nil)
        }
        // The bin entity is new in V4: saves work.
        let bin = BinV1()
        bin.label = "B2"
        context.insert(bin)
        parts[0].size = 11
        try context.save()
        try close(v4)
        let reopened = try open(PartsV4.self)
        #expect(try ModelContext(reopened).fetch(FetchDescriptor<BinV1>()).map(\.label) == ["B2"])
        #expect(
            try ModelContext(reopened).fetch(FetchDescriptor<PartV4>(sortBy: [SortDescriptor(\.name)])).map(\.size)
                == [11, nil])
        try close(reopened)
    }

    @Test("a rename by originalName needs no plan; a removal does")
    func renameWithoutPlan() throws {
        let v1 = try writeVersion1()
        // Without a plan, dropping Bin is refused...
        #expect(throws: LogStoreError.self) { _ = try open(PartsV2.self, plan: nil) }
        // ...while a rename (with Bin kept) goes through.
        let renamed = try ModelContainer(
            for: [PartRenamed.self, BinV1.self],
            configuration: LogStoreConfiguration(directory: Self.directory, fileSystem: fileSystem))
        let titles = try ModelContext(renamed).fetch(FetchDescriptor<PartRenamed>()).map(\.title).sorted()
        #expect(titles == ["bolt", "nut"])
        let history = try history(renamed)
        for change in history[0].changes where change.changedPersistentIdentifier.entityName == "Part" {
            guard case .insert(let insert) = change else { continue }
            #expect(insert.values["title"] != nil && insert.values["name"] == nil)
        }
        try close(renamed)
        #expect(try parts(until: v1).allSatisfy { $0["name"] != nil && $0["title"] == nil })
        #expect(try parts().allSatisfy { $0["title"] != nil && $0["name"] == nil })
    }

    @Test("time travel from a checkpoint taken before a migration crosses it; history deleted past a migration reopens")
    func checkpointsAndCompactionAcrossMigrations() throws {
        let v1Token = try writeVersion1()
        let before = try open(PartsV1.self)
        let checkpoint = try before.dataStore(as: LogStore.self)!.checkpoint()
        try close(before)
        let v4 = try open(PartsV4.self)
        let store = try #require(v4.dataStore(as: LogStore.self))
        let context = ModelContext(v4)
        let parts = try context.fetch(FetchDescriptor<PartV4>(sortBy: [SortDescriptor(\.name)]))
        parts[1].weight = 2.5
        try context.save()
        let v4Token = try #require(store.currentToken)
        // The fold to a token after the migrations starts at the V1 checkpoint and applies them.
        let state = try LogStore.replay(directory: Self.directory, fileSystem: fileSystem, until: .token(v4Token))
        #expect(state.checkpointOffset == checkpoint)
        #expect(state.entity(named: "Bin")?.rows.isEmpty ?? true)
        let rows = (state.entity(named: "Part")?.rows ?? []).map(\.values).sorted { "\($0["name"]!)" < "\($1["name"]!)" }
        #expect(rows.map { $0["weight"] ?? .null } == [.null, .double(2.5)])
        #expect(rows.allSatisfy { ($0["size"] ?? .null) == .null })
        // History up to V1's save deleted: the low-water-mark checkpoint holds V1's table and
        // state; reopening folds the migrations after it again.
        var upToV1 = HistoryDescriptor<DefaultHistoryTransaction>()
        upToV1.predicate = #Predicate { $0.token <= v1Token }
        try store.deleteHistory(upToV1)
        try close(v4)
        let reopened = try open(PartsV4.self)
        let weights = try ModelContext(reopened).fetch(FetchDescriptor<PartV4>(sortBy: [SortDescriptor(\.name)]))
            .map(\.weight)
        #expect(weights == [nil, 2.5])
        let history = try history(reopened)
        #expect(history.map(\.token) == [v4Token])
        try close(reopened)
    }

    @Test("a store newer than the container's version, or at a version the plan does not list, is refused")
    func versionsOutsideThePlan() throws {
        _ = try writeVersion1()
        try close(try open(PartsV3.self))
        do {
            _ = try open(PartsV2.self)
            Issue.record("opened a V3 store as V2")
        } catch let error as LogStoreError {
            #expect(error.code == .schemaMismatch)
            #expect(error.message.contains("3.0.0"), "\(error)")
        }
        enum Unknown: SchemaMigrationPlan {
            static var schemas: [any VersionedSchema.Type] { [PartsV1.self, PartsV2.self] }
            static var stages: [MigrationStage] { [.lightweight(fromVersion: PartsV1.self, toVersion: PartsV2.self)] }
        }
        #expect(throws: LogStoreError.self) { _ = try open(PartsV2.self, plan: Unknown.self) }
    }
}
