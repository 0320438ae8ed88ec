import Foundation
import GRDB
import LogStore
import LogStoreEngine
import SampleTrips

// P6: fetch 1,000 transactions after a token near the end of a 10k, 100k and 1M-transaction
// history, token only and with an author filter, against SQLite's history table ("1,000 rows
// after an id"). Both fixtures are built once and cached (Fixtures): the LogStore store with one
// Trip inserted per save (every 10th save by author "widget", the others by "app") and a
// checkpoint at the end (so opening does not replay); the SQLite database with the same history
// as rows of the peer's history table (SQLiteModelWorkload's shape: one row per change).

/// One history fixture's sizes and the positions the fetches start after.
enum HistoryFixture {
    static func transactionCount(_ size: Int, profile: BenchmarkProfile) -> Int {
        profile.isSmoke ? min(size, 2_000) : size
    }

    /// The LogStore store: `count` saves of one Trip; facts hold the tokens (JSON) the fetches
    /// start after: 1,001 transactions before the end (token only), and 10,001 before the end
    /// (author filter: 1,000 "widget" transactions follow it).
    static func logStore(count: Int) throws -> (path: String, facts: [String: String]) {
        try Fixtures.prepare("p6-logstore-\(count)") { building in
            let container = try ModelContainer(
                for: tripModels, configuration: Fixtures.configuration(building, durability: .none))
            let store = container.dataStore(as: LogStore.self)!
            var tokens: [DefaultHistoryToken] = []
            tokens.reserveCapacity(count)
            for index in 0..<count {
                var request = DataStoreSaveChangesRequest<DefaultSnapshot>()
                request.editingState = EditingState(author: index % 10 == 9 ? "widget" : "app")
                request.inserted = [
                    DefaultSnapshot(
                        persistentIdentifier: .temporary(entityName: Trip.entityName),
                        values: TripValues(index: index).attributeValues)
                ]
                tokens.append(try store.save(request).token!)
            }
            _ = try store.checkpoint()
            let logBytes = store.logEndOffset
            try store.close()
            let json = { (token: DefaultHistoryToken) in String(decoding: try JSONEncoder().encode(token), as: UTF8.self) }
            return [
                "transactions": String(count), "logBytes": String(logBytes),
                "tokenNearEnd": try json(tokens[max(0, count - 1_001)]),
                "tokenForAuthor": try json(tokens[max(0, count - 10_001)]),
            ]
        }
    }

    /// The SQLite database: `count` history rows (ids 1…count), authors as above.
    static func sqlite(count: Int) throws -> (path: String, facts: [String: String]) {
        try Fixtures.prepare("p6-sqlite-\(count)") { building in
            var configuration = Configuration()
            configuration.journalMode = .wal
            let queue = try DatabaseQueue(path: building + "/peer.sqlite", configuration: configuration)
            try queue.write { db in
                try db.execute(
                    sql: """
                        CREATE TABLE history(id INTEGER PRIMARY KEY AUTOINCREMENT, timestamp INTEGER NOT NULL, author TEXT,
                                             entity INTEGER NOT NULL, row INTEGER NOT NULL, kind INTEGER NOT NULL)
                        """)
                let statement = try db.makeStatement(
                    sql: "INSERT INTO history(timestamp, author, entity, row, kind) VALUES (?, ?, 1, ?, 1)")
                for index in 0..<count {
                    try statement.execute(arguments: [
                        Int64(index) * 1_000, index % 10 == 9 ? "widget" : "app", index + 1,
                    ])
                }
            }
            try queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
            try queue.close()
            return [
                "rows": String(count), "idNearEnd": String(max(0, count - 1_001)),
                "idForAuthor": String(max(0, count - 10_001)),
            ]
        }
    }
}

/// P6 on LogStore: one operation = `fetchHistory` of 1,000 transactions after a token near the
/// end (`$0.token > t`, fetchLimit 1,000), or of the 1,000 "widget" transactions after a token
/// 10,001 from the end (`$0.token > t && $0.author == "widget"`); every transaction's header
/// decoded, its changes left to be decoded when first read (not read here). The first fetch after
/// the open is timed on its own (fact `firstFetchMicroseconds`): with the author filter it reads
/// every record after the token and files its author in the store's author index (D6), which the
/// measured fetches then go through.
public final class HistoryFetchWorkload: Workload, @unchecked Sendable {
    // @unchecked: single-threaded (threads: 1).
    public enum Filter: String, Sendable { case token, author }

    let store: LogStore
    let descriptor: HistoryDescriptor<DefaultHistoryTransaction>
    let fixtureFacts: [String: String]
    let filter: Filter
    var fetches = 0
    var transactions = 0

    public init(profile: BenchmarkProfile, size: Int, filter: Filter) throws {
        let count = HistoryFixture.transactionCount(size, profile: profile)
        let (path, facts) = try HistoryFixture.logStore(count: count)
        let container = try ModelContainer(for: tripModels, configuration: Fixtures.configuration(path))
        store = container.dataStore(as: LogStore.self)!
        let key = filter == .token ? "tokenNearEnd" : "tokenForAuthor"
        let token = try JSONDecoder().decode(DefaultHistoryToken.self, from: Data((facts[key] ?? "").utf8))
        var descriptor =
            filter == .token
            ? HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token > token })
            : HistoryDescriptor<DefaultHistoryTransaction>(
                predicate: #Predicate { $0.token > token && $0.author == "widget" })
        descriptor.fetchLimit = 1_000
        self.descriptor = descriptor
        self.filter = filter
        let clock = ContinuousClock()
        let started = clock.now
        _ = try store.fetchHistory(descriptor)
        let first = clock.now - started
        fixtureFacts = facts.merging([
            "firstFetchMicroseconds": String(first.components.seconds * 1_000_000 + first.components.attoseconds / 1_000_000_000_000)
        ]) { $1 }
    }

    public func perform(thread: Int, index: Int) throws {
        let fetched = try store.fetchHistory(descriptor)
        guard fetched.count == min(1_000, Int(fixtureFacts["transactions"] ?? "0")! / (filter == .token ? 1 : 10))
        else {
            throw HarnessError("fetched \(fetched.count) transactions")
        }
        fetches += 1
        transactions += fetched.count
    }

    public var counters: [String: Double] { ["fetches": Double(fetches), "transactions": Double(transactions)] }
    public var facts: [String: String] { fixtureFacts.merging(["filter": filter.rawValue]) { $1 } }
    public func close() throws { try store.close() }
}

/// P6's peer: SQLite answering "1,000 history rows after an id" (and "… by author 'widget'")
/// through a cached prepared statement, every row read into a Swift value.
public final class SQLiteHistoryFetchWorkload: Workload, @unchecked Sendable {
    // @unchecked: single-threaded (threads: 1).
    struct Row {
        var id: Int64
        var timestamp: Int64
        var author: String?
        var entity: Int64
        var row: Int64
        var kind: Int64
    }

    let queue: DatabaseQueue
    let sql: String
    let after: Int64
    let fixtureFacts: [String: String]
    let filter: HistoryFetchWorkload.Filter
    var fetches = 0

    public init(profile: BenchmarkProfile, size: Int, filter: HistoryFetchWorkload.Filter) throws {
        let count = HistoryFixture.transactionCount(size, profile: profile)
        let (path, facts) = try HistoryFixture.sqlite(count: count)
        var configuration = Configuration()
        configuration.readonly = true
        queue = try DatabaseQueue(path: path + "/peer.sqlite", configuration: configuration)
        self.filter = filter
        after = Int64(facts[filter == .token ? "idNearEnd" : "idForAuthor"] ?? "0")!
        sql =
            filter == .token
            ? "SELECT id, timestamp, author, entity, row, kind FROM history WHERE id > ? ORDER BY id LIMIT 1000"
            : "SELECT id, timestamp, author, entity, row, kind FROM history WHERE id > ? AND author = 'widget' ORDER BY id LIMIT 1000"
        fixtureFacts = facts
    }

    public func perform(thread: Int, index: Int) throws {
        let rows = try queue.read { db -> [Row] in
            let statement = try db.cachedStatement(sql: sql)
            var rows: [Row] = []
            rows.reserveCapacity(1_000)
            let cursor = try GRDB.Row.fetchCursor(statement, arguments: [after])
            while let row = try cursor.next() {
                rows.append(
                    Row(id: row[0], timestamp: row[1], author: row[2], entity: row[3], row: row[4], kind: row[5]))
            }
            return rows
        }
        guard !rows.isEmpty else { throw HarnessError("no rows after \(after)") }
        fetches += 1
    }

    public var counters: [String: Double] { ["fetches": Double(fetches)] }
    public var facts: [String: String] { fixtureFacts.merging(["filter": filter.rawValue]) { $1 } }
    public func close() throws { try queue.close() }
}
