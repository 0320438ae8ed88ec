import ArgumentParser
import Foundation
import LogStoreEngine

/// `logstore verify <dir> [--json]`: every problem in a store, and exit code 1 on corruption.
struct VerifyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check every header, record, segment boundary and index of a store; list every problem.",
        discussion: """
            Read-only: takes no lock and changes nothing. Does not stop at the first damage: after a \
            bad record it finds the next good one and goes on. Exit code 0 when there is no \
            corruption (warnings, such as a torn tail the next open cuts, are printed but pass), 1 when \
            there is, 2 when the store cannot be read at all. A progress bar shows on standard error \
            when it is a terminal and the check takes longer than a second.

            \(ToolExit.helpText)
            """
    )

    @OptionGroup var store: StoreOptions

    func run() throws {
        let directory = store.directory
        let progress = ProgressBar.start("verify")
        defer { progress.finish() }
        let report = try reportingStoreErrors { () throws(LogError) in try Log.verify(directory: directory) }
        progress.finish()
        if store.json {
            try printJSON(VerificationJSON(report))
        } else {
            print(Self.text(report))
        }
        if report.hasCorruption { throw ExitCode(1) }
    }

    static func text(_ report: VerificationReport) -> String {
        var lines = ["Verifying \(report.directory)" + (report.storeID.map { " (store \($0))" } ?? "")]
        lines += report.problems.map(\.description)
        if !report.unknownFiles.isEmpty {
            lines.append(
                "note: files that are not part of the store, left alone: "
                    + report.unknownFiles.joined(separator: ", "))
        }
        let corruptionCount = report.corruptions.count
        let warningCount = report.warnings.count
        let checked =
            "Checked \(report.segmentCount) segment\(report.segmentCount == 1 ? "" : "s"), "
            + "\(Format.grouped(report.recordCount)) records (\(Format.grouped(report.recordByteCount)) bytes), "
            + "\(report.indexFileCount) index file\(report.indexFileCount == 1 ? "" : "s")"
        let verdict: String
        if report.isClean {
            verdict = "clean."
        } else {
            verdict =
                "\(corruptionCount) corruption\(corruptionCount == 1 ? "" : "s"), "
                + "\(warningCount) warning\(warningCount == 1 ? "" : "s")."
        }
        lines.append("\(checked): \(verdict)")
        return lines.joined(separator: "\n")
    }
}

/// The JSON form of ``VerificationReport``.
struct VerificationJSON: Encodable {
    struct Problem: Encodable {
        var severity: String
        var file: String
        var filePosition: UInt64
        var offset: UInt64?
        var byteCount: UInt64?
        var message: String
    }

    var directory: String
    var storeID: String?
    var isClean: Bool
    var hasCorruption: Bool
    var segmentCount: Int
    var recordCount: UInt64
    var recordByteCount: UInt64
    var indexFileCount: Int
    var checkpointFiles: [String]
    var unknownFiles: [String]
    var problems: [Problem]

    init(_ report: VerificationReport) {
        directory = report.directory
        storeID = report.storeID?.uuidString
        isClean = report.isClean
        hasCorruption = report.hasCorruption
        segmentCount = report.segmentCount
        recordCount = report.recordCount
        recordByteCount = report.recordByteCount
        indexFileCount = report.indexFileCount
        checkpointFiles = report.checkpointFiles
        unknownFiles = report.unknownFiles
        problems = report.problems.map {
            Problem(
                severity: $0.severity.rawValue, file: $0.file, filePosition: $0.filePosition, offset: $0.offset,
                byteCount: $0.byteCount, message: $0.message)
        }
    }
}
