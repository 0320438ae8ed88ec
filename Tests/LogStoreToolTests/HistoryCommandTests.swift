import ArgumentParser
import Foundation
import LogStore
import LogStoreEngine
import LogStoreTestSupport
import SampleTrips
import Testing

@testable import LogStoreCommands

/// A real store directory in the temporary directory, removed at the end of the test.
final class TemporaryStore {
    let temporary = TemporaryDirectory("tool")
    var directory: String { temporary.path }

    /// Opens the store with the SampleTrips models.
    func open(segmentByteCountMax: UInt64 = 64 * 1024 * 1024) throws -> (ModelContainer, LogStore) {
        let configuration = LogStoreConfiguration(
            directory: directory, durability: .synchronous,
            segmentByteCountMax: segmentByteCountMax)
        let container = try ModelContainer(for: sampleTripsModels, configuration: configuration)
        return (container, container.dataStore(as: LogStore.self)!)
    }

    /// Saves one trip per author (a fresh context each) and returns the tokens; the store is closed after.
    func saveTrips(
        _ authors: [String?], segmentByteCountMax: UInt64 = 64 * 1024 * 1024,
        before: ((LogStore) throws -> Void)? = nil
    ) throws -> [DefaultHistoryToken] {
        let (container, store) = try open(segmentByteCountMax: segmentByteCountMax)
        var tokens: [DefaultHistoryToken] = []
        for (number, author) in authors.enumerated() {
            let context = ModelContext(container)
            context.author = author
            context.insert(
                Trip(
                    name: "trip \(number) \(UUID())", destination: "place \(number)",
                    startDate: Date(timeIntervalSince1970: Double(number) * 86_400),
                    endDate: Date(timeIntervalSince1970: Double(number + 2) * 86_400)))
            try context.save()
            tokens.append(try #require(store.currentToken))
        }
        try before?(store)
        try store.close()
        return tokens
    }
}

/// The exit code ArgumentParser gives a command line (64 for usage errors), or nil when it parses.
func usageExitCode(_ arguments: [String]) -> Int32? {
    do {
        _ = try LogStoreCommand.parseAsRoot(arguments)
        return nil
    } catch {
        return LogStoreCommand.exitCode(for: error).rawValue
    }
}

/// `logstore history`: positions (JSON token, bare offset), author, limit, expiry, bad positions.
@Suite struct HistoryCommandTests {
    @Test func afterAJSONTokenListsTheLaterTransactionsAsJSONLines() throws {
        let store = TemporaryStore()
        let tokens = try store.saveTrips(["app", "widget", nil, "app"])
        let json = tokens[1].json
        #expect(
            json
                == #"{"v":1,"store":"\#(tokens[1].storeIdentifier.uuidString)","offset":"\#(tokens[1].offset)","check":\#(tokens[1].check)}"#
        )
        let command = try #require(
            try LogStoreCommand.parseAsRoot(["history", store.directory, "--after", json]) as? HistoryCommand)
        #expect(command.after == .token(tokens[1]))
        let transactions = try HistoryCommand.fetch(
            directory: store.directory, after: command.after, author: nil, limit: nil)
        #expect(transactions.map(\.token) == [tokens[2], tokens[3]])

        let lines = try HistoryCommand.jsonLines(transactions)
        #expect(lines.count == 2)
        let first = try #require(try JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Any])
        #expect(first["author"] is NSNull)
        #expect(first["transactionIdentifier"] as? String == String(tokens[2].offset))
        let token = try JSONDecoder().decode(
            DefaultHistoryToken.self,
            from: JSONSerialization.data(withJSONObject: try #require(first["token"])))
        #expect(token == tokens[2])
        let timestamp = try #require(first["timestamp"] as? String)
        #expect(timestamp.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z/) != nil)
        #expect(
            abs(
                try #require(try? Date(timestamp, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
                    .timeIntervalSince(transactions[0].timestamp)) < 0.001)
        #expect(first["processIdentifier"] as? String == LogStore.processIdentifier)
        let changes = try #require(first["changes"] as? [[String: Any]])
        #expect(changes.count == 1)
        #expect(changes[0]["kind"] as? String == "insert")
        #expect(changes[0]["entity"] as? String == "Trip")
        #expect(
            changes[0]["id"] as? String == transactions[0].changes[0].changedPersistentIdentifier.primaryKey.uuidString)
        let values = try #require(changes[0]["values"] as? [String: Any])
        #expect((values["destination"] as? [String: Any])?["string"] as? String == "place 2")
        #expect(changes[0]["tombstone"] == nil)
    }

    @Test func aBareOffsetMustStartATransaction() throws {
        let store = TemporaryStore()
        let tokens = try store.saveTrips(["app", "widget", "app"])
        #expect(try HistoryPosition.parse(" \(tokens[0].offset) ") == .offset(tokens[0].offset))
        #expect(try HistoryPosition.offset(tokens[1].offset).resolve(in: store.directory) == tokens[1])
        let transactions = try HistoryCommand.fetch(
            directory: store.directory, after: .offset(tokens[0].offset),
            author: nil, limit: nil)
        #expect(transactions.map(\.token) == [tokens[1], tokens[2]])

        // Inside the first transaction record: refused, naming the next transaction.
        #expect(
            throws: CommandFailure(
                message: "Offset \(tokens[0].offset + 1) is not the start of a transaction record in "
                    + "\(store.directory); the next transaction starts at offset \(tokens[1].offset) (`logstore history "
                    + "\(store.directory)` lists each transaction's token).")
        ) {
            try HistoryCommand.fetch(
                directory: store.directory, after: .offset(tokens[0].offset + 1), author: nil, limit: nil)
        }
        // Offset 0 is the schema record, not a transaction.
        #expect(throws: CommandFailure.self) { try HistoryPosition.offset(0).resolve(in: store.directory) }
        let end = try Log.inspect(directory: store.directory).endOffset
        #expect(
            throws: CommandFailure(
                message: "Offset \(end) is not in the log of \(store.directory), which ends at offset \(end).")
        ) {
            try HistoryPosition.offset(end).resolve(in: store.directory)
        }
    }

    @Test func authorAndLimitFilter() throws {
        let store = TemporaryStore()
        let tokens = try store.saveTrips(["app", "widget", nil, "widget", "Widget", "widget"])
        let byWidget = try HistoryCommand.fetch(directory: store.directory, after: nil, author: "widget", limit: nil)
        #expect(byWidget.map(\.token) == [tokens[1], tokens[3], tokens[5]])
        let afterAndWidget = try HistoryCommand.fetch(
            directory: store.directory, after: .token(tokens[1]),
            author: "widget", limit: nil)
        #expect(afterAndWidget.map(\.token) == [tokens[3], tokens[5]])
        let limited = try HistoryCommand.fetch(
            directory: store.directory, after: .token(tokens[0]), author: nil, limit: 2)
        #expect(limited.map(\.token) == [tokens[1], tokens[2]])
        #expect(try HistoryCommand.fetch(directory: store.directory, after: nil, author: "widget", limit: 0).isEmpty)

        // The listing: one line per transaction, the changes under it, the last token to continue after.
        let text = HistoryCommand.text(byWidget, directory: store.directory, after: nil, author: "widget")
        #expect(text.count == 7)
        #expect(text[0].hasPrefix("token@\(tokens[1].offset)  ") && text[0].contains("  widget  1 change  "))
        #expect(text[1].hasPrefix("    insert  Trip/") && text[1].contains("destination=place 1"))
        #expect(text.last == "3 transactions; the last one's token: \(tokens[5].json)")
        #expect(
            HistoryCommand.text([], directory: "/s", after: .offset(7), author: "x")
                == ["No history transactions after offset 7 by x in /s."])
        #expect(try HistoryCommand.jsonLines([]).isEmpty)
        #expect(usageExitCode(["history", store.directory, "--limit", "-1"]) == 64)
    }

    @Test func anExpiredPositionNamesTheResumeToken() throws {
        let store = TemporaryStore()
        let tokens = try store.saveTrips(["app", "widget", "app", "widget"]) { store in
            let third = try store.fetchHistory(HistoryDescriptor())[2].token
            _ = try store.deleteHistory(HistoryDescriptor(predicate: #Predicate { $0.token <= third }), force: false)
        }
        // deleteHistory went through the third save: L = tokens[2].
        #expect(try LogStore.historyLowWaterMark(directory: store.directory) == tokens[2])
        let expected = CommandFailure(
            message: "History up to \(tokens[0].json) has been deleted (historyTokenExpired): the "
                + "store keeps the transactions after \(tokens[2].json); resume with `logstore history \(store.directory) "
                + "--after '\(tokens[2].json)'` (the changes in between are gone).")
        #expect(throws: expected) {
            try HistoryCommand.fetch(directory: store.directory, after: .token(tokens[0]), author: nil, limit: nil)
        }
        // A bare offset below L expires the same way; L itself and anything without --after work.
        #expect(throws: CommandFailure.self) {
            try HistoryCommand.fetch(
                directory: store.directory, after: .offset(tokens[1].offset), author: nil, limit: nil)
        }
        #expect(
            try HistoryCommand.fetch(
                directory: store.directory, after: .offset(tokens[2].offset), author: nil,
                limit: nil
            ).map(\.token) == [tokens[3]])
        #expect(
            try HistoryCommand.fetch(directory: store.directory, after: nil, author: nil, limit: nil).map(\.token)
                == [tokens[3]])
        // Through the command: exit code 2.
        let command = try #require(
            try LogStoreCommand.parseAsRoot([
                "history", store.directory, "--after", tokens[0].json,
                "--json",
            ]) as? HistoryCommand)
        #expect(throws: ExitCode(2)) { try command.run() }
    }

    @Test func aBadPositionIsAUsageError() throws {
        let store = TemporaryStore()
        let tokens = try store.saveTrips(["app"])
        #expect(usageExitCode(["history", store.directory, "--after", "twelve"]) == 64)
        #expect(
            usageExitCode(["history", store.directory, "--after", #"{"v":1,"store":"x","offset":"1","check":2}"#]) == 64
        )
        #expect(
            usageExitCode([
                "history", store.directory, "--after", #"{"v":2,"store":"\#(UUID())","offset":"1","check":2}"#,
            ]) == 64)
        #expect(usageExitCode(["history", store.directory, "--after", #"{"v":1,"offset":"1","check":2}"#]) == 64)
        #expect(usageExitCode(["history", store.directory, "--after", tokens[0].json]) == nil)
        do {
            _ = try HistoryPosition.parse(#"{"v":1,"offset":"1","check":2}"#)
            Issue.record("parsed a token without a store")
        } catch {
            #expect("\(error)".contains(#"no "store" key"#))
        }
        // A well-formed token whose check does not match: the library's historyTokenInvalid, exit code 2.
        var wrong = tokens[0]
        wrong.check &+= 1
        #expect(throws: LogStoreError.self) {
            try HistoryCommand.fetch(directory: store.directory, after: .token(wrong), author: nil, limit: nil)
        }
        let command = try #require(
            try LogStoreCommand.parseAsRoot(["history", store.directory, "--after", wrong.json])
                as? HistoryCommand)
        #expect(throws: ExitCode(2)) { try command.run() }
    }
}
