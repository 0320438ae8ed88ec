import ArgumentParser
import Foundation
import LogStore
import LogStoreEngine

/// `logstore history <dir> [--after POS] [--author NAME] [--limit N] [--json]`: a store's history,
/// read without the lock.
struct HistoryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history",
        abstract: "List a store's history transactions and their changes, oldest first.",
        discussion: """
            Read-only: takes no lock, changes nothing, runs beside a live writer; needs no model types. \
            POS is a history token's JSON form {"v":1,"store":"<UUID>","offset":"<decimal>","check":<u32>} \
            or a bare log offset where a transaction record starts; --after lists the transactions after \
            it (token > POS). Prints a listing on a terminal and JSON lines otherwise (or with --json): \
            one object per transaction, {"token", "transactionIdentifier", "author", "timestamp", \
            "processIdentifier", "changes": [{"kind", "entity", "id", "values" | "tombstone"}]}, values \
            in AttributeValue's typed JSON form. A position in deleted history fails (exit code 2) with \
            the token to resume after. When the log cannot be read to its end the listing says so (as JSON, \
            a last line {"cutShort": {"offset", "byteCount", "file", "reason"}}); exit code 1 when that is damage.

            --follow keeps running after the last transaction and prints each new one as any \
            process saves it, like `tail -f`: it polls the log's end about every 100 ms (the live \
            tail of an open store sees only its own process's saves; this reads the files). It stops \
            after --limit transactions, or on Ctrl-C. If history deletion passes its position while \
            it follows, it says so on standard error and goes on after the new low-water mark.

            \(ToolExit.helpText)
            """
    )

    @OptionGroup var store: StoreOptions

    @Option(
        help: ArgumentHelp("List the transactions after this position (token > POS).", valueName: "POS"),
        transform: HistoryPosition.parse)
    var after: HistoryPosition?

    @Option(help: "List only the transactions saved by this author.")
    var author: String?

    @Option(help: "List at most this many transactions.")
    var limit: Int?

    @Flag(help: "Keep running and print new transactions as any process saves them (stops after --limit).")
    var follow = false

    func validate() throws {
        if let limit, limit < 0 { throw ValidationError("--limit must be 0 or more, not \(limit).") }
    }

    func run() throws {
        let directory = store.directory
        let asJSON = store.printsJSON(whenPiped: true)
        if follow {
            try reportingFailures(directory: directory) {
                try Self.follow(directory: directory, after: after, author: author, limit: limit) { transaction in
                    let lines = try asJSON ? Self.jsonLines([transaction]) : Self.textLines(transaction)
                    for line in lines { print(line) }
                    fflush(nil)
                    return true
                }
            }
            return
        }
        let transactions = try reportingFailures(directory: directory) {
            try Self.fetch(directory: directory, after: after, author: author, limit: limit)
        }
        let lines =
            asJSON
            ? try reportingFailures { try Self.jsonLines(transactions) }
            : Self.text(transactions, directory: directory, after: after, author: author)
        for line in lines { print(line) }
        // Read again after the listing: bytes the read stopped at are in the files' tail still.
        let tail = (try? Log.openReadOnly(directory: directory)).flatMap { log in
            defer { try? log.close() }
            return log.recoveryReport.unreadTail
        }
        if let tail {
            print(
                asJSON
                    ? try jsonText(CutShortLine(cutShort: CutShortJSON(tail)!), pretty: false)
                    : "CUT SHORT: the log could not be read past offset \(tail.offset); later transactions are not listed.")
        }
        try finishRead(unreadTail: tail, directory: directory)
    }

    /// How long `--follow` waits before looking at the log's end again.
    static let followInterval: Duration = .milliseconds(100)

    /// The transactions after `after` (by `author`), then each new one as any process saves it:
    /// polls the files every ``followInterval``. Stops after `limit` transactions, or when `emit`
    /// returns `false`. History deleted past its position: a warning, then on after L.
    static func follow(
        directory: String, after: HistoryPosition?, author: String?, limit: Int?,
        emit: (DefaultHistoryTransaction) throws -> Bool
    ) throws {
        var last: HistoryPosition? = after
        var emitted = 0
        if limit == 0 { return }
        while true {
            let batch: [DefaultHistoryTransaction]
            do {
                // The author is tested here, not in the predicate, so the position moves past
                // every transaction read, matching or not.
                batch = try fetch(directory: directory, after: last, author: nil, limit: nil, allExpiry: true)
            } catch let error as LogStoreError where error.code == .historyTokenExpired {
                let resume = error.resumeToken!
                printError(
                    "logstore: warning: history up to \(last?.text ?? "the start") was deleted while following; going on "
                        + "after \(resume.json) (the transactions in between are gone).")
                last = .token(resume)
                continue
            }
            for transaction in batch {
                last = .token(transaction.token)
                if let author, transaction.author != author { continue }
                guard try emit(transaction) else { return }
                emitted += 1
                if let limit, emitted >= limit { return }
            }
            if batch.isEmpty { Thread.sleep(forTimeInterval: Format.seconds(followInterval)) }
        }
    }

    /// The transactions the options select, read-only. A position in deleted history becomes a
    /// ``CommandFailure`` naming the resume token.
    static func fetch(
        directory: String, after: HistoryPosition?, author: String?, limit: Int?, allExpiry: Bool = false
    ) throws -> [DefaultHistoryTransaction] {
        do {
            var descriptor = HistoryDescriptor<DefaultHistoryTransaction>()
            switch (try after?.resolve(in: directory), author) {
            case (nil, nil): break
            case (let token?, nil): descriptor.predicate = #Predicate { $0.token > token }
            case (nil, let name?): descriptor.predicate = #Predicate { $0.author == name }
            case (let token?, let name?): descriptor.predicate = #Predicate { $0.token > token && $0.author == name }
            }
            descriptor.fetchLimit = limit
            return try LogStore.fetchHistory(directory: directory, descriptor)
        } catch let error as LogStoreError where error.code == .historyTokenExpired && !allExpiry {
            throw CommandFailure(
                message: expiredSentence(
                    directory: directory, position: after,
                    resumeToken: error.resumeToken!))
        }
    }

    /// What `historyTokenExpired` means here and how to resume, in one sentence.
    static func expiredSentence(directory: String, position: HistoryPosition?, resumeToken: DefaultHistoryToken) -> String {
        "History up to \(position?.text ?? "that position") has been deleted (historyTokenExpired): the store keeps the "
            + "transactions after \(resumeToken.json); resume with `logstore history \(directory) --after "
            + "'\(resumeToken.json)'` (the changes in between are gone)."
    }

    // MARK: Output

    /// One JSON object per transaction, each on one line.
    static func jsonLines(_ transactions: [DefaultHistoryTransaction]) throws -> [String] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try transactions.map { String(decoding: try encoder.encode(HistoryTransactionJSON($0)), as: UTF8.self) }
    }

    /// A readable listing: one line per transaction, one indented line per change, and the token
    /// to continue after.
    static func text(
        _ transactions: [DefaultHistoryTransaction], directory: String, after: HistoryPosition?,
        author: String?
    ) -> [String] {
        guard let last = transactions.last else {
            var scope = ""
            if let after { scope += " after \(after.text)" }
            if let author { scope += " by \(author)" }
            return ["No history transactions\(scope) in \(directory)."]
        }
        var lines: [String] = []
        for transaction in transactions { lines += textLines(transaction) }
        lines.append(
            "\(transactions.count) transaction\(transactions.count == 1 ? "" : "s"); the last one's token: "
                + last.token.json)
        return lines
    }

    /// One transaction: a line for it, an indented line per change.
    static func textLines(_ transaction: DefaultHistoryTransaction) -> [String] {
        var lines: [String] = []
        let count = transaction.changes.count
        lines.append(
            "token@\(transaction.transactionIdentifier)  \(iso8601Microseconds(transaction.timestamp))  "
                + "\(transaction.author ?? "(no author)")  \(count) change\(count == 1 ? "" : "s")  "
                + "process \(transaction.processIdentifier)")
        var rows: [[String]] = []
        for change in transaction.changes {
            let identifier = change.changedPersistentIdentifier
            let (kind, values): (String, [String: AttributeValue]) =
                switch change {
                case .insert(let insert): ("insert", insert.values)
                case .update(let update): ("update", update.values)
                case .delete(let delete): ("delete", delete.tombstoneValues)
                }
            let shown = values.sorted { $0.key < $1.key }.map { "\($0.key)=\(ReplayText.cell($0.value))" }
            rows.append([
                kind, "\(identifier.entityName)/\(ReplayText.shortID(identifier.primaryKey))",
                shown.joined(separator: ", "),
            ])
        }
        if !rows.isEmpty { lines.append(ReplayText.table(rows, indent: "    ")) }
        return lines
    }
}

/// The JSON form of one history transaction (`logstore history`, one per line).
struct HistoryTransactionJSON: Encodable {
    struct Change: Encodable {
        /// `insert`, `update` or `delete`.
        var kind: String
        var entity: String
        /// The primary key.
        var id: String
        /// Inserts: every value; updates: the changed ones.
        var values: [String: AttributeValue]?
        /// Deletes: the preserved values.
        var tombstone: [String: AttributeValue]?

        init(_ change: HistoryChange) {
            let identifier = change.changedPersistentIdentifier
            entity = identifier.entityName
            id = identifier.primaryKey.uuidString
            switch change {
            case .insert(let insert): (kind, values) = ("insert", insert.values)
            case .update(let update): (kind, values) = ("update", update.values)
            case .delete(let delete): (kind, tombstone) = ("delete", delete.tombstoneValues)
            }
        }
    }

    var token: DefaultHistoryToken
    /// The token's offset, as a decimal string like the token's.
    var transactionIdentifier: String
    var author: String?
    /// ISO 8601 in UTC with microseconds.
    var timestamp: String
    var processIdentifier: String
    var changes: [Change]

    init(_ transaction: DefaultHistoryTransaction) {
        token = transaction.token
        transactionIdentifier = String(transaction.transactionIdentifier)
        author = transaction.author
        timestamp = iso8601Microseconds(transaction.timestamp)
        processIdentifier = transaction.processIdentifier
        changes = transaction.changes.map(Change.init)
    }

    private enum CodingKeys: String, CodingKey {
        case token, transactionIdentifier, author, timestamp, processIdentifier, changes
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(token, forKey: .token)
        try container.encode(transactionIdentifier, forKey: .transactionIdentifier)
        try container.encode(author, forKey: .author)  // null when the save had no author
        try container.encode(timestamp, forKey: .timestamp)
        try container.encode(processIdentifier, forKey: .processIdentifier)
        try container.encode(changes, forKey: .changes)
    }
}
