import ArgumentParser
import Foundation
import LogStoreEngine

/// `logstore inspect <dir> [--json]`: the store's identity and a table of its segments.
struct InspectCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "Show a store's identity, its segments (records, raw and stored bytes) and any unknown files.",
        discussion: "Opens the store read-only: takes no lock, changes nothing, runs beside a live writer."
    )

    @Argument(help: "The store directory.")
    var directory: String

    @Flag(help: "Print JSON instead of text.")
    var json = false

    func run() throws {
        let inspection = try reportingStoreErrors { () throws(LogError) in try Log.inspect(directory: directory) }
        if json {
            try printJSON(InspectionJSON(inspection))
        } else {
            print(Self.text(inspection))
        }
        warnAboutUnreadTail(inspection.unreadTail, directory: directory)
    }

    static func text(_ inspection: StoreInspection) -> String {
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

    init(_ inspection: StoreInspection) {
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
