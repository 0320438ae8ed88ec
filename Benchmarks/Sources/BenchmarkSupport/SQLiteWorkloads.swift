import Foundation
import GRDB

/// The SQLite peer: one `INSERT` of a standard payload per transaction into
/// `event(id INTEGER PRIMARY KEY AUTOINCREMENT, payload BLOB)`, WAL journal, the given
/// `synchronous` level. One thread uses a `DatabaseQueue` (journal mode set to WAL); several
/// threads share a `DatabasePool` (WAL), whose single writer serialises the transactions — the
/// threads wait on it as they would in an app.
public final class SQLiteInsertWorkload: Workload {
    public enum Synchronous: String, Sendable {
        case full = "FULL"
        case normal = "NORMAL"
    }

    let writer: any DatabaseWriter
    let payloads: [Data]
    public let facts: [String: String]

    public init(directory: String, synchronous: Synchronous, threads: Int, payloads: Payloads = .standard) throws {
        var configuration = Configuration()
        let path = directory + "/peer.sqlite"
        if threads > 1 {
            writer = try DatabasePool(path: path, configuration: configuration)
        } else {
            configuration.journalMode = .wal
            writer = try DatabaseQueue(path: path, configuration: configuration)
        }
        // After opening: GRDB's WAL setup sets `synchronous = NORMAL` after `prepareDatabase`
        // runs. Only the writer connection matters here (readers never commit).
        let level = synchronous.rawValue
        try writer.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = \(level)")
        }
        try writer.write { db in
            try db.execute(sql: "CREATE TABLE event(id INTEGER PRIMARY KEY AUTOINCREMENT, payload BLOB)")
        }
        // Report what is actually in effect on the writer connection.
        let (journalMode, synchronousValue, sqliteVersion) = try writer.write { db in
            (
                try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "?",
                try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1,
                try String.fetchOne(db, sql: "SELECT sqlite_version()") ?? "?"
            )
        }
        let synchronousNames = [0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"]
        facts = [
            "connection": threads > 1 ? "DatabasePool" : "DatabaseQueue",
            "journal_mode": journalMode,
            "synchronous": synchronousNames[synchronousValue] ?? "\(synchronousValue)",
            "sqlite": sqliteVersion,
        ]
        guard journalMode.lowercased() == "wal", facts["synchronous"] == level else {
            throw HarnessError("SQLite peer not configured as asked: \(facts)")
        }
        self.payloads = payloads.records.map { Data($0) }
    }

    public func perform(thread: Int, index: Int) throws {
        let payload = payloads[index % payloads.count]
        try writer.write { db in
            try db.cachedStatement(sql: "INSERT INTO event(payload) VALUES (?)").execute(arguments: [payload])
        }
    }

    public func close() throws {
        if let queue = writer as? DatabaseQueue { try queue.close() }
        if let pool = writer as? DatabasePool { try pool.close() }
    }
}
