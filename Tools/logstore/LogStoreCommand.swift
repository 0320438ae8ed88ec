import ArgumentParser

/// `logstore`: inspect, verify, replay and try out a LogStore store directory.
///
/// Exit codes: 0 success; 1 `verify` found corruption; 2 the store could not be read (missing,
/// not a store, newer format, locked…), with one sentence on standard error; 64 a usage error.
@main
struct LogStoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "logstore",
        abstract: "Inspect, verify, replay and try out LogStore store directories.",
        discussion: """
            A store is a directory holding store.meta, segment files named by their 20-digit base \
            offset, their index files and a LOCK file. `inspect`, `verify`, `replay` and `history` take no \
            lock and change nothing, so they run beside a live writer.

            Exit codes: 0 success, 1 verify found corruption, 2 the store could not be read.
            """,
        subcommands: [
            InspectCommand.self, VerifyCommand.self, ReplayCommand.self, HistoryCommand.self, CompactCommand.self,
            RepairCommand.self, DemoCommand.self, ShipCommand.self,
        ]
    )
}
