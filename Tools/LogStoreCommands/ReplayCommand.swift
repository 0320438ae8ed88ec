import ArgumentParser
import Foundation
import LogStore
import LogStoreEngine

/// `logstore replay <dir> [--until <position>] [--json]`: the models a store's log folds to, now
/// or (time travel) right after the transaction at a position.
struct ReplayCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Fold a model store's log and print its models: a table per entity, or JSON.",
        discussion: """
            Needs no model types: entities and attributes come from the schema records in the log. \
            Opens the store read-only: takes no lock, changes nothing, runs beside a live writer. \
            Prints tables on a terminal and JSON otherwise (or with --json): \
            {"store", "storeID", "schemaVersion", "transactions", "lastToken", "attributes", \
            "entities": {"<Entity>": [{"id": "<primary key>", "values": {"<attribute>": <value>}}]}}, \
            models in insertion order, each value in its typed JSON form ({"string": "Lisbon"}, \
            {"date": <seconds since 2001>}, {"reference": {…}}, {"array": […]}, {"null": true}).

            --until <position> shows the models exactly as they were right after the transaction \
            at that position (inclusive), folding from the newest checkpoint at or before it. The \
            position is a history token's JSON form {"v":1,"store":"<UUID>","offset":"<decimal>","check":<u32>} \
            (its store and check are verified) or a bare log offset; it must start a transaction \
            record within the log, else the command says why and exits with code 2. --entity NAME \
            shows only that entity.

            When the log cannot be read to its end (a torn tail, an append in flight, damage), the \
            state shown stops there: a warning says so on standard error and the JSON has \
            "cutShort": {"offset", "byteCount", "file", "reason"} (null when the whole log was read).

            \(ToolExit.helpText)
            """
    )

    @OptionGroup var store: StoreOptions

    @Option(
        help: ArgumentHelp(
            "Show the models right after the transaction at this position (inclusive): "
                + "a history token's JSON form or a bare log offset.", valueName: "position"))
    var until: String?

    @Option(help: ArgumentHelp("Show only this entity's models.", valueName: "NAME"))
    var entity: String?

    func run() throws {
        let directory = store.directory
        let progress = ProgressBar.start("replay")
        defer { progress.finish() }
        var state = try reportingErrors(directory: directory) { try Self.state(directory: directory, until: until) }
        progress.finish()
        guard state.schemaVersion != nil else {
            printError("logstore: " + Self.noSchemaSentence(directory))
            throw storeErrorExitCode
        }
        if let entity {
            state = try reportingFailures { try Self.only(entity, in: state) }
        }
        if store.printsJSON(whenPiped: true) {
            try printJSON(ReplayJSON(state))
        } else {
            print(Self.text(state))
            if state.unreadTail != nil {
                print("CUT SHORT: the log could not be read to its end; the models above are those before offset "
                    + "\(state.unreadTail!.offset).")
            }
        }
        try finishRead(unreadTail: state.unreadTail, directory: directory)
    }

    /// `state` with only the entity `name`; a usage error naming the entities when it has none.
    static func only(_ name: String, in state: StoreState) throws -> StoreState {
        guard let entity = state.entity(named: name) else {
            throw CommandFailure(
                message: "The store has no entity \(name); its entities are "
                    + state.entities.map(\.name).joined(separator: ", ") + ".",
                exitCode: ToolExit.usage)
        }
        var only = state
        only.entities = [entity]
        return only
    }

    /// What the command shows: the whole log folded, or the state as of `--until`.
    static func state(directory: String, until: String?, fileSystem: any FileSystem = PosixFileSystem()) throws
        -> StoreState
    {
        guard let until else { return try LogStore.replay(directory: directory, fileSystem: fileSystem) }
        guard let position = HistoryPosition(parsing: until) else {
            throw CommandFailure(
                message: "--until takes a history token's JSON form "
                    + #"({"v":1,"store":"<UUID>","offset":"<decimal>","check":<u32>}) or a bare log offset, not \#(until)."#,
                exitCode: ToolExit.usage)
        }
        return try LogStore.replay(directory: directory, fileSystem: fileSystem, until: position)
    }

    /// Why a store without a schema record has no models, in one sentence.
    static func noSchemaSentence(_ directory: String) -> String {
        let recordCount = (try? Log.inspect(directory: directory))?.recordCount ?? 0
        if recordCount == 0 {
            return "The store at \(directory) holds no records yet, so no models: a model store gets its schema "
                + "record when a ModelContainer first opens it."
        }
        return "The store at \(directory) is not a model store: its \(Format.grouped(recordCount)) record"
            + (recordCount == 1 ? "" : "s") + " include no schema record (it was written through the byte-level "
            + "Log API, as `logstore demo` did before it became a model tour), so there are no models to replay; "
            + "`logstore inspect \(directory)` shows its records."
    }

    static func text(_ state: StoreState) -> String {
        var lines = [
            "Store         \(state.directory) (\(state.storeIdentifier))",
            "Transactions  \(Format.grouped(state.transactionCount))"
                + (state.checkpointOffset.map { " after the checkpoint at log offset \(Format.grouped($0))" } ?? "")
                + (state.lastToken.map { ", the last at log offset \(Format.grouped($0.offset))" } ?? ""),
            "Schema        version \(state.schemaVersion ?? 0), \(state.entities.count) entit"
                + (state.entities.count == 1 ? "y" : "ies"),
        ]
        for entity in state.entities {
            let count = entity.rows.count
            lines.append("")
            lines.append("\(entity.name): \(Format.grouped(count)) model\(count == 1 ? "" : "s")")
            guard count > 0 else { continue }
            var rows = [["id"] + entity.attributeNames]
            for row in entity.rows {
                rows.append(
                    [ReplayText.shortID(row.persistentIdentifier.primaryKey)]
                        + entity.attributeNames.map { row.values[$0].map(ReplayText.cell) ?? "-" })
            }
            lines.append(ReplayText.table(rows, indent: "  "))
        }
        return lines.joined(separator: "\n")
    }
}

/// How `replay` shows values in its tables.
enum ReplayText {
    static let stringLengthMax = 32
    static let cellLengthMax = 64

    /// The first 8 hex digits of a primary key: `1A2B3C4D…`.
    static func shortID(_ primaryKey: UUID) -> String {
        String(primaryKey.uuidString.prefix(8)) + "…"
    }

    static func cell(_ value: AttributeValue) -> String {
        truncated(text(value), to: cellLengthMax)
    }

    static func text(_ value: AttributeValue) -> String {
        switch value {
        case .null: return "nil"
        case .bool(let value): return String(value)
        case .int(let value): return String(value)
        case .double(let value): return String(value)
        case .string(let value):
            let oneLine = value.replacingOccurrences(of: "\n", with: "⏎").replacingOccurrences(of: "\t", with: " ")
            return truncated(oneLine, to: stringLengthMax)
        case .data(let value): return "<\(Format.grouped(value.count)) bytes>"
        case .date(let value): return date(value)
        case .uuid(let value): return value.uuidString
        case .reference(let identifier): return "→\(identifier.entityName)/\(shortID(identifier.primaryKey))"
        case .array(let values):
            let identifiers = values.compactMap { value -> PersistentIdentifier? in
                if case .reference(let identifier) = value { identifier } else { nil }
            }
            // A to-many relationship: the entity once, then the short keys.
            if !values.isEmpty, identifiers.count == values.count,
                let entity = identifiers.first?.entityName, identifiers.allSatisfy({ $0.entityName == entity })
            {
                return "→\(entity) ×\(identifiers.count): "
                    + identifiers.map { shortID($0.primaryKey) }.joined(separator: ", ")
            }
            return "[" + values.map(text).joined(separator: ", ") + "]"
        }
    }

    /// ISO 8601 in UTC: the day alone at midnight, else to the second (with milliseconds when it has them).
    static func date(_ date: Date) -> String {
        let seconds = date.timeIntervalSince1970
        if seconds.truncatingRemainder(dividingBy: 86_400) == 0 {
            return date.formatted(Date.ISO8601FormatStyle().year().month().day())
        }
        if seconds.rounded(.down) == seconds {
            return date.formatted(.iso8601)
        }
        return date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }

    static func truncated(_ text: String, to length: Int) -> String {
        text.count <= length ? text : String(text.prefix(length - 1)) + "…"
    }

    /// Left-aligned columns under a header row.
    static func table(_ rows: [[String]], indent: String) -> String {
        guard let columnCount = rows.map(\.count).max() else { return "" }
        let widths = (0..<columnCount).map { column in rows.map { column < $0.count ? $0[column].count : 0 }.max() ?? 0
        }
        return rows.map { row in
            indent
                + row.enumerated().map { column, cell in
                    column == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[column] - cell.count)
                }.joined(separator: "  ")
        }.joined(separator: "\n")
    }
}

/// The JSON form of a ``StoreState``: entities by name, each a list of models in insertion order.
struct ReplayJSON: Encodable {
    struct Model: Encodable {
        /// The primary key (a reference's `primaryKey`).
        var id: String
        var values: [String: AttributeValue]
    }

    var store: String
    var storeID: String
    var schemaVersion: UInt32?
    var transactions: Int
    var lastToken: DefaultHistoryToken?
    /// The checkpoint the fold started from (time travel), if any.
    var checkpoint: String?
    /// Attribute names per entity, in the stored schema's order.
    var attributes: [String: [String]]
    var entities: [String: [Model]]
    /// Where the fold stopped before the log's end, or null when it read the whole log.
    var cutShort: CutShortJSON?

    private enum CodingKeys: String, CodingKey {
        case store, storeID, schemaVersion, transactions, lastToken, checkpoint, attributes, entities, cutShort
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(store, forKey: .store)
        try container.encode(storeID, forKey: .storeID)
        try container.encode(schemaVersion, forKey: .schemaVersion)
        try container.encode(transactions, forKey: .transactions)
        try container.encode(lastToken, forKey: .lastToken)
        try container.encode(checkpoint, forKey: .checkpoint)
        try container.encode(attributes, forKey: .attributes)
        try container.encode(entities, forKey: .entities)
        try container.encode(cutShort, forKey: .cutShort)  // null: the whole log was read
    }

    init(_ state: StoreState) {
        cutShort = CutShortJSON(state.unreadTail)
        store = state.directory
        storeID = state.storeIdentifier.uuidString
        schemaVersion = state.schemaVersion
        transactions = state.transactionCount
        lastToken = state.lastToken
        checkpoint = state.checkpointOffset.map(String.init)
        attributes = Dictionary(uniqueKeysWithValues: state.entities.map { ($0.name, $0.attributeNames) })
        entities = Dictionary(
            uniqueKeysWithValues: state.entities.map { entity in
                (
                    entity.name,
                    entity.rows.map { Model(id: $0.persistentIdentifier.primaryKey.uuidString, values: $0.values) }
                )
            })
    }
}
