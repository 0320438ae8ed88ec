import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// Issue 12's benchmarks need a second process: the benchmark binary runs itself again as a child
// (`ChildProcess.launch`), told what to be by `$LOGSTORE_BENCH_CHILD` (and its parameters by
// `$LOGSTORE_BENCH_CHILD_*`); the suite's `benchmarks` closure calls `ProcessChild.runIfRequested()`
// first, which runs the child and exits before anything is registered. Parent and child talk in
// lines over the child's standard input and output (`LineChannel`); the child's standard error is
// the parent's. Both read `CLOCK_MONOTONIC`, which is one clock for every process of the machine,
// so times cross the pipe as nanoseconds.

/// Lines over two file descriptors: commands one way, answers the other.
final class LineChannel: @unchecked Sendable {
    // @unchecked: one thread reads and writes a channel at a time (the driver of a benchmark, or
    // the child's command loop).
    let input: Int32
    let output: Int32
    private var buffer: [UInt8] = []

    init(input: Int32, output: Int32) {
        self.input = input
        self.output = output
    }

    func send(_ line: String) throws {
        var bytes = Array(line.utf8)
        bytes.append(UInt8(ascii: "\n"))
        var written = 0
        // Bounded: each pass writes at least one byte or throws.
        while written < bytes.count {
            let result = bytes[written...].withUnsafeBytes { write(output, $0.baseAddress, $0.count) }
            if result < 0 {
                if errno == EINTR { continue }
                throw HarnessError("write to the other process failed: \(String(cString: strerror(errno)))")
            }
            written += result
        }
    }

    /// The next line, without its newline; throws at the end of the stream.
    func receive() throws -> String {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        // Bounded by the stream: each pass reads at least one byte, or returns, or throws.
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return line
            }
            let count = chunk.withUnsafeMutableBytes { read(input, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw HarnessError("read from the other process failed: \(String(cString: strerror(errno)))")
            }
            if count == 0 { throw HarnessError("the other process closed its end (it exited or crashed; see its stderr)") }
            buffer.append(contentsOf: chunk[..<count])
        }
    }

    /// Sends `command` and returns the answer, which must start with `expected` (then the rest,
    /// split on spaces). A child answers `error <text>` when a command failed.
    func request(_ command: String, expecting expected: String) throws -> [Substring] {
        try send(command)
        let answer = try receive()
        let fields = answer.split(separator: " ", omittingEmptySubsequences: true)
        guard let first = fields.first, first == expected else {
            throw HarnessError("the child answered \"\(answer.prefix(300))\" to \"\(command)\"")
        }
        return Array(fields.dropFirst())
    }
}

/// A child process running this benchmark binary in a role.
final class ChildProcess: @unchecked Sendable {
    // @unchecked: driven by one thread at a time (setup, iterations and teardown of one benchmark).
    let process: Process
    let channel: LineChannel
    private let toChild: Pipe
    private let fromChild: Pipe

    /// Starts the child with `$LOGSTORE_BENCH_CHILD = role` and `$LOGSTORE_BENCH_CHILD_<key>` for
    /// each parameter, and waits for its `ready` line (it opened its store).
    init(role: String, parameters: [String: String]) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: Self.executablePath)
        process.arguments = []
        var environment = ProcessInfo.processInfo.environment
        environment["LOGSTORE_BENCH_SUMMARY"] = nil
        environment["LOGSTORE_BENCH_CHILD"] = role
        for (key, value) in parameters { environment["LOGSTORE_BENCH_CHILD_" + key] = value }
        process.environment = environment
        toChild = Pipe()
        fromChild = Pipe()
        process.standardInput = toChild
        process.standardOutput = fromChild
        try process.run()
        channel = LineChannel(
            input: fromChild.fileHandleForReading.fileDescriptor, output: toChild.fileHandleForWriting.fileDescriptor)
        let ready = try channel.receive()
        guard ready == "ready" else {
            process.terminate()
            throw HarnessError("the \(role) child did not start: \(ready)")
        }
    }

    /// This executable (the benchmark binary), as the kernel knows it.
    static let executablePath: String = {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }()

    var processIdentifier: Int32 { process.processIdentifier }

    /// Asks the child to close its store and exit, and waits for it.
    func stop() throws {
        defer {
            try? toChild.fileHandleForWriting.close()
            process.waitUntilExit()
        }
        _ = try channel.request("quit", expecting: "bye")
    }
}

/// CPU time and context switches of this process (getrusage), for idle-cost figures.
public struct ProcessUsage: Sendable {
    public var cpuMicroseconds: Int
    public var voluntarySwitches: Int
    public var involuntarySwitches: Int

    public static func now() -> ProcessUsage {
        var usage = rusage()
        #if os(Linux)
            getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        #else
            getrusage(RUSAGE_SELF, &usage)
        #endif
        return ProcessUsage(
            cpuMicroseconds: (Int(usage.ru_utime.tv_sec) + Int(usage.ru_stime.tv_sec)) * 1_000_000
                + Int(usage.ru_utime.tv_usec) + Int(usage.ru_stime.tv_usec),
            voluntarySwitches: Int(usage.ru_nvcsw), involuntarySwitches: Int(usage.ru_nivcsw))
    }

    public static func - (lhs: ProcessUsage, rhs: ProcessUsage) -> ProcessUsage {
        ProcessUsage(
            cpuMicroseconds: lhs.cpuMicroseconds - rhs.cpuMicroseconds,
            voluntarySwitches: lhs.voluntarySwitches - rhs.voluntarySwitches,
            involuntarySwitches: lhs.involuntarySwitches - rhs.involuntarySwitches)
    }

    var line: String { "\(cpuMicroseconds) \(voluntarySwitches) \(involuntarySwitches)" }

    init(cpuMicroseconds: Int, voluntarySwitches: Int, involuntarySwitches: Int) {
        self.cpuMicroseconds = cpuMicroseconds
        self.voluntarySwitches = voluntarySwitches
        self.involuntarySwitches = involuntarySwitches
    }

    init(fields: [Substring]) throws {
        guard fields.count == 3, let cpu = Int(fields[0]), let voluntary = Int(fields[1]), let involuntary = Int(fields[2])
        else { throw HarnessError("bad usage line: \(fields.joined(separator: " "))") }
        self.init(cpuMicroseconds: cpu, voluntarySwitches: voluntary, involuntarySwitches: involuntary)
    }
}

/// Sleeps (in short sleeps) until the monotonic clock reaches `deadline`.
func sleepUntil(_ deadline: UInt64) {
    // Bounded by the deadline.
    while true {
        let now = monotonicNanoseconds()
        guard now < deadline else { return }
        let remaining = deadline - now
        usleep(useconds_t(max(1, min(remaining / 1_000, 100_000))))
    }
}
