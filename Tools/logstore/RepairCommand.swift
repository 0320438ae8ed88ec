import ArgumentParser
import Foundation
import LogStoreEngine

/// `logstore repair <dir>`: cut the log at its first bad record and say what was dropped.
struct RepairCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "repair",
        abstract: "Truncate a damaged store at its first bad record, delete what follows, and list what was dropped.",
        discussion: """
            Takes the store's lock (the store must not be open elsewhere). Reads every record of every \
            segment; at the first one that fails its checks the log is cut: the rest of that segment is \
            zeroed, later segments and checkpoints beyond the new end are deleted. Everything dropped is \
            listed. Run `logstore verify` first to see what is damaged; copy the directory first if the \
            dropped data matters.
            """
    )

    @Argument(help: "The store directory.")
    var directory: String

    func run() throws {
        var options = LogOptions()
        options.repairs = true
        options.createsIfMissing = false
        let log = try reportingStoreErrors { () throws(LogError) in try Log.open(directory: directory, options: options)
        }
        let report = log.recoveryReport
        for dropped in report.droppedRecords { print("dropped: \(dropped)") }
        for name in report.deletedSegments { print("deleted segment: \(name)") }
        for name in report.deletedCheckpoints { print("deleted checkpoint: \(name)") }
        if let end = report.truncatedAt {
            print("The log now ends at offset \(Format.grouped(end)).")
        } else {
            print("Nothing to repair: every record checks out.")
        }
        try reportingStoreErrors { () throws(LogError) in try log.close() }
    }
}
