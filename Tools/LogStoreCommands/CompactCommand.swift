import ArgumentParser
import Foundation
import LogStore
import LogStoreEngine

/// `logstore compact <dir> (--through POS | --keep-bytes N | --keep-age DURATION) [--force]`:
/// deletes history and the segment files it frees.
struct CompactCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "compact",
        abstract: "Delete history through a position, or beyond a size or age, and the segment files it frees.",
        discussion: """
            Takes the store's lock (the store must not be open elsewhere) and opens it with its stored \
            schema. Give exactly one of: --through POS (deleteHistory(token <= POS); POS is a token's JSON \
            form or a bare transaction offset), --keep-bytes N (keep about N bytes of history: 500000, \
            512K, 64M, 2G — binary units) or --keep-age DURATION (keep what is younger: 90s, 30m, 12h, \
            7d). The newest deleted transaction becomes the low-water mark; whole segment files at or \
            below it are deleted, never the one being written. Registered history consumers hold the \
            deletion back at their bookmark unless --force is given. The state (the models) never changes. \
            When another process has the store open for writing, it refuses (exit code 3) and names it.

            \(ToolExit.helpText)
            """
    )

    @OptionGroup var store: StoreOptions

    @Option(
        help: ArgumentHelp("Delete history through this position (token <= POS).", valueName: "POS"),
        transform: HistoryPosition.parse)
    var through: HistoryPosition?

    @Option(
        help: ArgumentHelp("Keep about this many bytes of history (plain bytes or K, M, G).", valueName: "N"),
        transform: CompactCommand.parseByteCount)
    var keepBytes: UInt64?

    @Option(
        help: ArgumentHelp("Keep the history younger than this (90s, 30m, 12h, 7d).", valueName: "DURATION"),
        transform: CompactCommand.parseAge)
    var keepAge: Duration?

    @Flag(help: "Delete past the bookmarks of registered history consumers.")
    var force = false

    /// What to delete.
    enum Mode: Equatable {
        case through(HistoryPosition)
        case keepBytes(UInt64)
        case keepAge(Duration)
    }

    var mode: Mode? {
        switch (through, keepBytes, keepAge) {
        case (let position?, nil, nil): .through(position)
        case (nil, let bytes?, nil): .keepBytes(bytes)
        case (nil, nil, let age?): .keepAge(age)
        default: nil
        }
    }

    func validate() throws {
        guard mode != nil else {
            throw ValidationError("Give exactly one of --through, --keep-bytes and --keep-age.")
        }
    }

    func run() throws {
        guard let mode else { throw ValidationError("Give exactly one of --through, --keep-bytes and --keep-age.") }
        let directory = store.directory
        let progress = ProgressBar.start("compact")
        defer { progress.finish() }
        let report = try reportingFailures(directory: directory) {
            try Self.compact(directory: directory, mode: mode, force: force)
        }
        progress.finish()
        if store.json {
            try printJSON(report)
        } else {
            print(report.text)
        }
    }

    // MARK: Arguments

    /// `1048576`, `512K`, `64M`, `2G` (also `KiB`, `MB`…; always binary: K = 1024).
    static func parseByteCount(_ text: String) throws -> UInt64 {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let digits = trimmed.prefix { $0.isASCII && $0.isNumber }
        let suffix = trimmed.dropFirst(digits.count).uppercased()
        let multipliers: [String: UInt64] = [
            "": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10,
            "M": 1 << 20, "MB": 1 << 20, "MIB": 1 << 20,
            "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30,
        ]
        guard let value = UInt64(digits), let multiplier = multipliers[suffix] else {
            throw ValidationError(
                "'\(text)' is not a byte count: give a whole number of bytes, optionally with K, M or G "
                    + "(binary: 1K = 1024 bytes).")
        }
        let (product, overflow) = value.multipliedReportingOverflow(by: multiplier)
        guard !overflow else { throw ValidationError("'\(text)' is too many bytes.") }
        return product
    }

    /// `90s`, `30m`, `12h`, `7d`.
    static func parseAge(_ text: String) throws -> Duration {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3_600, "d": 86_400]
        guard let unit = trimmed.last, let seconds = units[unit], let value = Int64(trimmed.dropLast()), value >= 0,
            value <= Int64.max / seconds / 1_000_000
        else {
            throw ValidationError(
                "'\(text)' is not a duration: give a whole number with s, m, h or d (90s, 30m, 12h, 7d).")
        }
        return .seconds(value * seconds)
    }

    // MARK: Compaction

    /// Opens the store for writing with its stored schema, deletes what `mode` says, closes it.
    static func compact(directory: String, mode: Mode, force: Bool) throws -> CompactionReport {
        // A read-only open first: a missing directory or one that is not a store fails here
        // instead of becoming a new, empty store.
        do { try Log.openReadOnly(directory: directory).close() } catch { throw LogStoreError.log(error) }
        var throughToken: DefaultHistoryToken?
        if case .through(let position) = mode {
            do {
                throughToken = try position.resolve(in: directory)
            } catch let error as LogStoreError where error.code == .historyTokenExpired {
                // A bare offset already at or below L: nothing more to delete through it.
                throughToken = error.resumeToken
            }
        }
        let store = try LogStore(LogStoreConfiguration(directory: directory))
        let compaction: HistoryCompaction
        do {
            switch mode {
            case .through:
                let token = throughToken!
                compaction = try store.deleteHistory(
                    HistoryDescriptor(predicate: #Predicate { $0.token <= token }),
                    force: force)
            case .keepBytes(let bytes):
                compaction = try store.applyRetention(HistoryRetention(historyByteCountMax: bytes), force: force)
            case .keepAge(let age):
                compaction = try store.applyRetention(HistoryRetention(historyAgeMax: age), force: force)
            }
        } catch {
            try? store.close()
            throw error
        }
        try store.close()
        return CompactionReport(directory: directory, compaction)
    }
}

/// What `logstore compact` did, as text or JSON.
struct CompactionReport: Encodable, Equatable {
    var directory: String
    var previousLowWaterMark: DefaultHistoryToken?
    var lowWaterMark: DefaultHistoryToken?
    /// Whether the low-water mark moved (history was deleted).
    var deletedHistory: Bool
    /// The segment file names deleted, oldest first.
    var deletedSegments: [String]
    var reclaimedByteCount: UInt64
    var heldBackByConsumer: String?
    var droppedConsumers: [String]

    init(directory: String, _ compaction: HistoryCompaction) {
        self.directory = directory
        previousLowWaterMark = compaction.previousLowWaterMark
        lowWaterMark = compaction.lowWaterMark
        deletedHistory = compaction.lowWaterMark != compaction.previousLowWaterMark
        deletedSegments = compaction.deletedSegments.map(Self.segmentFileName)
        reclaimedByteCount = compaction.reclaimedByteCount
        heldBackByConsumer = compaction.heldBackByConsumer
        droppedConsumers = compaction.droppedConsumers
    }

    /// `00000000000000001234.log` for base offset 1234.
    static func segmentFileName(_ baseOffset: UInt64) -> String {
        let digits = String(baseOffset)
        return String(repeating: "0", count: max(0, FormatConstants.fileNameDigitCount - digits.count)) + digits
            + FormatConstants.segmentFileExtension
    }

    private enum CodingKeys: String, CodingKey {
        case directory, previousLowWaterMark, lowWaterMark, deletedHistory, deletedSegments, reclaimedByteCount,
            heldBackByConsumer, droppedConsumers
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(directory, forKey: .directory)
        try container.encode(previousLowWaterMark, forKey: .previousLowWaterMark)  // null: no history deleted before
        try container.encode(lowWaterMark, forKey: .lowWaterMark)
        try container.encode(deletedHistory, forKey: .deletedHistory)
        try container.encode(deletedSegments, forKey: .deletedSegments)
        try container.encode(reclaimedByteCount, forKey: .reclaimedByteCount)
        try container.encode(heldBackByConsumer, forKey: .heldBackByConsumer)
        try container.encode(droppedConsumers, forKey: .droppedConsumers)
    }

    var text: String {
        var lines: [String] = []
        if deletedHistory, let lowWaterMark {
            lines.append("Deleted history through token@\(lowWaterMark.offset).")
            lines.append("Low-water mark: \(previousLowWaterMark?.json ?? "none") → \(lowWaterMark.json)")
        } else {
            lines.append(
                "Nothing to delete: the low-water mark stays at \(lowWaterMark?.json ?? "none (no history deleted yet)")."
            )
        }
        if deletedSegments.isEmpty {
            if deletedHistory {
                lines.append(
                    "No segment file deleted: each still holds history after the low-water mark, or is the one "
                        + "being written.")
            }
        } else {
            lines.append(
                "Deleted \(deletedSegments.count) segment file\(deletedSegments.count == 1 ? "" : "s") ("
                    + deletedSegments.joined(separator: ", ") + "): \(Format.bytes(reclaimedByteCount)) reclaimed.")
        }
        if let heldBackByConsumer {
            lines.append(
                "Held back by the history consumer \"\(heldBackByConsumer)\" (its bookmark is the oldest; "
                    + "--force deletes past it).")
        }
        if !droppedConsumers.isEmpty {
            lines.append("Dropped history consumers: " + droppedConsumers.joined(separator: ", ") + ".")
        }
        return lines.joined(separator: "\n")
    }
}
