import ArgumentParser
import Foundation
import LogStoreEngine

/// `logstore repair <dir> [--yes] [--backup DIR] [--json]`: copy aside what a repair may change,
/// cut the log at its first bad record, and say exactly what was dropped.
struct RepairCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "repair",
        abstract: "Truncate a damaged store at its first bad record, after copying aside what it changes; list what was dropped.",
        discussion: """
            Verifies the store first; a store without problems is left alone. Otherwise it lists the \
            problems, asks for confirmation (on a terminal; elsewhere it refuses without --yes), copies \
            every file the repair may change — store.meta, checkpoints, index and temporary files, and \
            the segment with the first problem and every later one — into the backup directory \
            (--backup, by default <dir>.repair-<UTC time> beside the store), then takes the store's lock \
            and repairs: at the first record that fails its checks the log is cut, the rest of that \
            segment zeroed, later segments and checkpoints beyond the new end deleted; a damaged segment \
            header is rewritten, a damaged store.meta rebuilt. Everything dropped is listed. When another \
            process holds the writer's lock it refuses (exit code 3) and names it; nothing is copied.

            \(ToolExit.helpText)
            """
    )

    @OptionGroup var store: StoreOptions

    @Flag(help: "Repair without asking (needed when standard input is not a terminal).")
    var yes = false

    @Option(help: ArgumentHelp("Copy the files the repair may change into this new directory.", valueName: "DIR"))
    var backup: String?

    func run() throws {
        let directory = store.directory
        let verification = try reportingFailures(directory: directory) { try Log.verify(directory: directory) }
        guard !verification.isClean else {
            if store.json {
                try printJSON(RepairJSON(directory: directory, problems: [], backup: nil, copied: [], report: nil))
            } else {
                print("Nothing to repair: every record of \(directory) checks out.")
            }
            return
        }
        if let holder = LockHolder.find(directory: directory) {
            printError(
                "logstore: The store at \(directory) is open for writing in another process: \(holder) holds the "
                    + "writer's lock. Close it there first; nothing was changed.")
            throw ToolExit.busy
        }
        if !store.json {
            print("Problems in \(directory):")
            for problem in verification.problems { print("  \(problem)") }
        }
        try confirm()
        let backupDirectory = backup ?? Self.defaultBackup(directory)
        let copied = try reportingFailures {
            try Self.copyAside(directory: directory, problems: verification.problems, to: backupDirectory)
        }
        if !store.json {
            print("Copied \(copied.count) file\(copied.count == 1 ? "" : "s") to \(backupDirectory) before changing anything.")
        }
        var options = LogOptions()
        options.repairs = true
        options.createsIfMissing = false
        let report = try reportingStoreErrors(directory: directory) { () throws(LogError) -> RecoveryReport in
            let log = try Log.open(directory: directory, options: options)
            let report = log.recoveryReport
            try log.close()
            return report
        }
        if store.json {
            try printJSON(
                RepairJSON(
                    directory: directory, problems: verification.problems, backup: backupDirectory, copied: copied,
                    report: report))
        } else {
            print(Self.text(report))
        }
    }

    /// Asks on a terminal; refuses (usage, exit code 64) elsewhere without `--yes`.
    private func confirm() throws {
        guard !yes else { return }
        guard isatty(STDIN_FILENO) != 0 else {
            printError(
                "logstore: repair changes the store and standard input is not a terminal: run it again with --yes "
                    + "to repair without asking (nothing was changed).")
            throw ToolExit.usage
        }
        print("Repair \(store.directory)? The files it changes are copied aside first. [y/N] ", terminator: "")
        fflush(nil)
        let answer = readLine()?.trimmingCharacters(in: .whitespaces).lowercased()
        guard answer == "y" || answer == "yes" else {
            print("Nothing changed.")
            throw ToolExit.ok
        }
    }

    static func defaultBackup(_ directory: String) -> String {
        let stamp = Date().formatted(
            Date.ISO8601FormatStyle().year().month().day().dateTimeSeparator(.standard).time(includingFractionalSeconds: false)
        ).replacingOccurrences(of: ":", with: "")
        var trimmed = directory
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed.removeLast() }
        return "\(trimmed).repair-\(stamp)"
    }

    /// Copies every file a repair may change into `backup` (created; it must not exist): every
    /// file but the segments before the first problem's segment, LOCK and `coordination`.
    static func copyAside(directory: String, problems: [VerificationReport.Problem], to backup: String) throws -> [String] {
        let manager = FileManager.default
        guard !manager.fileExists(atPath: backup) else {
            throw CommandFailure(message: "The backup directory \(backup) already exists; give another with --backup.")
        }
        let names = try manager.contentsOfDirectory(atPath: directory).sorted()
        let firstDamagedSegment = problems.lazy.map(\.file).compactMap(segmentBase).min()
        let problemOutsideSegments = problems.contains { segmentBase($0.file) == nil }
        let chosen = names.filter { name in
            // LOCK holds no data; the coordination file is rebuilt by every open for writing.
            guard name != FormatConstants.lockFileName && name != FormatConstants.coordinationFileName else {
                return false
            }
            guard let base = segmentBase(name) else { return true }
            // Damage outside the segments (store.meta): the repair reads every segment header.
            if problemOutsideSegments { return true }
            return firstDamagedSegment.map { base >= $0 } ?? true
        }
        do {
            try manager.createDirectory(atPath: backup, withIntermediateDirectories: false)
            for name in chosen {
                try manager.copyItem(atPath: directory + "/" + name, toPath: backup + "/" + name)
            }
        } catch {
            throw CommandFailure(
                message: "Could not copy the store's files to \(backup) (\(error.localizedDescription)); nothing was changed.")
        }
        return chosen
    }

    /// The base offset of a segment file name (`00000000000000004096.log`), else `nil`.
    static func segmentBase(_ name: String) -> UInt64? {
        guard name.hasSuffix(FormatConstants.segmentFileExtension) else { return nil }
        let stem = name.dropLast(FormatConstants.segmentFileExtension.count)
        guard stem.count == FormatConstants.fileNameDigitCount else { return nil }
        return UInt64(stem)
    }

    static func text(_ report: RecoveryReport) -> String {
        var lines: [String] = []
        for dropped in report.droppedRecords { lines.append("dropped: \(dropped)") }
        for name in report.deletedSegments { lines.append("deleted segment: \(name)") }
        for name in report.deletedCheckpoints { lines.append("deleted checkpoint: \(name)") }
        for name in report.rewrittenSegmentHeaders { lines.append("rewrote the segment header of \(name)") }
        if report.rebuiltStoreMeta { lines.append("rebuilt store.meta from the segment headers") }
        for note in report.repairNotes { lines.append(note) }
        if let aside = report.setAsideDirectory, !report.setAsideFiles.isEmpty {
            lines.append("set aside in \(aside): \(report.setAsideFiles.joined(separator: ", "))")
        }
        if let end = report.truncatedAt {
            lines.append("The log now ends at offset \(Format.grouped(end)).")
        } else if !report.repairedAnything {
            lines.append("The open found nothing to cut: every record checks out now.")
        }
        return lines.joined(separator: "\n")
    }
}

/// What `logstore repair --json` prints.
struct RepairJSON: Encodable {
    var directory: String
    var problems: [String]
    var backup: String?
    var copiedFiles: [String]
    var droppedRecords: [String]
    var deletedSegments: [String]
    var deletedCheckpoints: [String]
    var rewrittenSegmentHeaders: [String]
    var rebuiltStoreMeta: Bool
    var truncatedAt: UInt64?
    var notes: [String]
    var setAsideDirectory: String?
    var setAsideFiles: [String]

    init(
        directory: String, problems: [VerificationReport.Problem], backup: String?, copied: [String],
        report: RecoveryReport?
    ) {
        self.directory = directory
        self.problems = problems.map(\.description)
        self.backup = backup
        copiedFiles = copied
        droppedRecords = report?.droppedRecords.map(\.description) ?? []
        deletedSegments = report?.deletedSegments ?? []
        deletedCheckpoints = report?.deletedCheckpoints ?? []
        rewrittenSegmentHeaders = report?.rewrittenSegmentHeaders ?? []
        rebuiltStoreMeta = report?.rebuiltStoreMeta ?? false
        truncatedAt = report?.truncatedAt
        notes = report?.repairNotes ?? []
        setAsideDirectory = report?.setAsideDirectory
        setAsideFiles = report?.setAsideFiles ?? []
    }
}
