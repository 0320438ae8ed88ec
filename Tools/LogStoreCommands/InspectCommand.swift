import ArgumentParser
import Foundation
import LogStore
import LogStoreEngine

/// `logstore inspect <dir> [--json]`: the store's identity and a table of its segments.
struct InspectCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract:
            "Show a store's identity, segments (records, raw and stored bytes), checkpoints, history low-water mark, consumers and writer.",
        discussion: """
            Opens the store read-only: takes no lock, changes nothing, runs beside a live writer. The \
            writer is the process holding the store's LOCK file, found in /proc/locks.

            \(ToolExit.helpText)
            """
    )

    @OptionGroup var store: StoreOptions

    func run() throws {
        let directory = store.directory
        let inspection = try reportingFailures { try Log.inspect(directory: directory) }
        let model = try reportingFailures { try ModelLayerFacts.read(directory: directory) }
        if store.json {
            try printJSON(InspectionJSON(inspection, model: model))
        } else {
            print(Self.text(inspection, model: model))
        }
        try finishRead(unreadTail: inspection.unreadTail, directory: directory)
    }

    static func text(_ inspection: StoreInspection, model: ModelLayerFacts) -> String {
        var lines = [
            "Store    \(inspection.directory)",
            "ID       \(inspection.storeID)",
            "Format   version \(inspection.formatVersion)",
            "Created  \(inspection.creationDate.formatted(.iso8601))",
            "Log      offsets \(inspection.startOffset) ..< \(inspection.endOffset), "
                + "\(Format.grouped(inspection.recordCount)) records in \(inspection.segments.count) segment"
                + (inspection.segments.count == 1 ? "" : "s"),
            "",
        ]
        var rows = [
            [
                "SEGMENT", "BASE OFFSET", "END OFFSET", "RECORDS", "COMPRESSED", "RAW BYTES", "STORED BYTES",
                "STORED/RAW", "FILE BYTES",
            ]
        ]
        for segment in inspection.segments {
            rows.append([
                segment.fileName, String(segment.baseOffset), String(segment.endOffset),
                Format.grouped(segment.recordCount), Format.grouped(segment.compressedRecordCount),
                Format.grouped(segment.rawByteCount), Format.grouped(segment.storedByteCount),
                Format.ratio(segment.compressionRatio), Format.grouped(segment.fileByteCount),
            ])
        }
        rows.append([
            "total", "", "", Format.grouped(inspection.recordCount),
            Format.grouped(inspection.compressedRecordCount), Format.grouped(inspection.rawByteCount),
            Format.grouped(inspection.storedByteCount), Format.ratio(inspection.compressionRatio),
            Format.grouped(inspection.fileByteCount),
        ])
        lines.append(Format.table(rows))
        lines.append("")
        lines.append(
            "Raw bytes are payloads before compression; stored bytes are payloads as written, without the "
                + "32-byte record headers.")
        lines.append(
            "Index files: \(inspection.indexFiles.count)   Checkpoints: \(inspection.checkpointFiles.count)   "
                + "Temporary files: \(list(inspection.temporaryFiles))")
        lines.append("Unknown files: \(list(inspection.unknownFiles))")
        lines.append("")
        lines.append(
            "Checkpoints    "
                + (inspection.checkpointFiles.isEmpty ? "none" : inspection.checkpointFiles.joined(separator: ", ")))
        lines.append(
            "Low-water mark "
                + (model.lowWaterMark.map { "token@\($0.offset) (history at or before it is deleted)" }
                    ?? "none (no history deleted)"))
        if model.consumers.isEmpty {
            lines.append("Consumers      none registered")
        } else {
            for (index, consumer) in model.consumers.enumerated() {
                lines.append(
                    (index == 0 ? "Consumers      " : "               ") + "\(consumer.name): "
                        + (consumer.token.map { "processed through token@\($0.offset)" } ?? "nothing processed yet")
                        + ", last active \(iso8601Microseconds(consumer.lastActivity))")
            }
        }
        lines.append("Writer         " + (model.writer ?? "none (no process holds the writer's lock)"))
        if inspection.unreadTail != nil {
            lines.append("CUT SHORT: the log could not be read to its end; the counts above stop there.")
        }
        return lines.joined(separator: "\n")
    }

    private static func list(_ names: [String]) -> String {
        names.isEmpty ? "none" : names.joined(separator: ", ")
    }
}

/// The JSON form of ``StoreInspection`` (numbers are plain JSON numbers).
struct InspectionJSON: Encodable {
    struct Segment: Encodable {
        var fileName: String
        var baseOffset: UInt64
        var endOffset: UInt64
        var fileByteCount: UInt64
        var recordCount: UInt64
        var compressedRecordCount: UInt64
        var rawByteCount: UInt64
        var storedByteCount: UInt64
        var storedToRawRatio: Double?
    }

    var directory: String
    var storeID: String
    var formatVersion: UInt32
    var created: Date
    var startOffset: UInt64
    var endOffset: UInt64
    var recordCount: UInt64
    var rawByteCount: UInt64
    var storedByteCount: UInt64
    var segments: [Segment]
    var indexFiles: [String]
    var checkpointFiles: [String]
    var temporaryFiles: [String]
    var unknownFiles: [String]
    var lowWaterMark: DefaultHistoryToken?
    var consumers: [ConsumerJSON]
    /// The process holding the writer's lock, or `null`.
    var writer: String?
    /// Where the read stopped before the log's end, or `null` when it read everything.
    var cutShort: CutShortJSON?

    struct ConsumerJSON: Encodable {
        var name: String
        var token: DefaultHistoryToken?
        var lastActivity: String
    }

    init(_ inspection: StoreInspection, model: ModelLayerFacts) {
        lowWaterMark = model.lowWaterMark
        consumers = model.consumers.map {
            ConsumerJSON(name: $0.name, token: $0.token, lastActivity: iso8601Microseconds($0.lastActivity))
        }
        writer = model.writer
        cutShort = CutShortJSON(inspection.unreadTail)
        directory = inspection.directory
        storeID = inspection.storeID.uuidString
        formatVersion = inspection.formatVersion
        created = inspection.creationDate
        startOffset = inspection.startOffset
        endOffset = inspection.endOffset
        recordCount = inspection.recordCount
        rawByteCount = inspection.rawByteCount
        storedByteCount = inspection.storedByteCount
        segments = inspection.segments.map {
            Segment(
                fileName: $0.fileName, baseOffset: $0.baseOffset, endOffset: $0.endOffset,
                fileByteCount: $0.fileByteCount, recordCount: $0.recordCount,
                compressedRecordCount: $0.compressedRecordCount, rawByteCount: $0.rawByteCount,
                storedByteCount: $0.storedByteCount, storedToRawRatio: $0.compressionRatio)
        }
        indexFiles = inspection.indexFiles
        checkpointFiles = inspection.checkpointFiles
        temporaryFiles = inspection.temporaryFiles
        unknownFiles = inspection.unknownFiles
    }
}

/// What `inspect` shows beyond the log: L, the registered consumers, the writer's process.
struct ModelLayerFacts {
    var lowWaterMark: DefaultHistoryToken?
    var consumers: [ConsumerBookmark]
    var writer: String?

    /// Read without the lock; a store without models has no L and no consumers.
    static func read(directory: String) throws -> ModelLayerFacts {
        let lowWaterMark = try LogStore.historyLowWaterMark(directory: directory)
        let consumers = try LogStore.replay(directory: directory).consumers
        return ModelLayerFacts(
            lowWaterMark: lowWaterMark, consumers: consumers, writer: LockHolder.find(directory: directory))
    }
}
