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
            uniquenessConstraints: [["code"], ["holder", "year"]]),
        Schema.Entity("Note", attributes: [.init("text", .string)]),
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

    /// Updates and deletes take their models' old values out of the index: after saves that
    /// insert, change unique values and delete, it holds exactly what an index built from the
    /// state holds, and a freed value can be taken by a new model.
    @Test func updatesAndDeletesTakeTheOldValuesOut() throws {
        let temporary = TemporaryDirectory("unique-index-old")
        defer { temporary.remove() }
        var configuration = LogStoreConfiguration(schema: Self.schema, directory: temporary.path, durability: .none)
        configuration.uniqueCollisionPolicy = .throw
        let store = try LogStore(configuration)
        defer { try? store.close() }
        func save(inserted: [DefaultSnapshot] = [], updated: [DefaultSnapshot] = [], deleted: [DefaultSnapshot] = [])
            throws -> [PersistentIdentifier]
        {
            var request = DataStoreSaveChangesRequest<DefaultSnapshot>()
            request.inserted = inserted
            request.updated = updated
            request.deleted = deleted
            let result = try store.save(request)
            return inserted.map { result.remappedIdentifiers[$0.persistentIdentifier]! }
        }
        func expectIndexAsBuiltFromTheState(_ step: String) {
            let (index, state) = store.inner.withLock { ($0.uniqueIndex, $0.working) }
            let rebuilt = UniqueIndex(schema: Self.schema, state: state)
            #expect(index.filingCount == rebuilt.filingCount, "\(step): \(index.filingCount) filed, \(rebuilt.filingCount) from the state")
        }
        let ids = try save(inserted: [Self.badge(1, "ada", 2020), Self.badge(2, "bob", 2021), Self.badge(3, "cy", 2022)])
        expectIndexAsBuiltFromTheState("inserts")
        #expect(store.inner.withLock { $0.uniqueIndex.filingCount } == 6)
        _ = try save(updated: [DefaultSnapshot(persistentIdentifier: ids[0], values: ["code": .int(10), "holder": .string("ada"), "year": .int(2030)])])
        expectIndexAsBuiltFromTheState("an update of both constraints' values")
        _ = try save(deleted: [DefaultSnapshot(persistentIdentifier: ids[1], values: [:])])
        expectIndexAsBuiltFromTheState("a delete")
        // The values the update and the delete freed are free.
        _ = try save(inserted: [Self.badge(1, "ada", 2020), Self.badge(2, "bob", 2021)])
        expectIndexAsBuiltFromTheState("inserts of the freed values")
        #expect(store.inner.withLock { $0.uniqueIndex.filingCount } == 8)
    }

    /// An insert of another process's record, its values as pairs (a catch-up fold), leaves the
    /// state and the index as the same insert as a change does: a new key, a key another model
    /// holds, a model inserted again (its old row replaced), a later value of one name winning.
    @Test func anInsertFromPairsFilesAsAChangeDoes() throws {
        let store = UUID().uuidString
        func badge(_ key: UInt8) -> PersistentIdentifier {
            .permanent(for: store, entityName: "Badge", primaryKey: UUID(uuid: (key, 3, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0)))
        }
        let inserts: [(PersistentIdentifier, [(key: String, value: AttributeValue)])] = [
            (badge(1), [("code", .int(1)), ("holder", .string("ada")), ("year", .int(2020))]),
            (badge(2), [("code", .int(2)), ("holder", .string("ada")), ("year", .int(2020))]),
            (badge(3), [("code", .int(1)), ("holder", .string("bob")), ("year", .int(2021))]),
            (badge(1), [("code", .int(4)), ("holder", .string("cy")), ("year", .int(2022)), ("code", .int(5))]),
            (.permanent(for: store, entityName: "Note", primaryKey: UUID()), [("text", .string("hi"))]),
        ]
        var changeState = FoldState()
        var changeIndex = UniqueIndex(schema: Self.schema)
        var pairState = FoldState()
        var pairIndex = UniqueIndex(schema: Self.schema)
        for (identifier, values) in inserts {
            var dictionary: [String: AttributeValue] = [:]
            for (name, value) in values { dictionary[name] = value }
            let fromChange = changeIndex.apply(.insert(identifier, dictionary), to: &changeState)
            let fromPairs = pairIndex.applyInsert(of: identifier, values: values, to: &pairState)
            #expect(fromChange == fromPairs)
        }
        #expect(pairState.entities == changeState.entities)
        #expect(pairState.row(badge(1))?.values["code"] == .int(5))
        #expect(pairIndex.filingCount == changeIndex.filingCount)
        #expect(pairIndex.problems(against: pairState) == 0)
        #expect(pairIndex.owner(entity: "Badge", key: try #require(pairIndex.keys(entity: "Badge", values: ["code": .int(5)]).first), in: pairState, storeIdentifier: store) == badge(1))
    }

    /// Two inserts of one save with a unique key in common become one model (upsert policy): one
    /// insert change with the later values, both temporary identifiers mapped to it.
    @Test func twoInsertsWithAUniqueKeyInCommonAreOneInsert() throws {
        let temporary = TemporaryDirectory("unique-merge")
        defer { temporary.remove() }
        let store = try LogStore(LogStoreConfiguration(schema: Self.schema, directory: temporary.path, durability: .none))
        defer { try? store.close() }
        var request = DataStoreSaveChangesRequest<DefaultSnapshot>()
        let first = Self.badge(7, "ada", 2020)
        let second = Self.badge(7, "bob", 2021)
        let other = Self.badge(8, "cy", 2022)
        request.inserted = [first, second, other]
        let (state, index) = store.inner.withLock { ($0.working, $0.uniqueIndex) }
        let resolution = try SaveResolver(
            schema: Self.schema, storeIdentifier: store.identifier, state: state, uniqueIndex: index
        ).resolve(request)
        #expect(resolution.changes.count == 2, "\(resolution.changes)")
        let merged = try #require(resolution.remapped[first.persistentIdentifier])
        #expect(resolution.remapped[second.persistentIdentifier] == merged)
        #expect(resolution.remapped[other.persistentIdentifier] != merged)
        guard case .insert(merged, let values) = resolution.changes.first else {
            Issue.record("the first change is not the merged insert: \(resolution.changes)")
            return
        }
        #expect(values["holder"] == .string("bob") && values["year"] == .int(2021))
        // One temporary identifier given twice is one model as well (of an entity without
        // constraints: no key makes the second insert find the first).
        let note = DefaultSnapshot(persistentIdentifier: .temporary(entityName: "Note"), values: ["text": .string("hi")])
        var twice = DataStoreSaveChangesRequest<DefaultSnapshot>()
        twice.inserted = [note, note]
        let once = try SaveResolver(
            schema: Self.schema, storeIdentifier: store.identifier, state: state, uniqueIndex: index
        ).resolve(twice)
        #expect(once.changes.count == 1, "\(once.changes)")
    }

    /// A request's names are checked (inserted, updated, deleted lists in turn) before its
    /// identifiers (updated, then deleted): the first problem in that order is the one reported.
    @Test func aRequestsFirstProblemIsTheOneReported() throws {
        let temporary = TemporaryDirectory("resolver-order")
        defer { temporary.remove() }
        let store = try LogStore(LogStoreConfiguration(schema: Self.schema, directory: temporary.path, durability: .none))
        defer { try? store.close() }
        let (state, index) = store.inner.withLock { ($0.working, $0.uniqueIndex) }
        func code(_ request: DataStoreSaveChangesRequest<DefaultSnapshot>) -> LogStoreError.Code? {
            do {
                _ = try SaveResolver(
                    schema: Self.schema, storeIdentifier: store.identifier, state: state, uniqueIndex: index
                ).resolve(request)
                return nil
            } catch { return error.code }
        }
        let stored = PersistentIdentifier.permanent(
            for: store.identifier, entityName: "Note", primaryKey: UUID(uuid: (9, 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 1)))
        let foreign = PersistentIdentifier.permanent(
            for: UUID().uuidString, entityName: "Note", primaryKey: UUID(uuid: (9, 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 2)))
        let temporaryNote = PersistentIdentifier.temporary(entityName: "Note")
        // An unknown attribute in the deleted list, a temporary identifier among the updated.
        var request = DataStoreSaveChangesRequest<DefaultSnapshot>()
        request.updated = [DefaultSnapshot(persistentIdentifier: temporaryNote, values: ["text": .string("a")])]
        request.deleted = [DefaultSnapshot(persistentIdentifier: stored, values: ["color": .string("red")])]
        #expect(code(request) == .unknownAttribute)
        // An unknown entity among the inserted comes before an unknown attribute among the updated.
        request = DataStoreSaveChangesRequest<DefaultSnapshot>()
        request.inserted = [DefaultSnapshot(persistentIdentifier: .temporary(entityName: "Ghost"), values: [:])]
        request.updated = [DefaultSnapshot(persistentIdentifier: stored, values: ["color": .string("red")])]
        #expect(code(request) == .unknownEntity)
        // A foreign identifier among the updated comes before a temporary one among the deleted.
        request = DataStoreSaveChangesRequest<DefaultSnapshot>()
        request.updated = [DefaultSnapshot(persistentIdentifier: foreign, values: ["text": .string("a")])]
        request.deleted = [DefaultSnapshot(persistentIdentifier: temporaryNote, values: [:])]
        #expect(code(request) == .foreignIdentifier)
        // A temporary identifier among the updated comes before a foreign one among the deleted.
        request = DataStoreSaveChangesRequest<DefaultSnapshot>()
        request.updated = [DefaultSnapshot(persistentIdentifier: temporaryNote, values: ["text": .string("a")])]
        request.deleted = [DefaultSnapshot(persistentIdentifier: foreign, values: [:])]
        #expect(code(request) == .modelNotFound)
    }

    /// An update that takes the unique value an insert of the same save holds is refused (the
    /// save's one insert still claims its keys when the save has updates).
    @Test func anUpdateTakingTheValueOfAnInsertOfTheSameSaveIsRefused() throws {
        let temporary = TemporaryDirectory("unique-insert-update")
        defer { temporary.remove() }
        let store = try LogStore(LogStoreConfiguration(schema: Self.schema, directory: temporary.path, durability: .none))
        defer { try? store.close() }
        var first = DataStoreSaveChangesRequest<DefaultSnapshot>()
        let stored = Self.badge(1, "ada", 2020)
        first.inserted = [stored]
        let identifier = try #require(try store.save(first).remappedIdentifiers[stored.persistentIdentifier])
        var request = DataStoreSaveChangesRequest<DefaultSnapshot>()
        request.inserted = [Self.badge(2, "bob", 2021)]
        request.updated = [
            DefaultSnapshot(persistentIdentifier: identifier, values: ["code": .int(2), "holder": .string("ada"), "year": .int(2020)])
        ]
        #expect(throws: LogStoreError.self) { try store.save(request) }
        #expect(store.inner.withLock { $0.published.count(of: "Badge") } == 1)
    }

    /// A snapshot with several values of the wrong type is refused naming the first such
    /// property in declaration order (not the dictionary's order, which differs per instance).
    @Test func theFirstWrongValueInDeclarationOrderIsNamed() throws {
        let temporary = TemporaryDirectory("unique-wrong")
        defer { temporary.remove() }
        let store = try LogStore(LogStoreConfiguration(schema: Self.schema, directory: temporary.path, durability: .none))
        defer { try? store.close() }
        for _ in 0..<20 {
            var request = DataStoreSaveChangesRequest<DefaultSnapshot>()
            request.inserted = [
                DefaultSnapshot(
                    persistentIdentifier: .temporary(entityName: "Badge"),
                    values: ["year": .string("x"), "holder": .int(1), "code": .string("y")])
            ]
            #expect(Self.violation(store, request.inserted)?.attribute == "code")
        }
    }

    /// The index files keys by hash and keeps no values: a lookup reads the candidates' values
    /// from the state. Replay never validates, so two models can hold one combination (a store
    /// written by a faulty build): the one filed last is the owner, and when it goes the other one
    /// is found again. A model whose values changed is found under its new key only.
    @Test func ownersAreFoundThroughTheStateAndTheLastFiledWins() {
        let store = UUID().uuidString
        var state = FoldState()
        var index = UniqueIndex(schema: Self.schema)
        func badge(_ key: UInt8) -> PersistentIdentifier {
            .permanent(for: store, entityName: "Badge", primaryKey: UUID(uuid: (key, 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0)))
        }
        func badge2(_ key: Int) -> PersistentIdentifier {
            .permanent(
                for: store, entityName: "Badge",
                primaryKey: UUID(uuid: (UInt8(key >> 8), UInt8(key & 0xFF), 1, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0)))
        }
        func apply(_ change: ResolvedChange) { index.apply(change, to: &state) }
        func owner(code: Int64) -> PersistentIdentifier? {
            index.owner(
                entity: "Badge", key: UniqueIndex.Key(constraintIndex: 0, values: [.int(code)], digest: UniqueIndex.Key.digest(of: [.int(code)])), in: state,
                storeIdentifier: store)
        }
        apply(.insert(badge(1), ["code": .int(7), "holder": .string("ada"), "year": .int(2020)]))
        apply(.insert(badge(2), ["code": .int(7), "holder": .string("bob"), "year": .int(2021)]))
        #expect(owner(code: 7) == badge(2))
        #expect(
            index.owner(
                entity: "Badge", key: UniqueIndex.Key(constraintIndex: 1, values: [.string("ada"), .int(2020)], digest: UniqueIndex.Key.digest(of: [.string("ada"), .int(2020)])),
                in: state, storeIdentifier: store) == badge(1))
        apply(.delete(badge(2), tombstone: [:]))
        #expect(owner(code: 7) == badge(1))
        apply(.update(badge(1), ["code": .int(8)]))
        #expect(owner(code: 7) == nil)
        #expect(owner(code: 8) == badge(1))
        apply(.delete(badge(1), tombstone: [:]))
        #expect(owner(code: 8) == nil)

        // A crowd: 2,000 models with one code (a migration's fill of a unique attribute gives
        // every model one value). The newest owns it; removing models, newest or not, keeps the
        // newest remaining one the owner, down to one.
        for key in 10..<2_010 { apply(.insert(badge2(key), ["code": .int(9), "holder": .string("h\(key)"), "year": .int(1)])) }
        #expect(owner(code: 9) == badge2(2_009))
        apply(.delete(badge2(2_009), tombstone: [:]))
        #expect(owner(code: 9) == badge2(2_008))
        for key in stride(from: 10, to: 2_008, by: 1) { apply(.delete(badge2(key), tombstone: [:])) }
        #expect(owner(code: 9) == badge2(2_008))
        apply(.update(badge2(2_008), ["code": .int(10)]))
        #expect(owner(code: 9) == nil && owner(code: 10) == badge2(2_008))
    }

    /// An open that replays the log (no checkpoint) trims each entity's key table, which the
    /// replay grew by doubling: 800 rows in 1,200 buckets (3/2 a row), not 2,048.
    @Test func anOpenByReplayTrimsTheKeyTables() throws {
        let temporary = TemporaryDirectory("replay-trim")
        defer { temporary.remove() }
        let configuration = LogStoreConfiguration(schema: Self.schema, directory: temporary.path, durability: .none)
        do {
            let store = try LogStore(configuration)
            var request = DataStoreSaveChangesRequest<DefaultSnapshot>()
            request.inserted = (0..<800).map { Self.badge(Int64($0), "h\($0)", 1) }
            _ = try store.save(request)
            #expect(store.inner.withLock { $0.working.rows(of: "Badge").indexBucketCount } == 2_048)
            try store.close()
        }
        let reopened = try LogStore(configuration)
        defer { try? reopened.close() }
        let (count, buckets) = reopened.inner.withLock { ($0.working.count(of: "Badge"), $0.working.rows(of: "Badge").indexBucketCount) }
        #expect(count == 800 && buckets == 1_200)
    }

    /// The index names owners by their rows' slots: through random inserts, updates, deletes and
    /// re-inserts of a key — deletes enough for the entity to compact its holes (renumbering every
    /// slot) several times — each code's owner is a live model holding it (the only one when it is
    /// alone, none when nobody holds it), and the index files exactly what one built from the state
    /// files.
    @Test(arguments: [1 as UInt64, 2, 3])
    func ownersStayRightThroughRenumberings(seed: UInt64) {
        let store = UUID().uuidString
        var state = FoldState()
        var index = UniqueIndex(schema: Self.schema)
        var random = SeededGenerator(seed: seed)
        var live: [UUID: Int64] = [:]  // model → code
        var keys: [UUID] = []
        func identifier(_ key: UUID) -> PersistentIdentifier { .permanent(for: store, entityName: "Badge", primaryKey: key) }
        func values(_ code: Int64, _ key: UUID) -> [String: AttributeValue] {
            ["code": .int(code), "holder": .string(key.uuidString), "year": .int(1)]
        }
        let renumberingsBefore = state.renumberings(of: "Badge")
        var wrong = 0
        for step in 0..<6_000 {
            // Phases: mostly inserts, then mostly deletes (so holes outnumber rows and compact).
            let deleting = (step / 1_500) % 2 == 1
            let roll = Int.random(in: 0..<100, using: &random)
            let code = Int64.random(in: 0..<400, using: &random)
            if live.isEmpty || roll < (deleting ? 10 : 60) {
                let key = UUID()
                keys.append(key)
                index.apply(.insert(identifier(key), values(code, key)), to: &state)
                live[key] = code
            } else if roll < (deleting ? 20 : 80) {
                let key = live.keys.randomElement(using: &random)!
                index.apply(.update(identifier(key), ["code": .int(code)]), to: &state)
                live[key] = code
            } else if roll < (deleting ? 23 : 85) {
                // A re-insert of a live key: its row moves to the end (a new slot).
                let key = live.keys.randomElement(using: &random)!
                index.apply(.insert(identifier(key), values(code, key)), to: &state)
                live[key] = code
            } else {
                let key = live.keys.randomElement(using: &random)!
                index.apply(.delete(identifier(key), tombstone: [:]), to: &state)
                live[key] = nil
            }
            guard step % 100 == 99 else { continue }
            var holders: [Int64: [UUID]] = [:]
            for (key, code) in live { holders[code, default: []].append(key) }
            for code in Int64(0)..<400 {
                let probe = UniqueIndex.Key(constraintIndex: 0, values: [.int(code)], digest: UniqueIndex.Key.digest(of: [.int(code)]))
                let found = index.owner(entity: "Badge", key: probe, in: state, storeIdentifier: store)?.primaryKey
                let expected = holders[code] ?? []
                if expected.isEmpty ? found != nil : !(found.map(expected.contains) ?? false) { wrong += 1 }
            }
            let rebuilt = UniqueIndex(schema: Self.schema, state: state)
            if index.filingCount != rebuilt.filingCount { wrong += 1 }
            wrong += index.problems(against: state)
        }
        #expect(wrong == 0, "\(wrong) wrong owners or filing counts")
        #expect(state.renumberings(of: "Badge") - renumberingsBefore >= 2, "the rows were compacted \(state.renumberings(of: "Badge")) times")
    }

    /// Equal values under another constraint are not an owner: a model holding 5 in `a` (the
    /// first constraint) owns no key of 5 for `b` (the second), though both slots have the same
    /// digest; whoever holds 5 in `b` does.
    @Test func equalValuesOfAnotherConstraintAreNotAnOwner() {
        let schema = Schema([
            Schema.Entity("Pair", attributes: [.init("a", .int), .init("b", .int)], uniquenessConstraints: [["a"], ["b"]])
        ])
        let store = UUID().uuidString
        var state = FoldState()
        var index = UniqueIndex(schema: schema)
        func pair(_ key: UInt8) -> PersistentIdentifier {
            .permanent(for: store, entityName: "Pair", primaryKey: UUID(uuid: (key, 3, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0)))
        }
        func insert(_ key: UInt8, a: Int64, b: Int64) {
            index.apply(.insert(pair(key), ["a": .int(a), "b": .int(b)]), to: &state)
        }
        func owner(_ constraint: Int, _ value: Int64) -> PersistentIdentifier? {
            let values: [AttributeValue] = [.int(value)]
            let key = UniqueIndex.Key(constraintIndex: constraint, values: values, digest: UniqueIndex.Key.digest(of: values))
            return index.owner(entity: "Pair", key: key, in: state, storeIdentifier: store)
        }
        insert(1, a: 5, b: 6)
        #expect(owner(0, 5) == pair(1) && owner(1, 6) == pair(1))
        #expect(owner(1, 5) == nil && owner(0, 6) == nil)
        insert(2, a: 7, b: 5)
        #expect(owner(1, 5) == pair(2) && owner(0, 5) == pair(1))
    }

    /// Keys that only hash alike are not owners of each other: with every key of a constraint in
    /// one slot (an index whose digest is a constant), each lookup must still find exactly the
    /// model holding its values, through the values in the state.
    /// (Also digests that differ only above the 32 bits a slot keeps; an entry takes 12 bytes.)
    @Test(arguments: [false, true])
    func keysThatOnlyHashAlikeAreToldApartByTheStoredValues(highBitsOnly: Bool) {
        #expect(UniqueIndex.entryStride == 12)
        let store = UUID().uuidString
        var state = FoldState()
        var index = UniqueIndex(
            schema: Self.schema, worsen: { @Sendable digest in highBitsOnly ? (digest & ~0xFFFF_FFFF) | 42 : 42 })
        func badge(_ key: UInt8) -> PersistentIdentifier {
            .permanent(for: store, entityName: "Badge", primaryKey: UUID(uuid: (key, 2, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0)))
        }
        func apply(_ change: ResolvedChange) { index.apply(change, to: &state) }
        func owner(code: Int64) -> PersistentIdentifier? {
            let values: [String: AttributeValue] = ["code": .int(code), "holder": .string("x"), "year": .int(0)]
            let key = index.keys(entity: "Badge", values: values)[0]
            return index.owner(entity: "Badge", key: key, in: state, storeIdentifier: store)
        }
        for code in 1...40 {
            apply(.insert(badge(UInt8(code)), ["code": .int(Int64(code)), "holder": .string("h\(code)"), "year": .int(1)]))
        }
        for code in 1...40 { #expect(owner(code: Int64(code)) == badge(UInt8(code)), "code \(code)") }
        #expect(owner(code: 41) == nil)
        for code in stride(from: 2, through: 40, by: 2) { apply(.delete(badge(UInt8(code)), tombstone: [:])) }
        for code in 1...40 {
            #expect(owner(code: Int64(code)) == (code % 2 == 1 ? badge(UInt8(code)) : nil), "code \(code)")
        }
    }
}
