import Foundation
import LogStoreTestSupport
import Testing

@testable import LogStore

/// `EntityRows` (a state's rows of one entity: parallel key and row arrays, holes,
/// compaction) against a plain ordered list of (key, row): after every operation the lookups,
/// the iteration, `scan` (with and without stopping early) and `==` agree with the list.
@Suite struct EntityRowsTests {
    /// The reference: rows in insertion order.
    struct Reference {
        var rows: [(key: UUID, row: FoldState.Row)] = []

        mutating func append(_ key: UUID, _ row: FoldState.Row) {
            remove(key)
            rows.append((key, row))
        }

        mutating func remove(_ key: UUID) {
            rows.removeAll { $0.key == key }
        }

        mutating func update(_ key: UUID, _ body: (inout FoldState.Row) -> Void) {
            guard let position = rows.firstIndex(where: { $0.key == key }) else { return }
            body(&rows[position].row)
        }
    }

    /// A row of values, or every seventh one of none (a live row with no values is not a
    /// removed row's hole, though both hold no values).
    static func row(_ sequence: UInt64, _ label: String) -> FoldState.Row {
        guard sequence % 7 != 0 else { return FoldState.Row(sequence: sequence, values: RowValues()) }
        return FoldState.Row(sequence: sequence, values: ["name": .string(label), "count": .int(Int64(sequence))])
    }

    /// Everything `rows` answers, compared with `reference`.
    static func expectAgree(_ rows: EntityRows, _ reference: Reference, removed: [UUID], step: Int) {
        #expect(rows.count == reference.rows.count, "count after step \(step)")
        #expect(rows.isEmpty == reference.rows.isEmpty, "isEmpty after step \(step)")
        let iterated = Array(rows)
        #expect(iterated.map(\.0) == reference.rows.map(\.key), "iteration order after step \(step)")
        #expect(iterated.map(\.1) == reference.rows.map(\.row), "iterated rows after step \(step)")
        var scanned: [(UUID, FoldState.Row)] = []
        rows.scan { key, row in
            scanned.append((key, row))
            return true
        }
        #expect(scanned.map(\.0) == reference.rows.map(\.key), "scan order after step \(step)")
        #expect(scanned.map(\.1) == reference.rows.map(\.row), "scanned rows after step \(step)")
        // Stopping early: scan visits exactly the rows up to the one that returns false.
        let stopAfter = reference.rows.count / 3
        var visited = 0
        rows.scan { _, _ in
            visited += 1
            return visited <= stopAfter
        }
        #expect(visited == min(reference.rows.count, stopAfter + 1), "scan stopping early after step \(step)")
        for (key, row) in reference.rows.prefix(50) {
            #expect(rows[key] == row, "lookup of a present key after step \(step)")
        }
        for key in removed.suffix(50) where !reference.rows.contains(where: { $0.key == key }) {
            #expect(rows[key] == nil, "lookup of a removed key after step \(step)")
        }
    }

    @Test(arguments: [1 as UInt64, 2, 3])
    func agreesWithAnOrderedListThroughRemovalsAndCompactions(seed: UInt64) {
        var random = SeededGenerator(seed: seed)
        var rows = EntityRows()
        var reference = Reference()
        var removed: [UUID] = []
        var sequence: UInt64 = 0
        // Grow past the compaction threshold (more than 1,024 holes and more holes than rows),
        // then remove most rows, with updates, re-appends and whole-entity updates in between.
        for step in 0..<6_000 {
            sequence += 1
            let phase = step < 3_000 ? 0 : 1
            let choice = Int.random(in: 0..<100, using: &random)
            if reference.rows.isEmpty || (phase == 0 && choice < 60) || (phase == 1 && choice < 30) {
                let key = UUID()
                let row = Self.row(sequence, "new \(step)")
                rows.append(key, row)
                reference.append(key, row)
            } else if choice < 80 || (phase == 1 && choice < 85) {
                let key = reference.rows.randomElement(using: &random)!.key
                rows.remove(key)
                reference.remove(key)
                removed.append(key)
                // Removing a key that is not there changes nothing.
                rows.remove(key)
            } else if choice < 90 {
                let key = reference.rows.randomElement(using: &random)!.key
                let change = { (row: inout FoldState.Row) in row.values["name"] = .string("updated \(step)") }
                rows.update(key, change)
                reference.update(key, change)
            } else if choice < 97 {
                // Appending a present key moves it to the end with its new row.
                let key = reference.rows.randomElement(using: &random)!.key
                let row = Self.row(sequence, "again \(step)")
                rows.append(key, row)
                reference.append(key, row)
            } else {
                let change = { (row: inout FoldState.Row) in row.values["count"] = .int(Int64(step)) }
                rows.updateEach(change)
                for position in reference.rows.indices { change(&reference.rows[position].row) }
            }
            if step % 97 == 0 || step >= 5_990 {
                Self.expectAgree(rows, reference, removed: removed, step: step)
            }
        }
        #expect(reference.rows.count < 1_000, "the run did not shrink the rows enough to compact")
        Self.expectAgree(rows, reference, removed: removed, step: 6_000)
    }

    @Test func equalityIgnoresHolesAndComparesOrderAndRows() {
        let keys = (0..<3).map { _ in UUID() }
        var a = EntityRows()
        var b = EntityRows()
        for (index, key) in keys.enumerated() { a.append(key, Self.row(UInt64(index), "\(index)")) }
        // b reaches the same rows through a hole: an extra row appended and removed.
        let extra = UUID()
        b.append(keys[0], Self.row(0, "0"))
        b.append(extra, Self.row(9, "extra"))
        b.append(keys[1], Self.row(1, "1"))
        b.remove(extra)
        b.append(keys[2], Self.row(2, "2"))
        #expect(a == b)
        b.update(keys[1]) { $0.values["name"] = .string("changed") }
        #expect(a != b)
        a.update(keys[1]) { $0.values["name"] = .string("changed") }
        #expect(a == b)
        // Same rows, another order.
        a.append(keys[0], Self.row(0, "0"))
        #expect(a != b)
        #expect(Array(a).map(\.0) == [keys[1], keys[2], keys[0]])
    }

    /// A state's entities (an array of rows by position, the last entity touched remembered)
    /// against a dictionary of references: changes interleaved over four entities, an entity
    /// removed by a migration step in the middle, then changes to the others and to the removed
    /// name again (it comes back empty, at the end).
    @Test func foldStateKeepsEachEntitysRowsAcrossInterleavedChangesAndARemovedEntity() {
        var state = FoldState()
        var references: [String: Reference] = [:]
        let names = ["Trip", "BucketListItem", "LivingAccommodation", "Note"]
        var keys: [String: [UUID]] = [:]
        var generator = SystemRandomNumberGenerator()
        func check(_ step: Int) {
            #expect(Set(state.entityNames) == Set(references.keys), "entities after step \(step)")
            for (name, reference) in references {
                let rows = state.rows(of: name)
                #expect(Array(rows).map(\.0) == reference.rows.map(\.key), "\(name) order after step \(step)")
                #expect(Array(rows).map(\.1.values) == reference.rows.map(\.row.values), "\(name) after step \(step)")
                #expect(state.count(of: name) == reference.rows.count)
                for (key, row) in reference.rows {
                    #expect(state.row(entity: name, primaryKey: key)?.values == row.values)
                }
            }
            #expect(state.totalCount == references.values.reduce(0) { $0 + $1.rows.count })
        }
        func step(_ step: Int, entity name: String) {
            let existing = keys[name, default: []]
            let choice = existing.isEmpty ? 0 : Int.random(in: 0..<4, using: &generator)
            switch choice {
            case 0:
                let key = UUID()
                let values: [String: AttributeValue] = ["name": .string("\(name) \(step)"), "step": .int(Int64(step))]
                state.insert(entityName: name, primaryKey: key, values: values)
                references[name, default: Reference()].append(key, FoldState.Row(sequence: 0, values: RowValues(values.lazy.map { $0 }, layout: .empty)))
                keys[name, default: []].append(key)
            case 1, 2:
                let key = existing.randomElement(using: &generator)!  // not empty: choice 0 then
                state.update(entityName: name, primaryKey: key, values: ["step": AttributeValue.int(Int64(step))])
                references[name]?.update(key) { $0.values["step"] = .int(Int64(step)) }
            default:
                guard let key = existing.randomElement(using: &generator) else { return }
                state.delete(entityName: name, primaryKey: key)
                references[name]?.remove(key)
                keys[name]?.removeAll { $0 == key }
            }
        }
        for index in 0..<2_000 {
            // Runs of one entity (the remembered one) and switches between them.
            step(index, entity: names[(index / 3 + index % 2) % names.count])
        }
        check(2_000)
        state.apply([.removeEntity(entity: "BucketListItem", entityID: 1)])
        references["BucketListItem"] = nil
        keys["BucketListItem"] = nil
        check(2_001)
        for index in 2_002..<3_000 {
            step(index, entity: names[(index / 5) % names.count])
        }
        check(3_000)
    }
}
