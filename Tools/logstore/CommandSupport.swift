import ArgumentParser
import Foundation
import LogStoreEngine

/// The exit code of an operating error (missing store, newer format, locked…), printed as one
/// sentence on standard error.
let storeErrorExitCode = ExitCode(2)

/// Runs `body`; a ``LogError`` becomes its one-sentence description on standard error and exit
/// code 2, never a stack trace.
func reportingStoreErrors<Result>(_ body: () throws(LogError) -> Result) throws(ExitCode) -> Result {
    do {
        return try body()
    } catch {
        printError("logstore: \(error.description)")
        throw storeErrorExitCode
    }
}

/// Runs `body`; any error — a model store's (``LogStoreError``, ``ModelError``) or the log's —
/// becomes its one-sentence description on standard error and exit code 2.
func reportingErrors<Result>(_ body: () throws -> Result) throws(ExitCode) -> Result {
    do {
        return try body()
    } catch let exit as ExitCode {
        throw exit
    } catch {
        printError("logstore: \(error)")
        throw storeErrorExitCode
    }
}

func printError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

/// Prints `value` as pretty, key-sorted JSON on standard output.
func printJSON(_ value: some Encodable) throws(ExitCode) {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    encoder.dateEncodingStrategy = .iso8601
    do {
        print(String(decoding: try encoder.encode(value), as: UTF8.self))
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
/// output above shows only what lies before them.
func warnAboutUnreadTail(_ tail: RecoveryReport.DroppedRecord?, directory: String) {
    guard let tail else { return }
    printError(
        "logstore: warning: the log was read up to offset \(tail.offset); the \(tail.byteCount) bytes after it "
            + "in \((tail.file as NSString).lastPathComponent) are not a readable record (\(tail.reason)). They are a torn "
            + "tail that the next open for writing cuts, an append in flight, or damage: `logstore verify \(directory)` tells which."
    )
}
