import Foundation
import LogStore
import LogStoreEngine
import LogStoreTestSupport
import Synchronization
import Testing

/// A small model for property tests: a unique-free key, a counter, an optional tag, and a
/// nullify reference to another item.
final class Item: PersistentModel {
    static let schemaProperties: [ModelProperty<Item>] = [
        .attribute("key", \.key),
        .attribute("count", \.count),
        .attribute("tag", \.tag),
        .toOne("friend", \.friend),
    ]
    let modelState = ModelState()
    var key = ""
    var count = 0
    var tag: String?
    var friend: Item?
    required init() {}
}

/// What an item looks like from outside: comparable across contexts and stores.
struct ItemValue: Hashable, CustomStringConvertible {
    var key: String
    var count: Int
    var tag: String?
    var friendKey: String?
    var description: String { "\(key):\(count):\(tag ?? "-"):\(friendKey ?? "-")" }
}

func itemValues(_ items: [Item]) -> Set<ItemValue> {
    Set(items.map { ItemValue(key: $0.key, count: $0.count, tag: $0.tag, friendKey: $0.friend?.key) })
}

@Suite struct ModelPropertyTests {
    static func container(_ fileSystem: SimulatedFileSystem) throws -> ModelContainer {
        try ModelContainer(
            for: [Item.self], configuration: LogStoreConfiguration(directory: "/items", fileSystem: fileSystem))
    }

    /// A container of `kind` for Items: the log on `fileSystem`, the archive in `directory`.
    static func container(_ kind: StoreKind, fileSystem: SimulatedFileSystem, directory: String) throws
        -> ModelContainer
    {
        switch kind {
        case .log: try container(fileSystem)
        case .archive:
            try ModelContainer(
                for: [Item.self], configuration: ArchiveStoreConfiguration(path: directory + "/items.json"))
        }
    }

    /// Random inserts, updates, deletes, saves and rollbacks through a context, against an
    /// in-memory reference: after every save a fresh context fetches exactly the reference, and
    /// so does a reopened store.
    @Test(arguments: StoreKind.allCases, 0..<30)
    func savedStateMatchesAReferenceModel(kind: StoreKind, seed: Int) throws {
        var random = SeededGenerator(seed: UInt64(seed) &* 31 &+ 7)
        let fileSystem = SimulatedFileSystem()
        let temporary = TemporaryDirectory("items")
        let directory = temporary.path
        defer { temporary.remove() }
        var container = try Self.container(kind, fileSystem: fileSystem, directory: directory)
        var context = ModelContext(container)
        // The reference: committed values per live instance, and the instances a save will keep.
        var committed: [ObjectIdentifier: ItemValue] = [:]
        var live: [Item] = []  // saved and not deleted (as the context sees them)
        var pendingInserts: [Item] = []
        var pendingDeletes: [Item] = []
        var nextKey = 0
        func value(_ item: Item) -> ItemValue {
            ItemValue(key: item.key, count: item.count, tag: item.tag, friendKey: item.friend?.key)
        }
        for step in 0..<Int.random(in: 20...80, using: &random) {
            let candidates = live.filter { item in !pendingDeletes.contains { $0 === item } } + pendingInserts
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<3:
                let item = Item()
                item.key = "k\(nextKey)"
                nextKey += 1
                item.count = Int.random(in: -5...5, using: &random)
                item.tag = Bool.random(using: &random) ? "t\(Int.random(in: 0..<3, using: &random))" : nil
                item.friend = candidates.randomElement(using: &random)
                context.insert(item)
                pendingInserts.append(item)
            case 3..<6:
                guard let item = candidates.randomElement(using: &random) else { continue }
                switch Int.random(in: 0..<3, using: &random) {
                case 0: item.count += 1
                case 1: item.tag = item.tag == nil ? "é" : nil
                default: item.friend = candidates.randomElement(using: &random)
                }
            case 6:
                guard
                    let item = live.filter({ item in !pendingDeletes.contains { $0 === item } }).randomElement(
                        using: &random)
                else { continue }
                context.delete(item)
                pendingDeletes.append(item)
            case 7:
                context.rollback()
                pendingInserts.removeAll()
                pendingDeletes.removeAll()
                for item in live {
                    #expect(value(item) == committed[ObjectIdentifier(item)], "seed \(seed) step \(step): rollback")
                }
            default:
                try context.save()
                live.removeAll { item in pendingDeletes.contains { $0 === item } }
                live += pendingInserts
                pendingInserts.removeAll()
                pendingDeletes.removeAll()
                // Nullify: references to deleted items are gone in the store and in the instances.
                for item in live where item.friend.map({ friend in !live.contains { $0 === friend } }) ?? false {
                    Issue.record("seed \(seed) step \(step): \(item.key) still refers to a deleted item")
                }
                committed = Dictionary(uniqueKeysWithValues: live.map { (ObjectIdentifier($0), value($0)) })
                let fetched = try ModelContext(container).fetch(FetchDescriptor<Item>())
                #expect(itemValues(fetched) == Set(committed.values), "seed \(seed) step \(step): fetch after save")
            }
        }
        context.rollback()
        let expected = Set(committed.values)
        #expect(itemValues(try ModelContext(container).fetch(FetchDescriptor<Item>())) == expected)
        try container.dataStore(as: LogStore.self)?.close()
        container = try Self.container(kind, fileSystem: fileSystem, directory: directory)
        context = ModelContext(container)
        #expect(itemValues(try context.fetch(FetchDescriptor<Item>())) == expected, "seed \(seed): after reopen")
        #expect(try context.fetchCount(FetchDescriptor<Item>()) == expected.count)
        guard let store = container.dataStore(as: LogStore.self) else { return }
        // And once more from a checkpoint: open loads it and replays nothing after it.
        _ = try store.checkpoint()
        try store.close()
        container = try Self.container(kind, fileSystem: fileSystem, directory: directory)
        #expect(
            itemValues(try ModelContext(container).fetch(FetchDescriptor<Item>())) == expected,
            "seed \(seed): after checkpoint and reopen")
    }

    /// On the real disk: the simulated one's `fdatasync` takes no time, so on a starved machine
    /// (the full suite beside other work) the threads could each save alone, one after the other,
    /// and share nothing (seen once: 200 syncs for 200 saves, the test taking 125 s).
    @Test func eightThreadsSavingThroughTheirOwnContextsShareSyncs() throws {
        let temporary = TemporaryDirectory("share-syncs")
        defer { temporary.remove() }
        let container = try ModelContainer(
            for: [Item.self], configuration: LogStoreConfiguration(directory: temporary.appending("items")))
        let before = try #require(container.dataStore(as: LogStore.self)).logStatistics
        let done = DispatchSemaphore(value: 0)
        let failures = Mutex(0)
        for thread in 0..<8 {
            Thread {
                let context = ModelContext(container)
                context.author = "thread \(thread)"
                for number in 0..<25 {
                    let item = Item()
                    item.key = "t\(thread)-\(number)"
                    context.insert(item)
                    do { try context.save() } catch { failures.withLock { $0 += 1 } }
                }
                done.signal()
            }.start()
        }
        for _ in 0..<8 { done.wait() }
        #expect(failures.withLock { $0 } == 0)
        let store = try #require(container.dataStore(as: LogStore.self))
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<Item>()) == 200)
        let statistics = store.logStatistics
        #expect(statistics.appendCount - before.appendCount == 200)
        #expect(statistics.syncCount - before.syncCount < 200, "saves should share fdatasyncs")
    }
}
