import Foundation
import GRDB

/// The SQLite peer of the model-layer workloads: the same Trip model as tables, and a history
/// table keyed by an autoincrement id (the token), written in the same transaction — what a
/// LogStore save gives for free. Each save is one transaction inserting `rowsPerSave` trips and
/// one history row per trip, through cached prepared statements (SQLite's best case: no ORM
/// layer, no encoding beyond binding).
///
/// ```
/// trip(id INTEGER PRIMARY KEY, name TEXT, destination TEXT, startDate REAL, endDate REAL,
///      livingAccommodation INTEGER REFERENCES livingAccommodation)  + UNIQUE(name, startDate, endDate)
/// bucketListItem(id, trip REFERENCES trip, title, details, hasReservation, isInPlan)   (stays empty)
/// livingAccommodation(id, address, placeName, isConfirmed)                             (stays empty)
/// history(id INTEGER PRIMARY KEY AUTOINCREMENT, timestamp INTEGER µs, author TEXT,
///         entity INTEGER, row INTEGER, kind INTEGER)                  one row per change
/// ```
///
/// WAL journal at the given `synchronous` level; one thread uses a `DatabaseQueue`, several share
/// a `DatabasePool` (its single writer serialises the transactions). At teardown the WAL is
/// checkpointed (TRUNCATE) and the growth of the database file over the run, divided by the
/// rows written, is reported (`bytesPerRow`: one trip row + one history row + index entries).
public final class SQLiteModelWorkload: Workload, @unchecked Sendable {
    // @unchecked: `rows` is only read between iterations; writes happen inside the writer's
    // serialised transactions.
    let writer: any DatabaseWriter
    let path: String
    let rowsPerSave: Int
    let baselineBytes: Int
    let fixedFacts: [String: String]
    var rows = 0
    var saves = 0

    public init(directory: String, synchronous: SQLiteInsertWorkload.Synchronous, threads: Int, rowsPerSave: Int = 1)
        throws
    {
        var configuration = Configuration()
        path = directory + "/peer.sqlite"
        if threads > 1 {
            writer = try DatabasePool(path: path, configuration: configuration)
        } else {
            configuration.journalMode = .wal
            writer = try DatabaseQueue(path: path, configuration: configuration)
        }
        self.rowsPerSave = rowsPerSave
        let level = synchronous.rawValue
        try writer.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = \(level)")
        }
        try writer.write { db in
            try db.execute(
                sql: """
                    CREATE TABLE livingAccommodation(id INTEGER PRIMARY KEY, address TEXT NOT NULL, placeName TEXT NOT NULL,
                                                     isConfirmed INTEGER NOT NULL);
                    CREATE TABLE trip(id INTEGER PRIMARY KEY, name TEXT NOT NULL, destination TEXT NOT NULL,
                                      startDate REAL NOT NULL, endDate REAL NOT NULL,
                                      livingAccommodation INTEGER REFERENCES livingAccommodation(id));
                    CREATE UNIQUE INDEX trip_unique ON trip(name, startDate, endDate);
                    CREATE TABLE bucketListItem(id INTEGER PRIMARY KEY, trip INTEGER REFERENCES trip(id) ON DELETE CASCADE,
                                                title TEXT NOT NULL, details TEXT NOT NULL, hasReservation INTEGER NOT NULL,
                                                isInPlan INTEGER NOT NULL);
                    CREATE TABLE history(id INTEGER PRIMARY KEY AUTOINCREMENT, timestamp INTEGER NOT NULL, author TEXT,
                                         entity INTEGER NOT NULL, row INTEGER NOT NULL, kind INTEGER NOT NULL);
                    """)
        }
        let (journalMode, synchronousValue, sqliteVersion) = try writer.write { db in
            (
                try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "?",
                try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1,
                try String.fetchOne(db, sql: "SELECT sqlite_version()") ?? "?"
            )
        }
        let synchronousNames = [0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"]
        fixedFacts = [
            "connection": threads > 1 ? "DatabasePool" : "DatabaseQueue",
            "journal_mode": journalMode,
            "synchronous": synchronousNames[synchronousValue] ?? "\(synchronousValue)",
            "sqlite": sqliteVersion,
            "rowsPerSave": String(rowsPerSave),
        ]
        guard journalMode.lowercased() == "wal", fixedFacts["synchronous"] == level else {
            throw HarnessError("SQLite peer not configured as asked: \(fixedFacts)")
        }
        baselineBytes = try Self.checkpointedBytes(writer, path: path)
    }

    public func perform(thread: Int, index: Int) throws {
        let rowsPerSave = self.rowsPerSave
        let first = index * rowsPerSave
        try writer.write { db in
            let insertTrip = try db.cachedStatement(
                sql: """
                    INSERT INTO trip(name, destination, startDate, endDate, livingAccommodation) VALUES (?, ?, ?, ?, NULL)
                    """)
            let insertHistory = try db.cachedStatement(
                sql: """
                    INSERT INTO history(timestamp, author, entity, row, kind) VALUES (?, NULL, 1, ?, 1)
                    """)
            let timestamp = Int64(Date().timeIntervalSince1970 * 1_000_000)
            for offset in 0..<rowsPerSave {
                let trip = TripValues(index: first + offset)
                try insertTrip.execute(arguments: [
                    trip.name, trip.destination, trip.startDate.timeIntervalSinceReferenceDate,
                    trip.endDate.timeIntervalSinceReferenceDate,
                ])
                try insertHistory.execute(arguments: [timestamp, db.lastInsertedRowID])
            }
            self.rows += rowsPerSave
            self.saves += 1
        }
    }

    public var counters: [String: Double] {
        ["saves": Double(saves), "changes": Double(rows)]
    }

    /// Read once, at teardown: checkpoints the WAL and measures the file growth per row.
    public var facts: [String: String] {
        var facts = fixedFacts
        if let bytes = try? Self.checkpointedBytes(writer, path: path), rows > 0 {
            facts["rowsAtEnd"] = String(rows)
            facts["fileGrowthBytes"] = String(bytes - baselineBytes)
            facts["bytesPerRow"] = String(format: "%.1f", Double(bytes - baselineBytes) / Double(rows))
        }
        return facts
    }

    /// Database plus WAL file sizes after a TRUNCATE checkpoint.
    static func checkpointedBytes(_ writer: any DatabaseWriter, path: String) throws -> Int {
        try writer.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
        func size(_ path: String) -> Int {
            ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
        }
        return size(path) + size(path + "-wal")
    }

    public func close() throws {
        if let queue = writer as? DatabaseQueue { try queue.close() }
        if let pool = writer as? DatabasePool { try pool.close() }
    }
}
