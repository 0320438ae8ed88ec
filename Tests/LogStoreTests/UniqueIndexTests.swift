import Foundation
import LogStoreEngine
import LogStoreTestSupport
import Testing

@testable import LogStore

/// The unique index names the constraint a save broke — the right one of an entity's several —
/// whether the other model is stored or comes earlier in the same save (a key holds its
/// constraint's place among the entity's constraints, not the names).
@Suite struct UniqueIndexTests {
    static let schema = Schema([
        Schema.Entity(
            "Badge",
            attributes: [.init("code", .int), .init("holder", .string), .init("year", .int)],
            uniquenessConstraints: [["code"], ["holder", "year"]])
    ])

    static func badge(_ code: Int64, _ holder: String, _ year: Int64) -> DefaultSnapshot {
        DefaultSnapshot(
            persistentIdentifier: .temporary(entityName: "Badge"),
            values: ["code": .int(code), "holder": .string(holder), "year": .int(year)])
    }

    static func violation(_ store: LogStore, _ inserted: [DefaultSnapshot]) -> LogStoreError? {
        var request = DataStoreSaveChangesRequest<DefaultSnapshot>()
        request.inserted = inserted
        do { _ = try store.save(request) } catch { return error as? LogStoreError }
        return nil
    }

    @Test func theBrokenConstraintIsNamed() throws {
        let temporary = TemporaryDirectory("unique-index")
        defer { temporary.remove() }
        var configuration = LogStoreConfiguration(schema: Self.schema, directory: temporary.path, durability: .none)
        configuration.uniqueCollisionPolicy = .throw
        let store = try LogStore(configuration)
        defer { try? store.close() }
        #expect(Self.violation(store, [Self.badge(1, "ada", 2020)]) == nil)
        // Against the stored model.
        let second = try #require(Self.violation(store, [Self.badge(2, "ada", 2020)]))
        #expect(second.code == .uniqueConstraintViolation)
        #expect(second.entity == "Badge" && second.attribute == "holder,year")
        let first = try #require(Self.violation(store, [Self.badge(1, "bob", 2021)]))
        #expect(first.attribute == "code")
        // Against an earlier insert of the same save.
        let inSave = try #require(Self.violation(store, [Self.badge(3, "cy", 2022), Self.badge(4, "cy", 2022)]))
        #expect(inSave.attribute == "holder,year")
        let inSaveFirst = try #require(Self.violation(store, [Self.badge(5, "di", 2023), Self.badge(5, "ed", 2024)]))
        #expect(inSaveFirst.attribute == "code")
        // Equal values under different constraints are different keys.
        #expect(Self.violation(store, [Self.badge(2021, "fay", 1)]) == nil)
    }
}
