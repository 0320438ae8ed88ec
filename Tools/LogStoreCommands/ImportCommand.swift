import ArgumentParser
import Foundation
import LogStore
import LogStoreEngine

/// `logstore import <dir> [--input FILE] [--json]`: an export's models into a new store.
struct ImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Create a new store from the JSON lines `logstore export` writes.",
        discussion: """
            Reads standard input, or --input FILE, checks every line first (the store line, the \
            models, the end line whose counts must match: a cut-short file is refused before anything \
            is written), then creates the store in a directory that does not exist or is empty, with \
            the exported schema, and saves the models keeping their primary keys: first their \
            attributes, then their relationships (so a model may refer to one later in the file), in \
            transactions of about a megabyte, author "import". The new store has its own UUID and \
            history; transaction lines (export --history) are counted and skipped. Replaying the new \
            store gives the exported models and values. If a save fails, the new directory is removed.

            \(ToolExit.helpText)
            """
    )

    @OptionGroup var store: StoreOptions

    @Option(help: ArgumentHelp("Read this file instead of standard input.", valueName: "FILE"))
    var input: String?

    func run() throws {
        let directory = store.directory
        let data = try reportingFailures { try Self.read(input) }
        let progress = ProgressBar.start("import")
        defer { progress.finish() }
        let report = try reportingFailures(directory: directory) {
            try Self.importLines(data, into: directory) { done, total in progress.update(done, total: total) }
        }
        progress.finish()
        if store.json { try printJSON(report) } else { print(report.text) }
    }

    static func read(_ input: String?) throws -> Data {
        guard let input else {
            guard isatty(STDIN_FILENO) == 0 else {
                throw CommandFailure(
                    message: "import reads an export from standard input, which is a terminal here: pipe one in "
                        + "(`logstore export <dir> | logstore import <new-dir>`) or give --input FILE.",
                    exitCode: ToolExit.usage)
            }
            return FileHandle.standardInput.readDataToEndOfFile()
        }
        guard let data = FileManager.default.contents(atPath: input) else {
            throw CommandFailure(message: "Cannot read \(input): no such file, or not readable.")
        }
        return data
    }

    /// What an import did.
    struct Report: Encodable, Equatable {
        var directory: String
        var storeID: String
        var exportedStoreID: String
        var models: Int
        var transactionsWritten: Int
        var skippedHistoryTransactions: Int

        var text: String {
            "Imported \(Format.grouped(models)) model\(models == 1 ? "" : "s") into the new store \(storeID) at "
                + "\(directory) (\(transactionsWritten) transaction\(transactionsWritten == 1 ? "" : "s"), author \"import\")."
                + (skippedHistoryTransactions > 0
                    ? " \(skippedHistoryTransactions) history transaction\(skippedHistoryTransactions == 1 ? "" : "s") "
                        + "in the input were skipped: a new store starts its own history." : "")
        }
    }

    /// Checks every line of `data`, then creates the store in `directory` and saves the models.
    static func importLines(
        _ data: Data, into directory: String, progress: (UInt64, UInt64) -> Void = { _, _ in }
    ) throws -> Report {
        let parsed = try parse(data)
        let manager = FileManager.default
        var isDirectory: ObjCBool = false
        let existed = manager.fileExists(atPath: directory, isDirectory: &isDirectory)
        if existed {
            guard isDirectory.boolValue else {
                throw CommandFailure(message: "\(directory) is a file; import creates a new store directory.")
            }
            guard (try manager.contentsOfDirectory(atPath: directory)).isEmpty else {
                throw CommandFailure(
                    message: "\(directory) is not empty; import creates a new store in a directory that does not "
                        + "exist or is empty.")
            }
        }
        do {
            return try save(parsed, into: directory, progress: progress)
        } catch {
            if existed {
                for name in (try? manager.contentsOfDirectory(atPath: directory)) ?? [] {
                    try? manager.removeItem(atPath: directory + "/" + name)
                }
            } else {
                try? manager.removeItem(atPath: directory)
            }
            throw error
        }
    }

    struct Parsed {
        var header: ExportLine
        var schema: Schema
        var models: [(entity: String, key: UUID, values: [String: AttributeValue], bytes: Int)]
        var skippedTransactions: Int
    }

    /// Every line decoded and checked; the first problem is one sentence naming its line.
    static func parse(_ data: Data) throws -> Parsed {
        let decoder = JSONDecoder()
        var header: ExportLine?
        var end: ExportLine?
        var models: [(entity: String, key: UUID, values: [String: AttributeValue], bytes: Int)] = []
        var keys = Set<String>()
        var skipped = 0
        var number = 0
        for slice in data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            number += 1
            if slice.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\r") }) { continue }
            func fail(_ text: String) -> CommandFailure {
                CommandFailure(message: "Line \(number) of the input \(text); nothing was imported.")
            }
            if end != nil { throw fail("follows the end line") }
            let line: ExportLine
            do { line = try decoder.decode(ExportLine.self, from: Data(slice)) } catch {
                throw fail("is not a line of `logstore export` (\(Self.reason(error)))")
            }
            switch line.kind {
            case .store:
                guard header == nil else { throw fail("is a second store line") }
                guard line.format == ExportLine.formatVersion else {
                    throw fail("is an export of format \(line.format.map(String.init) ?? "none"); this tool reads format \(ExportLine.formatVersion)")
                }
                guard line.schema != nil else { throw fail("is a store line without a schema") }
                header = line
            case .model:
                guard let schema = header?.schema else { throw fail("comes before the store line") }
                guard let entityName = line.entity, let entity = schema.entity(named: entityName) else {
                    throw fail("names an entity the exported schema does not have (\(line.entity ?? "none"))")
                }
                guard let id = line.id, let key = UUID(uuidString: id) else {
                    throw fail("has no model id (a UUID)")
                }
                guard keys.insert(entityName + "/" + id).inserted else { throw fail("repeats the model \(entityName)/\(id)") }
                let values = line.values ?? [:]
                for name in values.keys where entity.property(named: name) == nil {
                    throw fail("gives \(entityName) a property its schema does not have (\(name))")
                }
                models.append((entityName, key, values, slice.count))
            case .transaction:
                guard header != nil else { throw fail("comes before the store line") }
                skipped += 1
            case .end:
                guard header != nil else { throw fail("comes before the store line") }
                end = line
            }
        }
        guard let header, let schema = header.schema else {
            throw CommandFailure(message: "The input has no store line: it is not an export of `logstore export`.")
        }
        guard let end else {
            throw CommandFailure(
                message: "The input ends before its end line: the export is cut short (\(models.count) models read); "
                    + "nothing was imported.")
        }
        guard end.models == models.count, end.transactions == skipped else {
            throw CommandFailure(
                message: "The end line counts \(end.models ?? 0) models and \(end.transactions ?? 0) transactions, the "
                    + "input holds \(models.count) and \(skipped): lines are missing; nothing was imported.")
        }
        return Parsed(header: header, schema: schema, models: models, skippedTransactions: skipped)
    }

    private static func reason(_ error: any Error) -> String {
        switch error as? DecodingError {
        case .keyNotFound(let key, _)?: "no \"\(key.stringValue)\" key"
        case .typeMismatch(_, let context)?, .valueNotFound(_, let context)?, .dataCorrupted(let context)?:
            (context.codingPath.last.map { "\"\($0.stringValue)\": " } ?? "") + context.debugDescription
        default: "\(error)"
        }
    }

    /// About this many bytes of input per transaction.
    static let batchByteCount = 1 << 20

    private static func save(_ parsed: Parsed, into directory: String, progress: (UInt64, UInt64) -> Void) throws
        -> Report
    {
        let store = try LogStore(
            LogStoreConfiguration(schema: parsed.schema, directory: directory, durability: .none))
        var written = 0
        do {
            let storeID = store.identifier
            let remap = { (identifier: PersistentIdentifier) -> PersistentIdentifier? in
                try? PersistentIdentifier.identifier(
                    for: storeID, entityName: identifier.entityName, primaryKey: identifier.primaryKey)
            }
            let total = UInt64(parsed.models.reduce(0) { $0 + $1.bytes }) * 2
            var done: UInt64 = 0
            // Pass 1: attributes; relationships empty. Pass 2: relationships, as updates.
            for pass in 1...2 {
                var batch: [DefaultSnapshot] = []
                var batchBytes = 0
                func flush() throws {
                    guard !batch.isEmpty else { return }
                    let request =
                        pass == 1
                        ? DataStoreSaveChangesRequest(editingState: EditingState(author: "import"), inserted: batch)
                        : DataStoreSaveChangesRequest(editingState: EditingState(author: "import"), updated: batch)
                    if try store.save(request).token != nil { written += 1 }
                    batch = []
                    batchBytes = 0
                    progress(done, total)
                }
                for model in parsed.models {
                    let entity = parsed.schema.entity(named: model.entity)!
                    let identifier = try PersistentIdentifier.identifier(
                        for: storeID, entityName: model.entity, primaryKey: model.key)
                    var values: [String: AttributeValue] = [:]
                    for (name, value) in model.values {
                        let isRelationship = entity.relationship(named: name) != nil
                        if isRelationship == (pass == 2) { values[name] = value.mapReferences(remap) }
                    }
                    done += UInt64(model.bytes)
                    if pass == 2 && values.allSatisfy({ $0.value == .null || $0.value == .array([]) }) { continue }
                    batch.append(DefaultSnapshot(persistentIdentifier: identifier, values: values))
                    batchBytes += model.bytes
                    if batchBytes >= batchByteCount { try flush() }
                }
                try flush()
            }
            try store.close()
            return Report(
                directory: directory, storeID: storeID, exportedStoreID: parsed.header.storeID ?? "",
                models: parsed.models.count, transactionsWritten: written,
                skippedHistoryTransactions: parsed.skippedTransactions)
        } catch {
            try? store.close()
            throw error
        }
    }
}
