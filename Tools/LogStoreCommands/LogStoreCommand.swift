import ArgumentParser

/// `logstore`: an operator's instrument for LogStore store directories.
///
/// Exit codes (``ToolExit``): 0 ok; 1 damage found; 2 the store could not be read; 3 busy (another
/// process holds the writer's lock); 4 not a store or a newer format; 64 usage.
public struct LogStoreCommand: ParsableCommand {
    public init() {}

    public static let configuration = CommandConfiguration(
        commandName: "logstore",
        abstract: "Inspect, verify, replay, dump, export, import, compact and repair LogStore stores.",
        discussion: """
            A store is a directory holding store.meta, segment files named by their 20-digit base \
            offset, their index files, checkpoints and a LOCK file. The read commands (inspect, \
            verify, replay, history, dump, export) take no lock and change nothing, so they run beside \
            a live writer and see a consistent prefix of its log. The write commands (compact, repair, \
            import, demo) take the writer's lock; when another process holds it they refuse, naming \
            that process.

            \(ToolExit.helpText)
            """,
        subcommands: [
            InspectCommand.self, VerifyCommand.self, ReplayCommand.self, HistoryCommand.self, DumpCommand.self,
            ExportCommand.self, ImportCommand.self, CompactCommand.self, RepairCommand.self, DemoCommand.self,
            ShipCommand.self,
        ]
    )
}
