import Benchmark
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// The harness: a benchmark is a `WorkloadSpec` (what to build, how many threads, how many
// operations per framework iteration) and a `Workload` (one operation, counters, close).
// `register(_:)` turns a spec into a package-benchmark `Benchmark` and, in its teardown, appends a
// one-line JSON summary to `$LOGSTORE_BENCH_SUMMARY` (exact operation counts, elapsed time, per-op
// latency percentiles, counter deltas) that `summarize.py` turns into ratios. The framework's own
// tables (wall clock, throughput, custom metrics) still print as usual.

/// `full` (the default) or `smoke` (`BENCHMARKS_SMOKE=1`: one tiny iteration of each benchmark).
public enum BenchmarkProfile: String, Sendable {
    case full
    case smoke

    public static let current: BenchmarkProfile = {
        let value = ProcessInfo.processInfo.environment["BENCHMARKS_SMOKE"] ?? ""
        return value.isEmpty || value == "0" ? .full : .smoke
    }()

    public var isSmoke: Bool { self == .smoke }
}

/// What a workload is built with.
public struct WorkloadContext: Sendable {
    /// A fresh, empty directory on the benchmark disk, removed after the benchmark.
    public var directory: String
    public var profile: BenchmarkProfile
    public var threads: Int
}

/// One benchmarked operation and its state. `perform` is called from `threads` threads at once
/// when the spec says so; single-threaded workloads may keep unsynchronised state.
public protocol Workload: AnyObject, Sendable {
    /// Performs operation number `index` (a running count over the whole benchmark, so that
    /// payloads cycle) on worker `thread`.
    func perform(thread: Int, index: Int) throws
    /// Cumulative counters (records, fdatasyncs, bytes…); the summary reports their change over
    /// the measured iterations. Read between iterations only.
    var counters: [String: Double] { get }
    /// Facts to print with the figures (e.g. the SQLite journal mode actually in effect).
    var facts: [String: String] { get }
    func close() throws
}

extension Workload {
    public var counters: [String: Double] { [:] }
    public var facts: [String: String] { [:] }
    public func close() throws {}
}

/// A framework custom metric computed from the change of the workload's counters over one
/// iteration, multiplied by `scale` and rounded (the framework stores integers).
public struct DerivedMetric: Sendable {
    public var metric: BenchmarkMetric
    public var scale: Double
    public var value: @Sendable (_ delta: [String: Double]) -> Double?

    public init(
        metric: BenchmarkMetric, scale: Double = 1, value: @escaping @Sendable (_ delta: [String: Double]) -> Double?
    ) {
        self.metric = metric
        self.scale = scale
        self.value = value
    }

    /// `numerator / denominator` of two counters, e.g. records per fdatasync.
    public static func ratio(_ name: String, _ numerator: String, per denominator: String, scale: Double = 100)
        -> DerivedMetric
    {
        DerivedMetric(metric: .custom(name, polarity: .prefersLarger, useScalingFactor: false), scale: scale) { delta in
            guard let top = delta[numerator], let bottom = delta[denominator], bottom > 0 else { return nil }
            return top / bottom
        }
    }
}

/// How to build and drive one benchmark.
public struct WorkloadSpec: Sendable {
    /// Stable key used by `summarize.py` (e.g. `P1.logstore`); keep it when renaming `name`.
    public var id: String
    /// The package-benchmark name (what `--filter` matches). Benchmarks run sorted by name.
    public var name: String
    public var threads: Int
    /// Operations per framework iteration (split evenly over the threads). `.one` makes the
    /// framework's wall-clock percentiles per-operation latencies; use `.kilo` for fast
    /// operations and for several threads.
    public var operationsPerIteration: BenchmarkScalingFactor {
        BenchmarkScalingFactor(rawValue: operationsPerIterationCount) ?? .one
    }
    let operationsPerIterationCount: Int
    /// Payload bytes per operation, for MB/s (0: not reported).
    public var bytesPerOperation: Int
    /// Untimed operations in setup, before the first measured iteration.
    public var warmupOperations: Int
    public var maxDuration: Duration
    public var derivedMetrics: [DerivedMetric]
    public var make: @Sendable (WorkloadContext) throws -> any Workload

    public init(
        id: String, name: String, threads: Int = 1, operationsPerIteration: BenchmarkScalingFactor = .one,
        bytesPerOperation: Int = 0, warmupOperations: Int = 100, maxDuration: Duration = .seconds(4),
        derivedMetrics: [DerivedMetric] = [], make: @escaping @Sendable (WorkloadContext) throws -> any Workload
    ) {
        self.id = id
        self.name = name
        self.threads = threads
        operationsPerIterationCount = operationsPerIteration.rawValue
        self.bytesPerOperation = bytesPerOperation
        self.warmupOperations = warmupOperations
        self.maxDuration = maxDuration
        self.derivedMetrics = derivedMetrics
        self.make = make
    }
}

/// Registers `spec` with package-benchmark.
/// `$LOGSTORE_BENCH_DURATION_SCALE` (default 1): multiplies every benchmark's measuring time.
/// `run.sh` sets 0.5 for its default profile, so three suites' worth of benchmarks fit in a short run.
let durationScale: Double = {
    guard let text = ProcessInfo.processInfo.environment["LOGSTORE_BENCH_DURATION_SCALE"],
        let value = Double(text), value > 0
    else { return 1 }
    return value
}()

public func register(_ spec: WorkloadSpec) {
    let profile = BenchmarkProfile.current
    let run = WorkloadRun(spec: spec, profile: profile)
    let configuration = Benchmark.Configuration(
        metrics: [.wallClock, .throughput] + spec.derivedMetrics.map(\.metric),
        warmupIterations: 0,
        scalingFactor: profile.isSmoke ? .one : spec.operationsPerIteration,
        maxDuration: profile.isSmoke ? .seconds(1) : spec.maxDuration * durationScale,
        maxIterations: profile.isSmoke ? 1 : 1_000_000_000,
        setup: { try run.setUp() },
        teardown: { try run.tearDown() }
    )
    Benchmark(spec.name, configuration: configuration) { (benchmark: Benchmark) throws in
        try run.iterate(benchmark)
    }
}

/// The state of one benchmark in its process (each benchmark runs in a process of its own).
final class WorkloadRun: @unchecked Sendable {
    let spec: WorkloadSpec
    let profile: BenchmarkProfile
    var workload: (any Workload)?
    var directory = ""
    var nextIndex = 0
    var iterations = 0
    var operations = 0
    var nanoseconds: UInt64 = 0
    var latencies: [UInt64] = []
    var countersAtStart: [String: Double] = [:]

    init(spec: WorkloadSpec, profile: BenchmarkProfile) {
        self.spec = spec
        self.profile = profile
    }

    func setUp() throws {
        directory = try BenchmarkDirectory.make(for: spec.id)
        let workload = try spec.make(WorkloadContext(directory: directory, profile: profile, threads: spec.threads))
        self.workload = workload
        let warmup = profile.isSmoke ? min(spec.warmupOperations, spec.threads) : spec.warmupOperations
        if warmup > 0 { _ = try execute(workload, operations: warmup) }
        countersAtStart = workload.counters
        latencies.reserveCapacity(1 << 16)
    }

    func iterate(_ benchmark: Benchmark) throws {
        guard let workload else { throw HarnessError("setup did not run") }
        let before = spec.derivedMetrics.isEmpty ? [:] : workload.counters
        let (elapsed, samples) = try execute(workload, operations: benchmark.scaledIterations.count)
        iterations += 1
        operations += samples.count
        nanoseconds += elapsed
        latencies.append(contentsOf: samples)
        if !spec.derivedMetrics.isEmpty {
            let delta = Self.delta(workload.counters, since: before)
            for derived in spec.derivedMetrics {
                if let value = derived.value(delta) {
                    benchmark.measurement(derived.metric, Int((value * derived.scale).rounded()))
                }
            }
        }
    }

    func tearDown() throws {
        guard let workload else { return }
        let delta = Self.delta(workload.counters, since: countersAtStart)
        let facts = workload.facts
        try workload.close()
        self.workload = nil
        let fileSystem = BenchmarkDirectory.fileSystemType(of: directory)
        BenchmarkDirectory.remove(directory)
        try SummaryWriter.append(summary(counters: delta, facts: facts, fileSystem: fileSystem))
    }

    /// Runs `operations` operations over `spec.threads` threads; returns the elapsed wall time
    /// (from when every thread is ready) and one latency sample per operation.
    func execute(_ workload: any Workload, operations: Int) throws -> (UInt64, [UInt64]) {
        let threads = spec.threads
        if threads == 1 {
            var samples = [UInt64](repeating: 0, count: operations)
            let base = nextIndex
            nextIndex += operations
            let start = monotonicNanoseconds()
            var previous = start
            for i in 0..<operations {
                try workload.perform(thread: 0, index: base + i)
                let now = monotonicNanoseconds()
                samples[i] = now - previous
                previous = now
            }
            return (previous - start, samples)
        }
        let perThread = max(1, operations / threads)
        let base = nextIndex
        nextIndex += perThread * threads
        let gang = Gang(threads: threads)
        let results = ThreadResults(threads: threads)
        for thread in 0..<threads {
            let worker = Thread {
                var samples = [UInt64](repeating: 0, count: perThread)
                var failure: (any Error)?
                gang.arriveAndWaitForStart()
                var previous = monotonicNanoseconds()
                do {
                    for i in 0..<perThread {
                        try workload.perform(thread: thread, index: base + thread * perThread + i)
                        let now = monotonicNanoseconds()
                        samples[i] = now - previous
                        previous = now
                    }
                } catch {
                    failure = error
                }
                results.store(thread: thread, samples: samples, error: failure)
                gang.finish()
            }
            worker.start()
        }
        let start = gang.startWhenAllArrived()
        gang.waitUntilAllFinished()
        let elapsed = monotonicNanoseconds() - start
        return (elapsed, try results.collect())
    }

    static func delta(_ after: [String: Double], since before: [String: Double]) -> [String: Double] {
        after.reduce(into: [:]) { result, entry in result[entry.key] = entry.value - (before[entry.key] ?? 0) }
    }

    func summary(counters: [String: Double], facts: [String: String], fileSystem: String) -> [String: Any] {
        latencies.sort()
        func percentile(_ p: Double) -> Double {
            guard !latencies.isEmpty else { return 0 }
            let rank = min(latencies.count - 1, max(0, Int((p / 100 * Double(latencies.count)).rounded(.up)) - 1))
            return Double(latencies[rank]) / 1_000
        }
        // The tail: operations at least 20× the median, and their share of the measured time
        // (stalls such as a sync at the unsynced bound, a roll, a checkpoint).
        let tailThreshold = latencies.isEmpty ? 0 : latencies[latencies.count / 2] * 20
        let tail = latencies.reversed().prefix { $0 >= tailThreshold && tailThreshold > 0 }
        let latencyTotal = latencies.reduce(0, +)
        let seconds = Double(nanoseconds) / 1e9
        let opsPerSecond = seconds > 0 ? Double(operations) / seconds : 0
        var summary: [String: Any] = [
            "id": spec.id,
            "name": spec.name,
            "profile": profile.rawValue,
            "threads": spec.threads,
            "iterations": iterations,
            "operations": operations,
            "seconds": seconds,
            "opsPerSecond": opsPerSecond,
            "latencyMicroseconds": [
                "p50": percentile(50), "p90": percentile(90), "p99": percentile(99),
                "p999": percentile(99.9), "max": percentile(100),
                "mean": operations > 0 ? Double(latencies.reduce(0, +)) / Double(operations) / 1_000 : 0,
            ],
            "tail": [
                "thresholdMicroseconds": Double(tailThreshold) / 1_000,
                "operations": tail.count,
                "shareOfTime": latencyTotal > 0 ? Double(tail.reduce(0, +)) / Double(latencyTotal) : 0,
            ],
            "pass": Int(ProcessInfo.processInfo.environment["LOGSTORE_BENCH_PASS"] ?? "") ?? 1,
            "counters": counters,
            "facts": facts,
            "fileSystem": fileSystem,
        ]
        if spec.bytesPerOperation > 0 {
            summary["bytesPerOperation"] = spec.bytesPerOperation
            summary["megabytesPerSecond"] = opsPerSecond * Double(spec.bytesPerOperation) / 1e6
        }
        return summary
    }
}

public struct HarnessError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Monotonic clock in nanoseconds (vDSO `clock_gettime`, ~20 ns).
@inline(__always)
public func monotonicNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

/// Starts worker threads together and waits for them all.
final class Gang: @unchecked Sendable {
    private let condition = NSCondition()
    private let threads: Int
    private var arrived = 0
    private var finished = 0
    private var started = false

    init(threads: Int) { self.threads = threads }

    func arriveAndWaitForStart() {
        condition.lock()
        arrived += 1
        condition.broadcast()
        while !started { condition.wait() }
        condition.unlock()
    }

    /// Waits until every worker is ready, releases them, and returns the start time.
    func startWhenAllArrived() -> UInt64 {
        condition.lock()
        while arrived < threads { condition.wait() }
        let start = monotonicNanoseconds()
        started = true
        condition.broadcast()
        condition.unlock()
        return start
    }

    func finish() {
        condition.lock()
        finished += 1
        condition.broadcast()
        condition.unlock()
    }

    func waitUntilAllFinished() {
        condition.lock()
        while finished < threads { condition.wait() }
        condition.unlock()
    }
}

final class ThreadResults: @unchecked Sendable {
    private let lock = NSLock()
    private var samples: [[UInt64]]
    private var error: (any Error)?

    init(threads: Int) { samples = Array(repeating: [], count: threads) }

    func store(thread: Int, samples: [UInt64], error: (any Error)?) {
        lock.lock()
        defer { lock.unlock() }
        self.samples[thread] = samples
        if self.error == nil { self.error = error }
    }

    func collect() throws -> [UInt64] {
        lock.lock()
        defer { lock.unlock() }
        if let error { throw error }
        return samples.flatMap { $0 }
    }
}

/// Appends summaries as JSON lines to `$LOGSTORE_BENCH_SUMMARY` (nothing when unset).
enum SummaryWriter {
    static func append(_ summary: [String: Any]) throws {
        guard let path = ProcessInfo.processInfo.environment["LOGSTORE_BENCH_SUMMARY"], !path.isEmpty else { return }
        var data = try JSONSerialization.data(withJSONObject: summary, options: [.sortedKeys])
        data.append(UInt8(ascii: "\n"))
        if !FileManager.default.fileExists(atPath: path) {
            _ = FileManager.default.createFile(atPath: path, contents: nil)
        }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: data)
    }
}

/// Where benchmark files go: `$LOGSTORE_BENCH_DIR`, else `Benchmarks/.cache/work` (git-ignored,
/// on the same disk as the checkout; `/tmp` may be a tmpfs, where fdatasync costs nothing).
public enum BenchmarkDirectory {
    public static let base: String = {
        if let path = ProcessInfo.processInfo.environment["LOGSTORE_BENCH_DIR"], !path.isEmpty { return path }
        // …/Benchmarks/Sources/BenchmarkSupport/Harness.swift → …/Benchmarks/.cache/work
        return URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".cache/work").path
    }()

    /// A fresh empty directory for benchmark `id`.
    public static func make(for id: String) throws -> String {
        let path = base + "/" + id + "-" + String(getpid())
        remove(path)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let type = fileSystemType(of: path)
        if type == "tmpfs" || type == "ramfs" {
            FileHandle.standardError.write(
                Data(
                    "warning: \(path) is on \(type); fdatasync figures are meaningless there. Set LOGSTORE_BENCH_DIR to a real disk.\n"
                        .utf8))
        }
        return path
    }

    /// Removes the directory and flushes the file system, so that the next benchmark does not
    /// pay for this one's writeback.
    public static func remove(_ path: String) {
        try? FileManager.default.removeItem(atPath: path)
        sync()
    }

    /// The type of the file system holding `path`, from the longest matching mount point in
    /// `/proc/self/mounts` ("unknown" elsewhere).
    public static func fileSystemType(of path: String) -> String {
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        guard let mounts = try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8) else { return "unknown" }
        var best: (mountPoint: String, type: String)?
        for line in mounts.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count >= 3 else { continue }
            let mountPoint = fields[1].replacingOccurrences(of: "\\040", with: " ")
            let inside = mountPoint == "/" || resolved == mountPoint || resolved.hasPrefix(mountPoint + "/")
            if inside, mountPoint.count >= (best?.mountPoint.count ?? -1) {
                best = (mountPoint, String(fields[2]))
            }
        }
        return best?.type ?? "unknown"
    }
}
