import Foundation
import Testing

/// The `logstore` executable run as a child process, as an operator runs it: its exit code,
/// standard output and standard error (to files, so neither pipe can fill up).
struct ToolRun {
    var status: Int32
    var stdout: String
    var stderr: String
}

enum Tool {
    /// `logstore`, built beside the test bundle (`swift build --build-tests` builds both).
    static let executable: String = {
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("logstore")
                .path,
            Bundle.main.bundleURL.appendingPathComponent("logstore").path,
            Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("logstore").path,
            packageRoot + "/.build/debug/logstore",
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) } ?? candidates.last!
    }()

    /// The package directory, from this file's path.
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    /// Starts `logstore arguments…`; standard input from `input` (else /dev/null).
    static func start(_ arguments: [String], input: Data? = nil, scratch: String) throws -> (Process, String, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["COLUMNS"] = "100"
        process.environment = environment
        let id = UUID().uuidString
        let out = scratch + "/stdout-\(id)"
        let err = scratch + "/stderr-\(id)"
        _ = FileManager.default.createFile(atPath: out, contents: nil)
        _ = FileManager.default.createFile(atPath: err, contents: nil)
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: out))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: err))
        if let input {
            let inputPath = scratch + "/stdin-\(id)"
            _ = FileManager.default.createFile(atPath: inputPath, contents: input)
            process.standardInput = try FileHandle(forReadingFrom: URL(fileURLWithPath: inputPath))
        } else {
            process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
        }
        try process.run()
        return (process, out, err)
    }

    /// Runs `logstore arguments…` to its end.
    static func run(_ arguments: [String], input: Data? = nil) throws -> ToolRun {
        let scratch = NSTemporaryDirectory() + "logstore-tool-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let (process, out, err) = try start(arguments, input: input, scratch: scratch)
        process.waitUntilExit()
        return ToolRun(
            status: process.terminationStatus,
            stdout: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "",
            stderr: (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
    }
}

/// Golden files in `Tests/LogStoreToolTests/Golden`: the output, masked of what differs between
/// runs, must equal the file; `LOGSTORE_UPDATE_GOLDEN=1` writes them instead.
enum Golden {
    static let directory = Tool.packageRoot + "/Tests/LogStoreToolTests/Golden"
    static var updating: Bool { ProcessInfo.processInfo.environment["LOGSTORE_UPDATE_GOLDEN"] == "1" }

    /// Replaces what changes from run to run — the store directory, UUIDs, times, CRCs, process
    /// ids and host names, checksums, byte counts, ratios, and numbers of three or more digits
    /// (offsets and sizes shift with the length of a process id or host name, or a compressed
    /// UUID) — then collapses runs of spaces (column widths).
    static func mask(_ text: String, directories: [String] = []) -> String {
        var text = text
        for directory in directories.sorted(by: { $0.count > $1.count }) {
            text = text.replacingOccurrences(of: directory, with: "<dir>")
        }
        let rules: [(String, String)] = [
            (#"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"#, "<uuid>"),
            (#"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z"#, "<time>"),
            (#"[0-9A-F]{8}…"#, "<id>…"),
            (#"crc [0-9a-f]{8}"#, "crc <crc>"),
            (#""check":\d+"#, #""check":<crc>"#),
            (#""payloadCRC":\d+"#, #""payloadCRC":<crc>"#),
            (#"0x[0-9A-Fa-f]+"#, "0x<hex>"),
            (#"\d+(\.\d+)?%"#, "<pct>"),
            (#"\d+ bytes"#, "<n> bytes"),
            (#""(payloadBytes|recordBytes|byteCount)":\d+"#, #""$1":<n>"#),
            (#"\d+@[^\s"]+"#, "<pid>@<host>"),
            (#"process \d+"#, "process <pid>"),
            (#""processIdentifier":"\d+""#, #""processIdentifier":"<pid>""#),
            (#"pid \d+"#, "pid <pid>"),
            (#"\d[\d,.]*\d\d"#, "<n>"),
            (#"\d{3,}"#, "<n>"),
            (#" {2,}"#, " "),
        ]
        for (pattern, replacement) in rules {
            text = text.replacingOccurrences(of: pattern, with: replacement, options: .regularExpression)
        }
        return text
    }

    /// Compares `text` (masked) with the golden file `name`, or writes it when updating.
    static func check(
        _ name: String, _ text: String, directories: [String] = [], sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let masked = mask(text, directories: directories)
        let path = directory + "/" + name + ".txt"
        if updating {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try masked.write(toFile: path, atomically: true, encoding: .utf8)
            return
        }
        guard let expected = try? String(contentsOfFile: path, encoding: .utf8) else {
            Issue.record(
                "No golden file \(name).txt: run with LOGSTORE_UPDATE_GOLDEN=1 to write it.",
                sourceLocation: sourceLocation)
            return
        }
        let actualLines = masked.split(separator: "\n", omittingEmptySubsequences: false)
        let expectedLines = expected.split(separator: "\n", omittingEmptySubsequences: false)
        let first = Array(zip(actualLines, expectedLines)).firstIndex { $0.0 != $0.1 } ?? min(actualLines.count, expectedLines.count)
        #expect(
            masked == expected,
            "golden \(name).txt differs at line \(first + 1): got \(first < actualLines.count ? String(actualLines[first]) : "<end>"), expected \(first < expectedLines.count ? String(expectedLines[first]) : "<end>")",
            sourceLocation: sourceLocation)
    }
}
