import ArgumentParser
import Foundation
import LogStore
import LogStoreEngine

/// `logstore export <dir> [--history] [--output FILE] [--json]`: a store's models (and history)
/// as JSON lines, read-only.
struct ExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write a store's models (and, with --history, its transactions) as JSON lines.",
        discussion: """
            Read-only: takes no lock, changes nothing, runs beside a live writer (it exports the state \
            its log folds to when it starts). Needs no model types. One JSON object per line, each with \
            a "kind": first {"kind": "store", "format": 1, "storeID", "schemaVersion", "lastToken", \
            "schema"} (the schema the log stores), then one {"kind": "model", "entity", "id", "values"} \
            per model (entities in schema order, models in insertion order, values in AttributeValue's \
            typed JSON form), with --history one {"kind": "transaction", "transaction": {…}} per \
            retained transaction (as `logstore history` prints them), and last {"kind": "end", \
            "models", "transactions"}, so a reader knows the file is whole. `logstore import` reads it \
            back into a new store. Writes to standard output, or to --output FILE (then a summary is \
            printed, as JSON with --json). A store whose log is damaged is not exported (exit code 1); \
            a torn tail or an append in flight ends the export before it, with a warning.

            \(ToolExit.helpText)
            """
    )

    @OptionGroup var store: StoreOptions

    @Flag(help: "Also export the retained history transactions.")
    var history = false

    @Option(help: ArgumentHelp("Write to this file (created; it must not exist) instead of standard output.", valueName: "FILE"))
    var output: String?

    func run() throws {
        let directory = store.directory
        let progress = ProgressBar.start("export")
        defer { progress.finish() }
        let lines = try reportingFailures(directory: directory) {
            try Self.lines(directory: directory, history: history)
        }
        progress.finish()
        if let output {
            try reportingFailures {
                guard !FileManager.default.fileExists(atPath: output) else {
                    throw CommandFailure(message: "\(output) already exists; export writes only a new file.")
                }
                var data = Data()
                for line in lines.text { data.append(contentsOf: Array((line + "\n").utf8)) }
                do { try data.write(to: URL(fileURLWithPath: output), options: .withoutOverwriting) } catch {
                    throw CommandFailure(message: "Could not write \(output): \(error.localizedDescription).")
                }
            }
            let summary = ExportSummary(
                directory: directory, output: output, models: lines.models, transactions: lines.transactions)
            if store.json { try printJSON(summary) } else { print(summary.text) }
        } else {
            for line in lines.text { print(line) }
        }
    }

    /// The export's lines, with the counts of its end line.
    static func lines(directory: String, history: Bool) throws -> (text: [String], models: Int, transactions: Int) {
        let state = try LogStore.replay(directory: directory)
        if let tail = state.unreadTail {
            // A torn tail or an append in flight: the export is the prefix before it (a warning
            // says so). Damage: no export.
            if isDamage(directory: directory) {
                throw CommandFailure(
                    message: "The log of \(directory) is damaged at offset \(tail.offset) (\(tail.reason)), so an export "
                        + "would be cut short there; nothing was exported. `logstore verify \(directory)` lists the damage.",
                    exitCode: ToolExit.damage)
            }
            warnAboutUnreadTail(tail, directory: directory)
        }
        guard let schema = state.schema else {
            throw CommandFailure(message: ReplayCommand.noSchemaSentence(directory))
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        func line(_ value: some Encodable) throws -> String { String(decoding: try encoder.encode(value), as: UTF8.self) }
        var text = [
            try line(
                ExportLine(
                    kind: .store, format: ExportLine.formatVersion, storeID: state.storeIdentifier.uuidString,
                    schemaVersion: state.schemaVersion, lastToken: state.lastToken, schema: schema))
        ]
        var models = 0
        for entity in state.entities {
            for row in entity.rows {
                text.append(
                    try line(
                        ExportLine(
                            kind: .model, entity: entity.name, id: row.persistentIdentifier.primaryKey.uuidString,
                            values: row.values)))
                models += 1
            }
        }
        var transactions = 0
        if history {
            // Only the transactions the fold above saw: a save since then is not half in the export.
            let last = state.lastToken
            for transaction in try LogStore.fetchHistory(directory: directory, HistoryDescriptor()) {
                guard let last, transaction.token <= last else { break }
                text.append(try line(ExportLine(kind: .transaction, transaction: HistoryTransactionJSON(transaction))))
                transactions += 1
            }
        }
        text.append(try line(ExportLine(kind: .end, models: models, transactions: transactions)))
        return (text, models, transactions)
    }
}

/// One line of an export. `kind` says which fields it has.
struct ExportLine: Codable {
    /// The version of this JSON lines format.
    static let formatVersion = 1

    enum Kind: String, Codable {
        case store, model, transaction, end
    }

    var kind: Kind
    // store
    var format: Int?
    var storeID: String?
    var schemaVersion: UInt32?
    var lastToken: DefaultHistoryToken?
    var schema: Schema?
    // model
    var entity: String?
    var id: String?
    var values: [String: AttributeValue]?
    // transaction (written only; import skips these lines)
    var transaction: HistoryTransactionJSON?
    // end
    var models: Int?
    var transactions: Int?

    init(
        kind: Kind, format: Int? = nil, storeID: String? = nil, schemaVersion: UInt32? = nil,
        lastToken: DefaultHistoryToken? = nil, schema: Schema? = nil, entity: String? = nil, id: String? = nil,
        values: [String: AttributeValue]? = nil, transaction: HistoryTransactionJSON? = nil, models: Int? = nil,
        transactions: Int? = nil
    ) {
        self.kind = kind
        self.format = format
        self.storeID = storeID
        self.schemaVersion = schemaVersion
        self.lastToken = lastToken
        self.schema = schema
        self.entity = entity
        self.id = id
        self.values = values
        self.transaction = transaction
        self.models = models
        self.transactions = transactions
    }

    private enum CodingKeys: String, CodingKey {
        case kind, format, storeID, schemaVersion, lastToken, schema, entity, id, values, transaction, models,
            transactions
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        kind = try container.decode(Kind.self, forKey: .kind)
        format = try container.decodeIfPresent(Int.self, forKey: .format)
        storeID = try container.decodeIfPresent(String.self, forKey: .storeID)
        schemaVersion = try container.decodeIfPresent(UInt32.self, forKey: .schemaVersion)
        lastToken = try container.decodeIfPresent(DefaultHistoryToken.self, forKey: .lastToken)
        schema = try container.decodeIfPresent(Schema.self, forKey: .schema)
        entity = try container.decodeIfPresent(String.self, forKey: .entity)
        id = try container.decodeIfPresent(String.self, forKey: .id)
        values = try container.decodeIfPresent([String: AttributeValue].self, forKey: .values)
        transaction = nil  // not read back: import does not carry history over
        models = try container.decodeIfPresent(Int.self, forKey: .models)
        transactions = try container.decodeIfPresent(Int.self, forKey: .transactions)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(kind, forKey: .kind)
        try container.encodeIfPresent(format, forKey: .format)
        try container.encodeIfPresent(storeID, forKey: .storeID)
        try container.encodeIfPresent(schemaVersion, forKey: .schemaVersion)
        try container.encodeIfPresent(lastToken, forKey: .lastToken)
        try container.encodeIfPresent(schema, forKey: .schema)
        try container.encodeIfPresent(entity, forKey: .entity)
        try container.encodeIfPresent(id, forKey: .id)
        try container.encodeIfPresent(values, forKey: .values)
        try container.encodeIfPresent(transaction, forKey: .transaction)
        try container.encodeIfPresent(models, forKey: .models)
        try container.encodeIfPresent(transactions, forKey: .transactions)
    }
}

/// What `export --output` prints.
struct ExportSummary: Encodable {
    var directory: String
    var output: String
    var models: Int
    var transactions: Int

    var text: String {
        "Exported \(Format.grouped(models)) model\(models == 1 ? "" : "s")"
            + (transactions > 0 ? " and \(Format.grouped(transactions)) transaction\(transactions == 1 ? "" : "s")" : "")
            + " from \(directory) to \(output)."
    }
}
