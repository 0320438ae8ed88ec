import Foundation
import LogStoreTestSupport
import SampleTrips
import Testing

@testable import LogStore

/// `RowValues` (a stored model's values by position in a shared `RowLayout`) against the
/// dictionary it replaces: after every random operation, in rows that start from different layouts,
/// every answer — lookups, count, iteration, `dictionary`, `==` and hashing across layouts —
/// agrees with a `[String: AttributeValue]` given the same operations.
@Suite struct RowValuesTests {
    static let names = ["a", "b", "c", "d", "e", "f"]

    /// A value of every packed kind (RowSlots: no payload, 8, 16 and 24 bytes), so a slot set
    /// in place or repacked moves the payloads after it.
    static func value(_ random: inout SeededGenerator) -> AttributeValue {
        switch random.next() % 12 {
        case 0: .null
        case 1: .int(Int64(random.next() % 4) - 2)
        // Small strings, and strings made at run time on the heap (reference-counted storage: a
        // payload retained or released once too often crashes or leaks here).
        case 2:
            random.next() % 2 == 0
                ? .string(["x", "y", "e\u{301}", "é"][Int(random.next() % 4)])
                : .string(String(repeating: "long ", count: 4) + String(random.next() % 3))
        case 3: .bool(random.nextBool())
        case 4: .array([.int(Int64(random.next() % 2))])
        case 5: .array([])
        case 6: .double([0.5, -0.0, .infinity][Int(random.next() % 3)])
        case 7: .date(Date(timeIntervalSinceReferenceDate: Double(random.next() % 3) * 86_400.25))
        case 8: .uuid(UUID(uuid: (UInt8(random.next() % 3), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)))
        case 9: .data(Data(repeating: UInt8(random.next() % 3), count: 40))
        case 10:
            .reference(
                PersistentIdentifier.permanent(
                    for: "S", entityName: "T",
                    primaryKey: UUID(uuid: (UInt8(random.next() % 2), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1))))
        default: .int(Int64.min + Int64(random.next() % 2))
        }
    }

    static func expectAgree(_ row: RowValues, _ reference: [String: AttributeValue], _ step: String) {
        for name in names + ["absent"] {
            #expect(row[name] == reference[name], "\(name) at \(step)")
        }
        #expect(row.count == reference.count, "count at \(step)")
        #expect(row.isEmpty == reference.isEmpty, "isEmpty at \(step)")
        #expect(row.dictionary == reference, "dictionary at \(step)")
        let pairs = Array(row)
        #expect(Set(pairs.map(\.key)).count == pairs.count, "a name iterated twice at \(step)")
        #expect(Dictionary(uniqueKeysWithValues: pairs.map { ($0.key, $0.value) }) == reference, "pairs at \(step)")
        // The same values in another layout (reversed names, plus one no row uses) are equal and
        // hash alike; one value more or different is not equal.
        let other = RowValues(reference, layout: RowLayout(names: names.reversed() + ["unused"]))
        #expect(other.layout !== row.layout)
        #expect(row == other && other == row, "== across layouts at \(step)")
        #expect(row.hashValue == other.hashValue, "hash across layouts at \(step)")
        var changed = reference
        changed["a"] = changed["a"] == .int(99) ? .int(98) : .int(99)
        #expect(row != RowValues(changed, layout: row.layout), "!= at \(step)")
    }

    @Test(arguments: 0..<8)
    func randomOperationsAgreeWithADictionary(seed: UInt64) {
        var random = SeededGenerator(seed: 0x726F_7773 &+ seed)
        // From the empty layout, a layout of some names, or of all of them in another order.
        let layouts = [
            RowLayout.empty, RowLayout(names: ["c", "a"]), RowLayout(names: Self.names.shuffled(using: &random)),
        ]
        var row = RowValues(layout: layouts[Int(seed) % layouts.count])
        var reference: [String: AttributeValue] = [:]
        for step in 0..<300 {
            let name = Self.names[Int(random.next() % UInt64(Self.names.count))]
            switch random.next() % 5 {
            case 0, 1:
                let value = Self.value(&random)
                row[name] = value
                reference[name] = value
            case 2:
                row[name] = nil
                reference[name] = nil
            case 3:
                #expect(row.removeValue(forKey: name) == reference.removeValue(forKey: name), "removed at \(step)")
            default:
                let value = Self.value(&random)
                #expect(row.updateValue(value, forKey: name) == reference.updateValue(value, forKey: name))
            }
            Self.expectAgree(row, reference, "step \(step) of seed \(seed)")
            if step % 50 == 0 {
                var changes = ["f": AttributeValue.int(7)]
                changes[name] = Self.value(&random)
                #expect(row.merging(changes).dictionary == reference.merging(changes) { $1 })
            }
        }
    }

    /// A null value is a value: it counts, iterates and differs from no value (a dictionary's
    /// `["a": .null]` is not `[:]`), as a migration's fill relies on.
    @Test func aNullValueIsNotAMissingOne() {
        let withNull: RowValues = ["a": .null]
        let without = RowValues(layout: RowLayout(names: ["a"]))
        #expect(withNull["a"] == .null)
        #expect(without["a"] == nil)
        #expect(withNull.count == 1 && without.count == 0)
        #expect(withNull != without)
        #expect(withNull.dictionary == ["a": .null])
    }

    /// Values are values: a copy changed (a slot set, a value removed, a name added, values
    /// assigned) leaves the original as it was, and the one allocation all empty rows share
    /// stays empty.
    @Test func aChangedCopyLeavesTheOriginal() {
        let layout = RowLayout(names: ["a", "b"])
        let original = RowValues([(key: "a", value: .int(1)), (key: "b", value: .string("two"))], layout: layout)
        var set = original
        set["a"] = .int(10)
        var removed = original
        removed.removeValue(forKey: "b")
        var added = original
        added["c"] = .bool(true)
        var assigned = original
        assigned.assign([(key: "b", value: .null), (key: "d", value: .double(4))])
        #expect(original.dictionary == ["a": .int(1), "b": .string("two")])
        #expect(set.dictionary == ["a": .int(10), "b": .string("two")])
        #expect(removed.dictionary == ["a": .int(1)])
        #expect(added.dictionary == ["a": .int(1), "b": .string("two"), "c": .bool(true)])
        #expect(assigned.dictionary == ["a": .int(1), "b": .null, "d": .double(4)])
        var filled = RowValues()
        filled["x"] = .int(7)
        var cleared = RowValues(layout: layout)
        cleared["a"] = .int(3)
        #expect(filled.dictionary == ["x": .int(7)] && cleared.dictionary == ["a": .int(3)])
        #expect(RowValues().isEmpty && RowValues().layout.count == 0)
        #expect(RowValues(layout: layout).isEmpty)
    }

    /// A Trip's values packed: two strings (16 each), two dates (8 each), an empty array and a
    /// null (no payload) — 48 bytes after the object header and the shape reference (24), where
    /// six `AttributeValue?` slots took 144 (P8's memory). Values read back exactly, and one set
    /// in place or repacked leaves the others.
    @Test func aTripsValuesTakeTheirOwnBytes() {
        let layout = RowLayout(names: ["name", "destination", "startDate", "endDate", "bucketList", "livingAccommodation"])
        let start = Date(timeIntervalSinceReferenceDate: 820_000_000.125)
        let trip: [String: AttributeValue] = [
            "name": .string("Trip 1000042"), "destination": .string("Ljubljana, Slovenia and further on"),
            "startDate": .date(start), "endDate": .date(start + 7 * 86_400), "bucketList": .array([]),
            "livingAccommodation": .null,
        ]
        var row = RowValues(trip, layout: layout)
        #expect(row.packedByteCount == 72)
        #expect(row.dictionary == trip)
        // The same payload size: in place. Another size: repacked, the values after it moved.
        row["startDate"] = .date(start + 1)
        #expect(row.packedByteCount == 72 && row["endDate"] == .date(start + 7 * 86_400))
        row["livingAccommodation"] = .string("a place")
        #expect(row.packedByteCount == 88 && row["livingAccommodation"] == .string("a place"))
        row["name"] = .null
        #expect(row.packedByteCount == 72)
        var expected = trip
        expected["startDate"] = .date(start + 1)
        expected["livingAccommodation"] = .string("a place")
        expected["name"] = .null
        #expect(row.dictionary == expected)
        // Values assigned at once: one that needs a repack, then a later value of the same name
        // that fits in place — the later wins.
        row.assign([(key: "endDate", value: .string("a string now")), (key: "endDate", value: .date(start))])
        row.assign([(key: "name", value: .string("Trip 7")), (key: "bucketList", value: .array([.int(1)]))])
        expected["endDate"] = .date(start)
        expected["name"] = .string("Trip 7")
        expected["bucketList"] = .array([.int(1)])
        #expect(row.dictionary == expected)
    }

    /// Rows whose values are of the same kinds share one shape (kinds and payload offsets), a
    /// value of another kind set in place moves its row to that kind's shape, and a shape no
    /// row holds is let go (the layout keeps its shapes weakly: a shape holds its layout).
    @Test func rowsOfTheSameKindsShareAShape() {
        let layout = RowLayout(names: ["flag", "count", "note"])
        let first = RowValues([(key: "flag", value: .bool(true)), (key: "count", value: .int(1))], layout: layout)
        var second = RowValues([(key: "count", value: .int(2)), (key: "flag", value: .bool(true))], layout: layout)
        #expect(first.shape === second.shape)
        second["flag"] = .bool(false)  // no payload either way: in place, another shape
        #expect(second.shape !== first.shape && second["flag"] == .bool(false) && first["flag"] == .bool(true))
        second["flag"] = .bool(true)
        #expect(second.shape === first.shape)
        second["count"] = .date(Date(timeIntervalSinceReferenceDate: 5))  // 8 bytes either way
        #expect(second["count"] == .date(Date(timeIntervalSinceReferenceDate: 5)) && first["count"] == .int(1))
        weak var letGo: RowShape?
        do {
            let only = RowValues([(key: "note", value: .string("only row of its kinds"))], layout: layout)
            letGo = only.shape
            withExtendedLifetime(only) { #expect(letGo != nil) }
        }
        #expect(letGo == nil, "a shape no row holds is kept")
    }

    /// A layout whose rows hold thousands of combinations of kinds (13 booleans: 8,192) keeps
    /// sharing shapes past its cache's purges: a row made again in a combination that rows hold
    /// gets their shape, and every value reads back.
    @Test func rowsShareShapesPastThousandsOfCombinations() {
        let names = (0..<13).map { "flag\($0)" }
        let layout = RowLayout(names: names)
        func row(_ combination: Int) -> RowValues {
            RowValues(names.indices.map { (key: names[$0], value: .bool(combination >> $0 & 1 == 1)) }, layout: layout)
        }
        let rows = (0..<5_000).map(row)
        for combination in [0, 1_000, 4_200, 4_999] {
            let again = row(combination)
            #expect(again.shape === rows[combination].shape, "combination \(combination)")
            #expect(again == rows[combination])
        }
        #expect(rows.indices.allSatisfy { combination in
            names.indices.allSatisfy { rows[combination][names[$0]] == .bool(combination >> $0 & 1 == 1) }
        })
    }

    /// Threads making, changing and reading rows of one layout at once (a writer's saves beside
    /// fetches): shapes are found and made under the layout's lock, and each row reads back the
    /// values it was given.
    @Test func threadsMakeAndReadRowsOfOneLayoutAtOnce() async {
        let layout = RowLayout(names: ["flag", "count", "note", "when"])
        let shared = (0..<64).map { index in
            RowValues([(key: "flag", value: .bool(index % 2 == 0)), (key: "count", value: .int(Int64(index)))], layout: layout)
        }
        let failures = await withTaskGroup(of: Int.self) { group in
            for thread in 0..<4 {
                group.addTask {
                    var failures = 0
                    for step in 0..<2_000 {
                        let combination = (thread * 7 + step) % 16
                        var row = RowValues(layout: layout)
                        if combination & 1 != 0 { row["flag"] = .bool(step % 3 == 0) }
                        if combination & 2 != 0 { row["count"] = .int(Int64(step)) }
                        if combination & 4 != 0 { row["note"] = .string(String(repeating: "n", count: 20) + String(step)) }
                        if combination & 8 != 0 { row["when"] = .date(Date(timeIntervalSinceReferenceDate: Double(step))) }
                        if combination & 2 != 0 && row["count"] != .int(Int64(step)) { failures += 1 }
                        if combination & 4 != 0 && row["note"] != .string(String(repeating: "n", count: 20) + String(step)) {
                            failures += 1
                        }
                        let read = shared[step % shared.count]
                        if read["count"] != .int(Int64(step % shared.count)) { failures += 1 }
                    }
                    return failures
                }
            }
            return await group.reduce(0, +)
        }
        #expect(failures == 0)
    }

    /// Packed values read back bit for bit: doubles and dates whose `==` hides a difference
    /// (-0.0 and 0.0 are equal; a NaN equals nothing) keep their bit patterns, whether packed
    /// from a row's values, set in place or moved by a repack.
    @Test func doublesAndDatesKeepTheirBits() {
        let doubles: [Double] = [-0.0, 0.0, .nan, -.nan, Double(bitPattern: 0x7FF8_0000_0000_0ABC), .leastNonzeroMagnitude]
        let layout = RowLayout(names: ["before", "double", "date"])
        for double in doubles {
            var row = RowValues(
                [(key: "double", value: .double(double)), (key: "date", value: .date(Date(timeIntervalSinceReferenceDate: double)))],
                layout: layout)
            func expectBits(_ step: String) {
                guard case .double(let read) = row["double"], case .date(let date) = row["date"] else {
                    Issue.record("not a double and a date \(step)")
                    return
                }
                #expect(read.bitPattern == double.bitPattern, "double \(step)")
                #expect(date.timeIntervalSinceReferenceDate.bitPattern == double.bitPattern, "date \(step)")
            }
            expectBits("packed")
            row["before"] = .string(String(repeating: "moves the payloads after it", count: 2))
            expectBits("after a repack")
            row["double"] = .double(double)
            expectBits("set in place")
        }
    }

    /// Extending a layout by a name gives the same layout each time, so a rename over many rows
    /// makes one new layout; rows inserted for an entity share its layout, and a row needing a
    /// new name moves the entity to the extended layout for the rows after it.
    @Test func layoutsAreSharedAndExtendedOnce() {
        let base = RowLayout(names: ["a", "b"])
        #expect(base.extended(with: "c") === base.extended(with: "c"))
        #expect(base.extended(with: "c").names == ["a", "b", "c"])

        var state = FoldState()
        let key = { (number: UInt8) in UUID(uuid: (number, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)) }
        state.insert(entityName: "T", primaryKey: key(1), values: ["a": .int(1), "b": .int(2)])
        state.insert(entityName: "T", primaryKey: key(2), values: ["b": .int(3), "a": .int(4)])
        let first = state.row(entity: "T", primaryKey: key(1))!.values.layout
        #expect(state.row(entity: "T", primaryKey: key(2))!.values.layout === first)
        state.insert(entityName: "T", primaryKey: key(3), values: ["a": .int(5), "c": .int(6)])
        let extended = state.row(entity: "T", primaryKey: key(3))!.values.layout
        #expect(extended === first.extended(with: "c"))
        state.insert(entityName: "T", primaryKey: key(4), values: ["a": .int(7)])
        #expect(state.row(entity: "T", primaryKey: key(4))!.values.layout === extended)
        #expect(state.row(entity: "T", primaryKey: key(4))!.values.dictionary == ["a": .int(7)])

        // A rename over every row: one layout for all of them.
        state.apply([.renameAttribute(entity: "T", entityID: 0, attributeID: 0, from: "a", to: "z")])
        let renamed = Set(state.rows(of: "T").map { ObjectIdentifier($0.1.values.layout) })
        #expect(renamed.count == 2, "\(renamed.count) layouts after a rename of 4 rows in 2 layouts")
        #expect(state.rows(of: "T").allSatisfy { $0.1.values["a"] == nil && $0.1.values["z"] != nil })
    }

    /// Names a layout lacks are added in name order, whatever order the values come in: rows of
    /// dictionaries with the same keys (each dictionary iterates in an order of its own) reach one
    /// layout, and the empty layout every new state starts from caches nothing (found by review:
    /// layouts piled up under it, one chain per dictionary order).
    @Test func rowsNeedingTheSameNamesReachOneLayoutWhateverTheirOrder() {
        let names = (0..<8).map { "attribute\($0)" }
        let base = RowLayout(names: ["kept"])
        var layouts = Set<ObjectIdentifier>()
        var emptyStarts = Set<[String]>()
        var random = SeededGenerator(seed: 7)
        for round in 0..<50 {
            var values: [String: AttributeValue] = [:]
            for name in names.shuffled(using: &random) { values[name] = .int(Int64(round)) }
            let row = RowValues(values, layout: base)
            layouts.insert(ObjectIdentifier(row.layout))
            #expect(row.layout.names == ["kept"] + names.sorted())
            emptyStarts.insert(RowValues(values, layout: .empty).layout.names)
            // An update bringing two new names: the same layout for every row too.
            var updated = RowValues(["kept": .int(1)], layout: base)
            updated.assign([(key: "z2", value: .int(2)), (key: "z1", value: .int(1))].shuffled(using: &random))
            #expect(updated.layout === base.extended(with: "z1").extended(with: "z2"))
        }
        #expect(layouts.count == 1, "\(layouts.count) layouts for one set of names")
        #expect(emptyStarts == [names.sorted()])
        #expect(RowLayout.empty.extended(with: "a") !== RowLayout.empty.extended(with: "a"))
    }

    /// A compiled predicate reads an attribute's position once per layout and keeps it while the
    /// rows share one: rows in alternating layouts — including one that lacks the attribute —
    /// are matched exactly as their values say.
    @Test func aPredicateReadsRowsOfDifferentLayoutsCorrectly() throws {
        let filter = try #require(
            PredicatePushDown.compile(#Predicate<SampleTrips.Trip> { $0.name == "x" || $0.destination == "y" }))
        let match = filter.makeMatcher()
        let layouts = [
            RowLayout(names: ["name", "destination"]), RowLayout(names: ["destination", "name"]),
            RowLayout(names: ["destination"]), RowLayout(names: ["startDate", "name", "destination"]),
        ]
        var random = SeededGenerator(seed: 42)
        for step in 0..<400 {
            let layout = layouts[Int(random.next() % 4)]
            var values: [String: AttributeValue] = [:]
            if layout.position(of: "name") != nil { values["name"] = .string(random.nextBool() ? "x" : "n") }
            values["destination"] = .string(random.nextBool() ? "y" : "d")
            let expected = values["name"] == .string("x") || values["destination"] == .string("y")
            let row = RowValues(values, layout: layout)
            #expect(row.layout === layout)
            #expect(match(row) == expected, "step \(step): \(values) in \(layout.names)")
        }
    }
}
