import Foundation
import LogStore
@testable import LogStorePostgres
import PostgresNIO
import Testing

/// The words, literally: after `logstore ship`, PostgreSQL's tables equal what the built
/// `logstore replay --json` prints and the change table equals what `logstore history --json`
/// prints — the executables' parsed output, not the library calls behind them. Checked after a
/// first ship, after more saves (updates and deletes by another author) and a second ship, and
/// after a schema addition (a new attribute and a new entity) and a third.
@Suite(.serialized, .enabled(if: PostgresServer.isAvailable,
                             "PostgreSQL server binaries are missing (apt-get install -y postgresql); CI is not set, so skipped"))
struct ShippedEqualsToolOutputTests {
    @Test func tablesEqualReplayJSONAndChangesEqualHistoryJSON() async throws {
        #expect(FileManager.default.isExecutableFile(atPath: ShipperKillTests.toolPath),
                "no logstore binary at \(ShipperKillTests.toolPath)")
        try await withPostgresServer { server in
            let directory = temporaryStoreDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            var workload = Workload(seed: 8)
            var store = try openStore(directory)
            try workload.save(50, to: store)
            try store.close()
            try server.shipWithTool(directory, expectedTransactions: 50)
            try await Self.checkAgainstTool(directory, server: server)

            // Save more (another author; updates, deletes with nullified references), ship again.
            store = try openStore(directory)
            try workload.save(40, to: store, author: "widget")
            try store.close()
            try server.shipWithTool(directory, expectedTransactions: 40)
            try await Self.checkAgainstTool(directory, server: server)

            // Schema version 2 mid-stream: Trip.country and the Review entity.
            store = try openStore(directory, schema: TestSchema.v2())
            workload.hasReviews = true
            try workload.save(30, to: store)
            try store.close()
            try server.shipWithTool(directory, expectedTransactions: 30)
            let replay = try await Self.checkAgainstTool(directory, server: server)
            #expect(replay.attributes["Trip"]?.contains("country") == true)
            #expect(replay.entities["Review"]?.isEmpty == false)
        }
    }

    /// Runs `logstore replay --json` and `logstore history --json` on `directory` and compares
    /// their parsed output with what PostgreSQL holds. Returns the replay output.
    @discardableResult
    static func checkAgainstTool(_ directory: String, server: PostgresServer,
                                 sourceLocation: SourceLocation = #_sourceLocation) async throws -> ReplayOutput {
        let replayRun = try ToolRun.run(["replay", directory, "--json"])
        #expect(replayRun.status == 0, "logstore replay exited \(replayRun.status): \(replayRun.stderr)", sourceLocation: sourceLocation)
        let replay = try JSONDecoder().decode(ReplayOutput.self, from: Data(replayRun.stdout.utf8))
        #expect(replay.cutShort == nil, sourceLocation: sourceLocation)

        let historyRun = try ToolRun.run(["history", directory, "--json"])
        #expect(historyRun.status == 0, "logstore history exited \(historyRun.status): \(historyRun.stderr)",
                sourceLocation: sourceLocation)
        let lines = historyRun.stdout.split(separator: "\n").filter { !$0.isEmpty }
        let history = try lines.map { try JSONDecoder().decode(HistoryLine.self, from: Data($0.utf8)) }
        #expect(!history.isEmpty, sourceLocation: sourceLocation)

        try await server.withConnection { connection in
            // The same entities: one mirror table per entity replay shows, with a column per attribute.
            var tables: [String: Set<String>] = [:]
            let columns = try await connection.query("""
                SELECT table_name::text, column_name::text FROM information_schema.columns
                WHERE table_schema = 'public' AND table_name NOT LIKE 'logstore\\_%'
                """, logger: testLogger)
            for try await (table, column) in columns.decode((String, String).self) { tables[table, default: []].insert(column) }
            #expect(Set(tables.keys) == Set(replay.attributes.keys), sourceLocation: sourceLocation)
            for (entity, attributes) in replay.attributes {
                #expect(Set(attributes + ["id"]) == tables[entity], "\(entity)'s columns", sourceLocation: sourceLocation)
            }
            // Row for row, value for value (PostgreSQL's equality on the typed columns).
            let entities = try replay.entities.sorted { $0.key < $1.key }.map { name, models in
                (name: name, rows: try models.map { model in
                    guard let key = UUID(uuidString: model.id) else { throw ServerError("replay printed the id \(model.id)") }
                    return (key, model.values)
                })
            }
            try await MirrorCheck.tablesEqual(entities, on: connection)
            // The change table, change for change, against history's lines.
            try await MirrorCheck.changesEqual(expectedRowsJSON: try changeRowsJSON(history), on: connection)
            // The token: replay's last transaction, history's last line and PostgreSQL's agree.
            let shipped = try await MirrorCheck.shippedToken(on: connection)
            #expect(shipped == replay.lastToken, sourceLocation: sourceLocation)
            #expect(shipped == history.last?.token, sourceLocation: sourceLocation)
            #expect(try await MirrorCheck.count("SELECT transactions FROM logstore_shipping", on: connection) == Int64(history.count),
                    sourceLocation: sourceLocation)
        }
        return replay
    }

    /// The change table's rows for `history`'s lines: one per change, columns as PostgresBatch
    /// writes them (the values in PostgresJSON's form, the attribute names sorted).
    static func changeRowsJSON(_ history: [HistoryLine]) throws -> String {
        var rows: [String] = []
        for transaction in history {
            guard UInt64(transaction.transactionIdentifier) == transaction.token.offset else {
                throw ServerError("history printed transactionIdentifier \(transaction.transactionIdentifier) for offset "
                    + "\(transaction.token.offset)")
            }
            for (index, change) in transaction.changes.enumerated() {
                let values = (change.kind == "delete" ? change.tombstone : change.values) ?? [:]
                var row = "{\"token_offset\":\(transaction.token.offset),\"change_index\":\(index),"
                row += "\"token\":\(transaction.token.jsonString),\"author\":"
                if let author = transaction.author { PostgresJSON.appendString(author, to: &row) } else { row += "null" }
                row += ",\"timestamp\":"
                PostgresJSON.appendString(transaction.timestamp, to: &row)
                row += ",\"process\":"
                PostgresJSON.appendString(transaction.processIdentifier, to: &row)
                row += ",\"kind\":"
                PostgresJSON.appendString(change.kind, to: &row)
                row += ",\"entity\":"
                PostgresJSON.appendString(change.entity, to: &row)
                row += ",\"key\":"
                PostgresJSON.appendString(change.id, to: &row)
                row += ",\"attributes\":["
                for (position, name) in values.keys.sorted().enumerated() {
                    if position > 0 { row += "," }
                    PostgresJSON.appendString(name, to: &row)
                }
                row += "],\"values\":"
                PostgresJSON.appendObject(values, to: &row)
                rows.append(row + "}")
            }
        }
        return "[" + rows.joined(separator: ",") + "]"
    }

    /// `logstore replay --json`, the parts compared.
    struct ReplayOutput: Decodable {
        struct Model: Decodable {
            var id: String
            var values: [String: AttributeValue]
        }
        struct CutShort: Decodable { var offset: UInt64 }
        var transactions: Int
        var lastToken: DefaultHistoryToken?
        var attributes: [String: [String]]
        var entities: [String: [Model]]
        var cutShort: CutShort?
    }

    /// One line of `logstore history --json`.
    struct HistoryLine: Decodable {
        struct Change: Decodable {
            var kind: String
            var entity: String
            var id: String
            var values: [String: AttributeValue]?
            var tombstone: [String: AttributeValue]?
        }
        var token: DefaultHistoryToken
        var transactionIdentifier: String
        var author: String?
        /// ISO 8601 with microseconds; PostgreSQL reads it into the timestamptz column.
        var timestamp: String
        var processIdentifier: String
        var changes: [Change]
    }
}

/// The built `logstore` executable run to its end, its output in files (no pipe fills up).
struct ToolRun {
    var status: Int32
    var stdout: String
    var stderr: String

    static func run(_ arguments: [String]) throws -> ToolRun {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("logstore-tool-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let out = scratch + "/stdout", err = scratch + "/stderr"
        _ = FileManager.default.createFile(atPath: out, contents: nil)
        _ = FileManager.default.createFile(atPath: err, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ShipperKillTests.toolPath)
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: out))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: err))
        try process.run()
        process.waitUntilExit()
        return ToolRun(status: process.terminationStatus,
                       stdout: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "",
                       stderr: (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
    }
}

extension PostgresServer {
    /// `logstore ship <directory> --postgres <this server> --json` to its end: exit code 0 and
    /// `expectedTransactions` shipped by this run.
    func shipWithTool(_ directory: String, expectedTransactions: Int,
                      sourceLocation: SourceLocation = #_sourceLocation) throws {
        let run = try ToolRun.run(["ship", directory, "--postgres", url, "--json"])
        #expect(run.status == 0, "logstore ship exited \(run.status): \(run.stderr)", sourceLocation: sourceLocation)
        struct Summary: Decodable { var transactions: Int }
        let summary = try JSONDecoder().decode(Summary.self, from: Data(run.stdout.utf8))
        #expect(summary.transactions == expectedTransactions, sourceLocation: sourceLocation)
    }
}
