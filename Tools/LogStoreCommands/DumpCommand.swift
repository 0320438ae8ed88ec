import ArgumentParser
import Foundation
import LogStore
import LogStoreEngine

/// `logstore dump <dir> [--from OFFSET] [--limit N] [--json]`: every record as stored, with the
/// model layer's payloads decoded, for debugging the format.
struct DumpCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dump",
        abstract: "Print a store's raw records, oldest first, with transactions, schemas and bookmarks decoded.",
        discussion: """
            Read-only: takes no lock, changes nothing, runs beside a live writer. For each record: its \
            offset, type, size on disk, payload size, whether it is LZ4-compressed, its payload CRC \
            and the durable end it states (format version 2); then what the payload holds — a \
            transaction's author, time, process and changes (decoded with the newest schema table), a \
            schema record's entities, a bookmark's consumer and token, a data record's first bytes. \
            Durable-end marks are included. With --json (or when standard output is not a terminal), \
            one JSON object per record: {"offset", "endOffset", "type", "recordBytes", "payloadBytes", \
            "compressed", "payloadCRC", "statedDurableEnd", and "transaction" | "schema" | "bookmark" | \
            "dataPrefix" | "decodingFailure"}. Records are read up to the log's visible end; when bytes \
            after the last one cannot be read the output says it is cut short.

            \(ToolExit.helpText)
            """
    )

    @OptionGroup var store: StoreOptions

    @Option(help: ArgumentHelp("Start at the first record at or after this log offset.", valueName: "OFFSET"))
    var from: UInt64?

    @Option(help: "Print at most this many records.")
    var limit: Int?

    func validate() throws {
        if let limit, limit < 0 { throw ValidationError("--limit must be 0 or more, not \(limit).") }
    }

    func run() throws {
        let directory = store.directory
        let asJSON = store.printsJSON(whenPiped: true)
        let (start, end) = try reportingFailures(directory: directory) { try Self.bounds(directory: directory) }
        let progress = ProgressBar.start("dump", total: end - start)
        defer { progress.finish() }
        var count = 0
        var failure: (any Error)?
        let unread = try reportingFailures(directory: directory) {
            try LogStore.readRecords(directory: directory, from: from) { record in
                guard limit.map({ count < $0 }) ?? true else { return false }
                count += 1
                progress.update(record.record.endOffset - min(start, record.record.endOffset))
                do {
                    let lines = try asJSON ? [jsonText(DumpedRecordJSON(record), pretty: false)] : Self.text(record)
                    for line in lines { print(line) }
                } catch {
                    failure = error
                    return false
                }
                return true
            }
        }
        progress.finish()
        if let failure { throw failure }
        if let unread {
            if asJSON {
                print(try jsonText(CutShortLine(cutShort: CutShortJSON(unread)!), pretty: false))
            } else {
                print("CUT SHORT: \(unread.byteCount) bytes at offset \(unread.offset) are not a readable record (\(unread.reason)).")
            }
            try finishRead(unreadTail: unread, directory: directory)
        } else if !asJSON {
            print("\(count) record\(count == 1 ? "" : "s").")
        }
    }

    /// The log's start and visible end, read-only.
    static func bounds(directory: String) throws -> (UInt64, UInt64) {
        if (try? PosixFileSystem().kind(of: directory)).map({ $0 != .directory }) ?? false {
            throw LogError(.notAStore, "\(directory) is a file, not a store directory.", file: directory)
        }
        let log = try Log.openReadOnly(directory: directory)
        defer { try? log.close() }
        return (log.startOffset, log.visibleEnd)
    }

    /// A record's lines: a header line and what its payload holds, indented.
    static func text(_ decoded: StoreRecord) -> [String] {
        let record = decoded.record
        let payloadBytes = record.payload.count
        var header =
            "@\(record.offset)  \(record.type)  \(Format.grouped(record.recordByteCount)) bytes on disk, payload "
            + "\(Format.grouped(payloadBytes)) bytes" + (record.usesDictionary ? " (LZ4, segment dictionary)" : record.isCompressed ? " (LZ4)" : "")
            + String(format: ", crc %08x", record.payloadCRC)
        if let end = record.statedDurableEnd { header += ", states durable end \(end)" }
        var lines = [header]
        if let failure = decoded.decodingFailure {
            lines.append("    does not decode: \(failure)")
        } else if let transaction = decoded.transaction {
            lines += HistoryCommand.textLines(transaction).map { "    " + $0 }
        } else if let schema = decoded.schema, let version = decoded.schemaVersion {
            lines.append("    schema table version \(version)")
            for entity in schema.entities {
                let properties = entity.properties.map { "\($0.name): \($0.valueType)\($0.isOptional ? "?" : "")" }
                lines.append("    \(entity.name)(" + properties.joined(separator: ", ") + ")")
            }
        } else if let bookmark = decoded.bookmark, let operation = decoded.bookmarkOperation {
            lines.append(
                "    consumer \"\(bookmark.name)\" \(operation == "set" ? "set" : "removed")"
                    + (operation == "set"
                        ? ", processed through " + (bookmark.token.map { "token@\($0.offset)" } ?? "nothing yet") : ""))
        } else if record.type == .data {
            lines.append("    " + hexPrefix(record.payload))
        }
        return lines
    }

    /// The first 32 bytes in hex.
    static func hexPrefix(_ bytes: [UInt8]) -> String {
        bytes.prefix(32).map { String(format: "%02x", $0) }.joined(separator: " ") + (bytes.count > 32 ? " …" : "")
    }
}

/// The last JSON line of a dump that stopped before the log's end.
struct CutShortLine: Encodable {
    var cutShort: CutShortJSON
}

/// One record of `logstore dump --json`.
struct DumpedRecordJSON: Encodable {
    struct Bookmark: Encodable {
        var operation: String
        var consumer: String
        var token: DefaultHistoryToken?
    }

    var offset: UInt64
    var endOffset: UInt64
    var type: String
    var recordBytes: UInt64
    var payloadBytes: Int
    var compressed: Bool
    /// Compressed against the segment's dictionary (FORMAT.md §6.8).
    var compressedWithDictionary: Bool
    var payloadCRC: UInt32
    var statedDurableEnd: UInt64?
    var transaction: HistoryTransactionJSON?
    var schemaVersion: UInt32?
    var schema: Schema?
    var bookmark: Bookmark?
    var dataPrefix: String?
    var decodingFailure: String?

    init(_ decoded: StoreRecord) {
        let record = decoded.record
        offset = record.offset
        endOffset = record.endOffset
        type = record.type.description
        recordBytes = record.recordByteCount
        payloadBytes = record.payload.count
        compressed = record.isCompressed
        compressedWithDictionary = record.usesDictionary
        payloadCRC = record.payloadCRC
        statedDurableEnd = record.statedDurableEnd
        transaction = decoded.transaction.map(HistoryTransactionJSON.init)
        schemaVersion = decoded.schemaVersion
        schema = decoded.schema
        bookmark = decoded.bookmark.map {
            Bookmark(operation: decoded.bookmarkOperation ?? "set", consumer: $0.name, token: $0.token)
        }
        dataPrefix = record.type == .data ? DumpCommand.hexPrefix(record.payload) : nil
        decodingFailure = decoded.decodingFailure
    }
}
