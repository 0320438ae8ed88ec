import ArgumentParser
import Foundation
import LogStore
import LogStoreEngine

/// The store directory and `--json`: the options every command shares.
struct StoreOptions: ParsableArguments {
    @Argument(help: "The store directory.")
    var directory: String

    @Flag(help: "Print JSON instead of text (JSON lines for listings).")
    var json = false

    /// Whether to print JSON: `--json`, or (for commands whose output scripts read) standard
    /// output is not a terminal.
    func printsJSON(whenPiped: Bool) -> Bool {
        json || (whenPiped && isatty(STDOUT_FILENO) == 0)
    }
}

/// The exit codes of every command (documented in `logstore --help` and the README).
enum ToolExit {
    /// The command did what it was asked.
    static let ok = ExitCode(0)
    /// Damage found: `verify` found corruption, or a read stopped at a damaged record.
    static let damage = ExitCode(1)
    /// The store could not be read, or the operation failed (a position in deleted history, an
    /// I/O error, a store without models for `replay`…).
    static let unreadable = ExitCode(2)
    /// The store is busy: another process holds the writer's lock.
    static let busy = ExitCode(3)
    /// Not a store (a missing directory, a file, a directory without `store.meta`), or a store of
    /// a newer format version than this tool reads.
    static let notAStore = ExitCode(4)
    /// A usage error: an unknown command or option, a malformed value (ArgumentParser's code).
    static let usage = ExitCode(64)

    /// The paragraph `--help` shows.
    static let helpText = """
        Exit codes: 0 ok; 1 damage found (verify found corruption, or a read stopped at a damaged \
        record); 2 the store could not be read or the operation failed; 3 the store is busy (another \
        process holds the writer's lock, which the message names); 4 not a store, or a store of a \
        newer format version; 64 usage error (an unknown option, a malformed value).
        """

    /// The exit code for an error a command could not handle.
    static func code(for error: any Error) -> ExitCode {
        let code: String?
        switch error {
        case let failure as CommandFailure: return failure.exitCode
        case let exit as ExitCode: return exit
        case is ValidationError: return usage
        case let error as LogError: code = error.code.rawValue
        case let error as LogStoreError: code = error.code.rawValue
        default: code = nil
        }
        switch code {
        case LogError.Code.corruption.rawValue?: return damage
        case LogError.Code.locked.rawValue?, LogError.Code.alreadyOpenInProcess.rawValue?: return busy
        case LogError.Code.notAStore.rawValue?, LogError.Code.newerFormatVersion.rawValue?: return notAStore
        default: return unreadable
        }
    }
}

/// The exit code of an operating error (2), for code that predates ``ToolExit``.
let storeErrorExitCode = ToolExit.unreadable

/// A failure a command reports as one sentence on standard error, with its exit code.
struct CommandFailure: Error, Equatable, CustomStringConvertible {
    var message: String
    var exitCode: ExitCode = storeErrorExitCode

    var description: String { message }
}

/// The one sentence an error becomes on standard error: its description, and for a busy store
/// the process that holds the writer's lock (from `/proc/locks`).
func sentence(for error: any Error, directory: String?) -> String {
    let text =
        switch error {
        case let failure as CommandFailure: failure.message
        case let error as LogError: error.description
        case let error as LogStoreError: error.description
        case let error as ValidationError: error.message
        default: "\(error)"
        }
    guard ToolExit.code(for: error) == ToolExit.busy, let directory, let holder = LockHolder.find(directory: directory)
    else { return text }
    return text + " The writer's lock is held by \(holder)."
}

/// Runs `body`; any error becomes one sentence on standard error and its ``ToolExit`` code,
/// never a stack trace. `directory` names the store for a busy store's lock holder.
func reportingFailures<Result>(directory: String? = nil, _ body: () throws -> Result) throws(ExitCode) -> Result {
    do {
        return try body()
    } catch let exit as ExitCode {
        throw exit
    } catch {
        printError("logstore: \(sentence(for: error, directory: directory))")
        throw ToolExit.code(for: error)
    }
}

/// ``reportingFailures(directory:_:)`` for the log's typed errors.
func reportingStoreErrors<Result>(directory: String? = nil, _ body: () throws(LogError) -> Result) throws(ExitCode)
    -> Result
{
    try reportingFailures(directory: directory) { try body() }
}

/// ``reportingFailures(directory:_:)`` under its older name.
func reportingErrors<Result>(directory: String? = nil, _ body: () throws -> Result) throws(ExitCode) -> Result {
    try reportingFailures(directory: directory, body)
}

func printError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

/// Prints `value` as pretty, key-sorted JSON on standard output.
func printJSON(_ value: some Encodable) throws(ExitCode) {
    print(try jsonText(value, pretty: true))
}

/// `value` as key-sorted JSON: pretty, or on one line (for JSON lines).
func jsonText(_ value: some Encodable, pretty: Bool) throws(ExitCode) -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = pretty ? [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes] : [.sortedKeys, .withoutEscapingSlashes]
    encoder.dateEncodingStrategy = .iso8601
    do {
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    } catch {
        printError("logstore: could not encode the JSON output: \(error)")
        throw storeErrorExitCode
    }
}

/// Text formatting for the human-readable output.
enum Format {
    /// `1234567` → `1,234,567`.
    static func grouped(_ value: some BinaryInteger) -> String {
        let digits = String(value)
        var result = ""
        for (index, character) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 && character != "-" { result.append(",") }
            result.append(character)
        }
        return result
    }

    /// `1536` → `1.5 KiB`.
    static func bytes(_ value: some BinaryInteger) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var amount = Double(value)
        var unit = 0
        while amount >= 1024 && unit < units.count - 1 {
            amount /= 1024
            unit += 1
        }
        return unit == 0 ? "\(value) B" : String(format: "%.1f", amount) + " " + units[unit]
    }

    /// Stored over raw bytes as a percentage, or `-` without payload.
    static func ratio(_ ratio: Double?) -> String {
        guard let ratio else { return "-" }
        return String(format: "%.1f%%", ratio * 100)
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// Left-aligns the first column and right-aligns the others.
    static func table(_ rows: [[String]]) -> String {
        guard let columnCount = rows.map(\.count).max() else { return "" }
        let widths = (0..<columnCount).map { column in rows.map { column < $0.count ? $0[column].count : 0 }.max() ?? 0
        }
        return rows.map { row in
            row.enumerated().map { column, cell in
                let padding = String(repeating: " ", count: widths[column] - cell.count)
                return column == 0 ? cell + padding : padding + cell
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }
}

/// A warning on standard error when a read-only read stopped at bytes it could not read: the
/// output above shows only what lies before them. The JSON outputs carry the same fact as
/// `"cutShort"`.
func warnAboutUnreadTail(_ tail: RecoveryReport.DroppedRecord?, directory: String) {
    guard let tail else { return }
    printError(
        "logstore: warning: the output is cut short: the log was read up to offset \(tail.offset); the "
            + "\(tail.byteCount) bytes after it in \((tail.file as NSString).lastPathComponent) are not a readable "
            + "record (\(tail.reason)). They are a torn tail that the next open for writing cuts, an append in "
            + "flight, or damage: `logstore verify \(directory)` tells which."
    )
}

/// After a read-only command printed what it read: when the log could not be read to its end,
/// the warning; and when `verify` finds corruption (not a torn tail or an append in flight),
/// exit code 1, so a script never takes a state cut short by damage for the whole one.
func finishRead(unreadTail tail: RecoveryReport.DroppedRecord?, directory: String) throws(ExitCode) {
    guard let tail else { return }
    warnAboutUnreadTail(tail, directory: directory)
    if isDamage(directory: directory) {
        printError(
            "logstore: the bytes at offset \(tail.offset) are damage (`logstore verify \(directory)` lists it), not a "
                + "torn tail: exit code 1.")
        throw ToolExit.damage
    }
}

/// Whether `verify` finds corruption in the store.
func isDamage(directory: String) -> Bool {
    (try? Log.verify(directory: directory))?.hasCorruption ?? false
}

/// The JSON form of an unread tail: where the read stopped and why.
struct CutShortJSON: Encodable, Equatable {
    var offset: UInt64
    var byteCount: UInt64
    var file: String
    var reason: String

    init?(_ tail: RecoveryReport.DroppedRecord?) {
        guard let tail else { return nil }
        offset = tail.offset
        byteCount = tail.byteCount
        file = (tail.file as NSString).lastPathComponent
        reason = tail.reason
    }
}
