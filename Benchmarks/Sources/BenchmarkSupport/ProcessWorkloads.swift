import Benchmark
import Foundation
import LogStore
import LogStoreEngine

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

// Issue 12 (several processes, one store), measured with real processes: the benchmark binary
// runs itself again as a child (ProcessChannel.swift). These benchmarks do not fit the harness's
// "N operations over T threads" loop (two processes must save over the same wall-clock window, a
// latency spans two processes), so each is a `ProcessWorkload` whose framework iteration is one
// measured round, registered with `registerProcess(_:)`; the summary line is the harness's own
// (same fields, same `summarize.py`).

/// One measured round of a multi-process benchmark.
public struct ProcessRound: Sendable {
    /// Operations the round counts (saves, folded records, notifications).
    public var operations: Int
    /// The round's measured time.
    public var nanoseconds: UInt64
    /// One latency sample per operation (or per round, when the round is one measurement).
    public var latencies: [UInt64]
}

/// A multi-process benchmark: set up in `init` (stores, children, warm-up), one round per
/// framework iteration, then `finish` (idle measurements), `facts`, `close`.
public protocol ProcessWorkload: AnyObject, Sendable {
    func round() throws -> ProcessRound
    /// Cumulative counters; the summary reports their change over the measured rounds.
    var counters: [String: Double] { get }
    var facts: [String: String] { get }
    /// After the last round, before `facts`: measurements that need the set-up still running.
    func finish() throws
    func close() throws
}

extension ProcessWorkload {
    public var counters: [String: Double] { [:] }
    public func finish() throws {}
}

/// How to build one multi-process benchmark.
public struct ProcessSpec: Sendable {
    public var id: String
    public var name: String
    /// Threads (savers) in all processes, for the summary.
    public var threads: Int
    public var maxDuration: Duration
    public var make: @Sendable (WorkloadContext) throws -> any ProcessWorkload

    public init(
        id: String, name: String, threads: Int = 1, maxDuration: Duration = .seconds(4),
        make: @escaping @Sendable (WorkloadContext) throws -> any ProcessWorkload
    ) {
        self.id = id
        self.name = name
        self.threads = threads
        self.maxDuration = maxDuration
        self.make = make
    }
}

/// Registers `spec` with package-benchmark; its teardown appends the harness's summary line.
public func registerProcess(_ spec: ProcessSpec) {
    let profile = BenchmarkProfile.current
    let run = ProcessRun(spec: spec, profile: profile)
    let configuration = Benchmark.Configuration(
        metrics: [.wallClock, .throughput],
        warmupIterations: 0,
        scalingFactor: .one,
        maxDuration: profile.isSmoke ? .seconds(1) : spec.maxDuration * durationScale,
        maxIterations: profile.isSmoke ? 2 : 1_000_000,
        setup: { try run.setUp() },
        teardown: { try run.tearDown() }
    )
    Benchmark(spec.name, configuration: configuration) { (benchmark: Benchmark) throws in
        try run.iterate()
    }
}

final class ProcessRun: @unchecked Sendable {
    // @unchecked: the framework calls setup, the iterations and teardown one after the other.
    let spec: ProcessSpec
    let summary: WorkloadRun
    var workload: (any ProcessWorkload)?
    var countersAtStart: [String: Double] = [:]

    init(spec: ProcessSpec, profile: BenchmarkProfile) {
        self.spec = spec
        summary = WorkloadRun(
            spec: WorkloadSpec(id: spec.id, name: spec.name, threads: spec.threads, warmupOperations: 0) { _ in
                throw HarnessError("a process benchmark builds its workload itself")
            },
            profile: profile)
    }

    func setUp() throws {
        summary.directory = try BenchmarkDirectory.make(for: spec.id)
        let workload = try spec.make(
            WorkloadContext(directory: summary.directory, profile: summary.profile, threads: spec.threads))
        self.workload = workload
        countersAtStart = workload.counters
    }

    func iterate() throws {
        guard let workload else { throw HarnessError("setup did not run") }
        let round = try workload.round()
        summary.iterations += 1
        summary.operations += round.operations
        summary.nanoseconds += round.nanoseconds
        summary.latencies.append(contentsOf: round.latencies)
    }

    func tearDown() throws {
        guard let workload else { return }
        defer { self.workload = nil }
        do {
            try workload.finish()
        } catch {
            try? workload.close()
            BenchmarkDirectory.remove(summary.directory)
            throw error
        }
        let delta = WorkloadRun.delta(workload.counters, since: countersAtStart)
        let facts = workload.facts
        try workload.close()
        let fileSystem = BenchmarkDirectory.fileSystemType(of: summary.directory)
        BenchmarkDirectory.remove(summary.directory)
        try SummaryWriter.append(summary.summary(counters: delta, facts: facts, fileSystem: fileSystem))
    }
}

// MARK: - Stores and savers shared by parent and child

/// The store configuration every issue-12 benchmark opens (`allowsOtherWriters` when `shared`).
func processStoreConfiguration(
    directory: String, shared: Bool, durability: Durability = .synchronous, idleMarks: Bool = true
) -> LogStoreConfiguration {
    var configuration = LogStoreConfiguration(directory: directory, durability: durability)
    configuration.allowsOtherWriters = shared
    // Without: durable-end marks only at close (an idle writer's mark syncs and publishes).
    if !idleMarks { configuration.durableEndMarkDelay = nil }
    return configuration
}

/// What one window of saves did.
struct SaverWindow {
    var saves = 0
    /// When the last save of the window returned (monotonic nanoseconds).
    var lastReturn: UInt64 = 0
    /// Each save's duration, nanoseconds.
    var latencies: [UInt64] = []

    var line: String {
        "result \(saves) \(lastReturn) " + (latencies.isEmpty ? "-" : latencies.map(String.init).joined(separator: ","))
    }

    init() {}

    init(fields: [Substring]) throws {
        guard fields.count == 3, let saves = Int(fields[0]), let last = UInt64(fields[1]) else {
            throw HarnessError("bad window result: \(fields.prefix(2).joined(separator: " "))")
        }
        self.saves = saves
        lastReturn = last
        latencies = fields[2] == "-" ? [] : try fields[2].split(separator: ",").map {
            try UInt64($0).unwrap(or: "bad latency \($0)")
        }
    }
}

/// `threads` savers on one container, each inserting one new Trip per durable save through a new
/// `ModelContext` (P2-ctx's "context per save"). Trip numbers start at `indexBase` and are
/// distinct per thread and per process, so every insert is an insert.
final class SaverGang: @unchecked Sendable {
    // @unchecked: `next[t]` is touched only by thread t while a window runs, and by the driver
    // between windows.
    let container: ModelContainer
    let threads: Int
    let indexBase: Int
    private var next: [Int]

    init(container: ModelContainer, threads: Int, indexBase: Int) {
        self.container = container
        self.threads = threads
        self.indexBase = indexBase
        next = Array(repeating: 0, count: threads)
    }

    /// One save on thread `thread`'s account.
    func save(thread: Int) throws {
        let index = indexBase + thread * 10_000_000 + next[thread]
        next[thread] += 1
        let context = ModelContext(container)
        context.insert(Trip(TripValues(index: index)))
        try context.save()
    }

    /// `count` saves on the calling thread (warm-up, catch-up backlog).
    func saveSerially(_ count: Int) throws {
        for _ in 0..<count { try save(thread: 0) }
    }

    /// Every thread saves from `start` until `end` (monotonic nanoseconds): a save is started
    /// only before `end`, and counted when it returns.
    func window(start: UInt64, end: UInt64) throws -> SaverWindow {
        let collected = WindowCollector()
        let group = DispatchGroup()
        for thread in 0..<threads {
            group.enter()
            let worker = Thread { [self] in
                var local = SaverWindow()
                local.latencies.reserveCapacity(16_384)
                var error: (any Error)?
                sleepUntil(start)
                do {
                    // Bounded by `end`.
                    while true {
                        let before = monotonicNanoseconds()
                        guard before < end else { break }
                        try save(thread: thread)
                        let after = monotonicNanoseconds()
                        local.saves += 1
                        local.lastReturn = after
                        local.latencies.append(after - before)
                    }
                } catch let caught {
                    error = caught
                }
                collected.add(local, error: error)
                group.leave()
            }
            worker.start()
        }
        group.wait()
        return try collected.result()
    }
}

/// The savers' windows, merged.
final class WindowCollector: @unchecked Sendable {
    // @unchecked: every field is under `lock`.
    private let lock = NSLock()
    private var merged = SaverWindow()
    private var failure: (any Error)?

    func add(_ window: SaverWindow, error: (any Error)?) {
        lock.withLock {
            merged.saves += window.saves
            merged.lastReturn = max(merged.lastReturn, window.lastReturn)
            merged.latencies += window.latencies
            if failure == nil { failure = error }
        }
    }

    func result() throws -> SaverWindow {
        try lock.withLock {
            if let failure { throw failure }
            return merged
        }
    }
}

// MARK: - The child

/// The child side: `$LOGSTORE_BENCH_CHILD` names the role (only `savers` today), the
/// `$LOGSTORE_BENCH_CHILD_*` variables its store and savers. It opens the store, says `ready`,
/// and serves commands until `quit`:
/// - `warm <n>`: n saves on one thread → `ok`;
/// - `window <start> <end>`: the gang saves over that window → `result <saves> <last> <latencies>`;
/// - `paced <n> <interval>`: n saves one after the other, one every interval nanoseconds →
///   `times <t0>:<t1>,…` (each save's call and return);
/// - `usage` → `usage <cpu µs> <voluntary switches> <involuntary switches>`;
/// - `statistics` → `statistics <fdatasyncs> <turns> <records caught up>`;
/// - `quit`: closes the store → `bye`, exits.
public enum ProcessChild {
    /// Runs the child and exits when this process was started as one; returns otherwise.
    public static func runIfRequested() {
        let environment = ProcessInfo.processInfo.environment
        guard let role = environment["LOGSTORE_BENCH_CHILD"], !role.isEmpty else { return }
        let channel = LineChannel(input: 0, output: 1)
        do {
            guard role == "savers" else { throw HarnessError("unknown child role \(role)") }
            try serveSavers(environment: environment, channel: channel)
            exit(0)
        } catch {
            FileHandle.standardError.write(Data("benchmark child (\(role)): \(error)\n".utf8))
            try? channel.send("error \(error)")
            exit(1)
        }
    }

    static func serveSavers(environment: [String: String], channel: LineChannel) throws {
        func parameter(_ key: String) throws -> String {
            try environment["LOGSTORE_BENCH_CHILD_" + key].unwrap(or: "missing $LOGSTORE_BENCH_CHILD_\(key)")
        }
        let directory = try parameter("STORE")
        let threads = try Int(parameter("THREADS")).unwrap(or: "bad THREADS")
        let indexBase = try Int(parameter("INDEX_BASE")).unwrap(or: "bad INDEX_BASE")
        let durability: Durability = try parameter("DURABILITY") == "none" ? .none : .synchronous
        let idleMarks = environment["LOGSTORE_BENCH_CHILD_IDLE_MARKS"] != "off"
        let container = try ModelContainer(
            for: tripModels,
            configuration: processStoreConfiguration(
                directory: directory, shared: true, durability: durability, idleMarks: idleMarks))
        let store = try container.dataStore(as: LogStore.self).unwrap(or: "the container's store is not a LogStore")
        let gang = SaverGang(container: container, threads: threads, indexBase: indexBase)
        try channel.send("ready")
        // Bounded by the parent: it ends with `quit` (or by closing the pipe, which throws).
        while true {
            let fields = try channel.receive().split(separator: " ")
            guard let command = fields.first else { continue }
            do {
                switch command {
                case "warm":
                    try gang.saveSerially(try Int(fields[1]).unwrap(or: "bad count"))
                    try channel.send("ok")
                case "window":
                    let start = try UInt64(fields[1]).unwrap(or: "bad start")
                    let end = try UInt64(fields[2]).unwrap(or: "bad end")
                    try channel.send(try gang.window(start: start, end: end).line)
                case "paced":
                    let count = try Int(fields[1]).unwrap(or: "bad count")
                    let interval = try UInt64(fields[2]).unwrap(or: "bad interval")
                    var times: [String] = []
                    var next = monotonicNanoseconds()
                    for _ in 0..<count {
                        sleepUntil(next)
                        let called = monotonicNanoseconds()
                        try gang.save(thread: 0)
                        let returned = monotonicNanoseconds()
                        times.append("\(called):\(returned)")
                        next = called + interval
                    }
                    try channel.send("times " + times.joined(separator: ","))
                case "usage":
                    try channel.send("usage " + ProcessUsage.now().line)
                case "statistics":
                    let statistics = store.logStatistics
                    try channel.send(
                        "statistics \(statistics.syncCount) \(statistics.turnCount) \(statistics.caughtUpRecordCount)")
                case "quit":
                    try store.close()
                    try channel.send("bye")
                    return
                default:
                    throw HarnessError("unknown command \(command)")
                }
            } catch let error as HarnessError {
                throw error
            } catch {
                try channel.send("error \(error)".replacingOccurrences(of: "\n", with: " "))
                throw error
            }
        }
    }
}

/// The child's log statistics.
struct ChildStatistics {
    var syncs: Double
    var turns: Double
    var caughtUp: Double

    init(_ child: ChildProcess) throws {
        let fields = try child.channel.request("statistics", expecting: "statistics")
        guard fields.count == 3, let syncs = Double(fields[0]), let turns = Double(fields[1]),
            let caughtUp = Double(fields[2])
        else { throw HarnessError("bad statistics line") }
        self.syncs = syncs
        self.turns = turns
        self.caughtUp = caughtUp
    }
}
