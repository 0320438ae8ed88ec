import Foundation
import LogStoreEngine
import Testing

@testable import LogStore

/// The schema record's payload (docs/FORMAT.md §6.7): version 1 unchanged for stores without a
/// migration, version 2 round-trips every field, and what a reader does not know is refused.
@Suite struct SchemaRecordTests {
    static let v1Schema = Schema([
        Schema.Entity("Trip", attributes: [.init("name", .string), .init("rating", .int, isOptional: true)]),
        Schema.Entity("Bin", attributes: [.init("label", .string)]),
    ])

    static let v2Schema = Schema([
        Schema.Entity(
            "Trip",
            attributes: [
                .init("title", .string, originalName: "name"),
                .init("rating", .int, defaultValue: .int(3)),
                .init("notes", .string, isOptional: true),
            ])
    ])

    @Test("a table without a migration encodes as payload version 1, byte for byte as before")
    func versionOneUnchanged() throws {
        let table = try #require(try SchemaTable().extended(toCover: Self.v1Schema)).table
        let bytes = table.encoded()
        #expect(bytes.first == 1)
        // The version-1 layout, written out by hand (FORMAT.md §6.7).
        var expected: [UInt8] = [1, 1, 3, 4, 2]
        expected += [1, 4] + Array("Trip".utf8) + [2]
        expected += [1, 4] + Array("name".utf8) + [0, 4]
        expected += [2, 6] + Array("rating".utf8) + [1, 2]
        expected += [2, 3] + Array("Bin".utf8) + [1]
        expected += [3, 5] + Array("label".utf8) + [0, 4]
        #expect(bytes == expected)
        #expect(try SchemaTable.decode(bytes) == table)
    }

    @Test("a migration's record round-trips: plan version, removed ids, flags, every kind of step")
    func versionTwoRoundTrip() throws {
        let table = try #require(try SchemaTable().extended(toCover: Self.v1Schema)).table
        var migration = try #require(
            try table.migrated(to: Self.v2Schema, versionIdentifier: Schema.Version(2, 1, 0), allowsRemovals: true))
        #expect(
            migration.steps == [
                .renameAttribute(entity: "Trip", entityID: 1, attributeID: 1, from: "name", to: "title"),
                .fill(entity: "Trip", entityID: 1, attributeID: 2, name: "rating", value: .int(3)),
                .removeEntity(entity: "Bin", entityID: 2),
            ])
        #expect(migration.table.version == 2)
        #expect(migration.table.versionIdentifier == Schema.Version(2, 1, 0))
        #expect(migration.table.retiredEntities.map(\.name) == ["Bin"])
        #expect(migration.table.entity(named: "Trip")?.attributes.map(\.name) == ["title", "rating", "notes"])
        #expect(migration.table.entity(named: "Trip")?.attributes.map(\.id) == [1, 2, 4])
        migration.completedByNextTransaction = true
        migration.steps.append(.removeAttribute(entity: "Trip", entityID: 1, attributeID: 9, name: "old"))
        let bytes = migration.encoded()
        #expect(bytes.first == 2)
        #expect(try SchemaMigration.decode(bytes) == migration)
        // A checkpoint copies the table alone: still version 2 (it has a plan version), no steps.
        let copied = try SchemaMigration.decode(migration.table.encoded())
        #expect(copied.table == migration.table && copied.steps.isEmpty && !copied.completedByNextTransaction)
    }

    @Test("an unknown payload version, flag bit or step kind is refused, never skipped")
    func unknownsAreRefused() throws {
        let table = try #require(try SchemaTable().extended(toCover: Self.v1Schema)).table
        let migration = try #require(
            try table.migrated(to: Self.v2Schema, versionIdentifier: Schema.Version(2, 0, 0), allowsRemovals: true))
        var bytes = migration.encoded()
        var newer = bytes
        newer[0] = 3
        #expect(throws: ByteReaderError.self) { _ = try SchemaMigration.decode(newer) }
        // The flags byte is the one byte that differs when the record is completed by the next transaction.
        var completed = migration
        completed.completedByNextTransaction = true
        let flagged = completed.encoded()
        #expect(flagged.count == bytes.count)
        let differing = bytes.indices.filter { bytes[$0] != flagged[$0] }
        #expect(differing.count == 1)
        let flags = try #require(differing.first)
        #expect(bytes[flags] == 0 && flagged[flags] == 1)
        bytes[flags] = 0b10
        #expect(throws: ByteReaderError.self) { _ = try SchemaMigration.decode(bytes) }
        // The step kind follows the step count.
        var unknownStep = migration.encoded()
        unknownStep[flags + 2] = 9
        #expect(throws: ByteReaderError.self) { _ = try SchemaMigration.decode(unknownStep) }
    }

    @Test("without removals allowed, a removed attribute or entity is a schemaMismatch naming it")
    func removalsNeedAPlan() throws {
        let table = try #require(try SchemaTable().extended(toCover: Self.v1Schema)).table
        do {
            _ = try table.migrated(to: Self.v2Schema, versionIdentifier: nil, allowsRemovals: false)
            Issue.record("a removal passed without a plan")
        } catch {
            #expect(error.code == .schemaMismatch)
            #expect(error.entity == "Bin")
        }
    }
}
