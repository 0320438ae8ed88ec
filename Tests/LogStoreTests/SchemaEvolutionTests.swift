import Foundation
import LogStore
import LogStoreEngine
import LogStoreTestSupport
import Testing

/// Two declarations of the same entity, "Gadget": without and with a unique constraint.
final class GadgetV1: PersistentModel {
    static let entityName = "Gadget"
    static let schemaProperties: [ModelProperty<GadgetV1>] = [.attribute("name", \.name), .attribute("size", \.size)]
    let modelState = ModelState()
    var name = ""
    var size = 0
    required init() {}
}

final class GadgetUnique: PersistentModel {
    static let entityName = "Gadget"
    static let schemaProperties: [ModelProperty<GadgetUnique>] = [
        .attribute("name", \.name), .attribute("size", \.size),
    ]
    static let uniquenessConstraints = [["name"]]
    let modelState = ModelState()
    var name = ""
    var size = 0
    required init() {}
}

/// Adds an optional attribute: an addition.
final class GadgetWithColor: PersistentModel {
    static let entityName = "Gadget"
    static let schemaProperties: [ModelProperty<GadgetWithColor>] = [
        .attribute("name", \.name), .attribute("size", \.size), .attribute("color", \.color),
    ]
    let modelState = ModelState()
    var name = ""
    var size = 0
    var color: String?
    required init() {}
}

/// Changes a type: not an addition.
final class GadgetRetyped: PersistentModel {
    static let entityName = "Gadget"
    static let schemaProperties: [ModelProperty<GadgetRetyped>] = [
        .attribute("name", \.name), .attribute("size", \.size),
    ]
    let modelState = ModelState()
    var name = ""
    var size = ""
    required init() {}
}

/// Adds a required attribute without a default: not an addition either.
final class GadgetRequiredWeight: PersistentModel {
    static let entityName = "Gadget"
    static let schemaProperties: [ModelProperty<GadgetRequiredWeight>] = [
        .attribute("name", \.name), .attribute("size", \.size), .attribute("weight", \.weight),
    ]
    let modelState = ModelState()
    var name = ""
    var size = 0
    var weight = 0.0
    required init() {}
}

@Suite struct SchemaEvolutionTests {
    let fileSystem = SimulatedFileSystem()

    func container(_ type: any PersistentModel.Type) throws -> ModelContainer {
        try ModelContainer(
            for: [type], configuration: LogStoreConfiguration(directory: "/gadgets", fileSystem: fileSystem))
    }

    func close(_ container: ModelContainer) throws { try container.dataStore(as: LogStore.self)!.close() }

    @Test func replayNeverRerunsUniqueResolution() throws {
        let first = try container(GadgetV1.self)
        let context = ModelContext(first)
        for size in [1, 2] {
            let gadget = GadgetV1()
            gadget.name = "same"
            gadget.size = size
            context.insert(gadget)
        }
        try context.save()
        try close(first)
        // The constraint now exists in code; the past it did not govern stays as it was.
        let second = try container(GadgetUnique.self)
        let sizes = try ModelContext(second).fetch(FetchDescriptor<GadgetUnique>()).map(\.size).sorted()
        #expect(sizes == [1, 2])
        // It governs later saves: a new "same" upserts into an existing one instead of adding a third.
        let later = ModelContext(second)
        let gadget = GadgetUnique()
        gadget.name = "same"
        gadget.size = 3
        later.insert(gadget)
        try later.save()
        #expect(try ModelContext(second).fetchCount(FetchDescriptor<GadgetUnique>()) == 2)
        try close(second)
        let third = try container(GadgetUnique.self)
        #expect(try ModelContext(third).fetch(FetchDescriptor<GadgetUnique>()).map(\.size).sorted().count == 2)
    }

    @Test func additionsMigrateAndOtherChangesThrowSchemaMismatch() throws {
        let first = try container(GadgetV1.self)
        let context = ModelContext(first)
        let gadget = GadgetV1()
        gadget.name = "old"
        context.insert(gadget)
        try context.save()
        try close(first)

        let added = try container(GadgetWithColor.self)
        let fetched = try ModelContext(added).fetch(FetchDescriptor<GadgetWithColor>())
        #expect(fetched.map(\.name) == ["old"])
        #expect(fetched.first?.color == nil)
        try close(added)

        for type in [GadgetRetyped.self, GadgetRequiredWeight.self, GadgetV1.self] as [any PersistentModel.Type] {
            do {
                _ = try container(type)
                Issue.record("\(type) opened")
            } catch let error as LogStoreError {
                guard error.code == .schemaMismatch, error.family == .schema else {
                    Issue.record("\(type): \(error)")
                    continue
                }
                #expect(error.entity == "Gadget")
                #expect(["size", "weight", "color"].contains(error.attribute ?? ""), "\(type): \(error)")
            }
        }
    }
}

@Suite struct TransactionLimitTests {
    @Test func anOversizedSaveThrowsAndWritesNothing() throws {
        let fileSystem = SimulatedFileSystem()
        var configuration = LogStoreConfiguration(directory: "/big", fileSystem: fileSystem)
        // Encoding 17 MiB can take over a second on a busy machine: no idle durable-end mark may
        // move the log's end while the refused save is measured.
        configuration.durableEndMarkDelay = nil
        let container = try ModelContainer(for: [GadgetV1.self], configuration: configuration)
        let store = try #require(container.dataStore(as: LogStore.self))
        let context = ModelContext(container)
        let small = GadgetV1()
        small.name = "small"
        context.insert(small)
        try context.save()
        // The token of the newest transaction, not the log's end: an idle durable-end mark may
        // extend the log while 17 MiB are encoded, and a mark is no save.
        let tokenBefore = store.currentToken
        // One save is one record: 17 MiB of names do not fit in the 16 MiB record limit.
        for number in 0..<17 {
            let gadget = GadgetV1()
            gadget.name = String(repeating: Character(UnicodeScalar(UInt8(97 + number))), count: 1024 * 1024)
            context.insert(gadget)
        }
        do {
            try context.save()
            Issue.record("an oversized save succeeded")
        } catch let error as LogStoreError {
            guard error.code == .transactionTooLarge, error.family == .invalidSave else {
                Issue.record("unexpected \(error)")
                return
            }
            // "The save encodes to <byteCount> bytes; one save is one record of at most <limit> bytes."
            let numbers = error.message.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
            #expect(numbers.count == 2, "\(error)")
            #expect(numbers.first! > numbers.last!, "\(error)")
            #expect(numbers.last == FormatConstants.recordByteCountMax)
        }
        #expect(store.currentToken == tokenBefore)
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<GadgetV1>()) == 1)
        // The context still holds the inserts; saving fewer of them works.
        context.rollback()
        #expect(!context.hasChanges)
        let next = GadgetV1()
        next.name = "after"
        context.insert(next)
        try context.save()
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<GadgetV1>()) == 2)
    }
}
