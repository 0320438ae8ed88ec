import Foundation
import LogStoreTestSupport
import Testing

@testable import LogStore

/// `EntityRows` (a state's rows of one entity: parallel key, row and liveness arrays, holes,
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

    static func row(_ sequence: UInt64, _ label: String) -> FoldState.Row {
        FoldState.Row(sequence: sequence, values: ["name": .string(label), "count": .int(Int64(sequence))])
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
}
