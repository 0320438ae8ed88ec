import Foundation
import LogStore
import LogStoreEngine

// The issue-12 workloads (ProcessBenchmarks): durable saves from savers in one or two processes,
// remote-change latency and an idle reader's CPU, catch-up per foreign transaction, and the
// "anything new?" check. See ProcessWorkloads.swift for the child and the registration.

/// Trip numbers of the child's savers (the parent's start at 0).
let childIndexBase = 500_000_000

/// Durable saves of one new Trip (new context per save) by `localThreads` savers in this process
/// and `childThreads` in a child process, over the same wall-clock window: each round sends the
/// child the window's start and end (monotonic nanoseconds, 20 ms ahead) and runs the local
/// savers over it. Operations are the saves of both processes; the time is from the window's
/// start to the last save's return in either.
public final class SaverWindowWorkload: ProcessWorkload, @unchecked Sendable {
    // @unchecked: the harness drives it from one thread at a time.
    let container: ModelContainer
    let store: LogStore
    let gang: SaverGang
    let child: ChildProcess?
    let shared: Bool
    let window: UInt64
    var saves = 0
    var childSaves = 0
    /// CPU time of both processes over the rounds (the parent's includes the harness's idle
    /// threads, the child's its command loop).
    var cpuMicroseconds = 0

    public init(context: WorkloadContext, localThreads: Int, childThreads: Int, shared: Bool) throws {
        precondition(childThreads == 0 || shared, "two writing processes need allowsOtherWriters")
        let directory = context.directory + "/store"
        self.shared = shared
        window = context.profile.isSmoke ? 100_000_000 : 1_000_000_000
        container = try ModelContainer(
            for: tripModels, configuration: processStoreConfiguration(directory: directory, shared: shared))
        store = try container.dataStore(as: LogStore.self).unwrap(or: "the container's store is not a LogStore")
        gang = SaverGang(container: container, threads: localThreads, indexBase: 0)
        let warmup = context.profile.isSmoke ? 2 : 200
        try gang.saveSerially(warmup)
        if childThreads > 0 {
            let child = try ChildProcess(
                role: "savers",
                parameters: [
                    "STORE": directory, "THREADS": String(childThreads), "INDEX_BASE": String(childIndexBase),
                    "DURABILITY": "synchronous",
                ])
            self.child = child
            _ = try child.channel.request("warm \(warmup)", expecting: "ok")
        } else {
            child = nil
        }
    }

    public func round() throws -> ProcessRound {
        let childBefore = try child.map { try ProcessUsage(fields: try $0.channel.request("usage", expecting: "usage")) }
        let before = ProcessUsage.now()
        let start = monotonicNanoseconds() + 20_000_000
        let end = start + window
        if let child { try child.channel.send("window \(start) \(end)") }
        var result = try gang.window(start: start, end: end)
        cpuMicroseconds += (ProcessUsage.now() - before).cpuMicroseconds
        saves += result.saves
        if let child, let childBefore {
            let remote = try SaverWindow(fields: try child.channel.request("", expecting: "result", receiveOnly: true))
            childSaves += remote.saves
            result.saves += remote.saves
            result.lastReturn = max(result.lastReturn, remote.lastReturn)
            result.latencies += remote.latencies
            let childAfter = try ProcessUsage(fields: try child.channel.request("usage", expecting: "usage"))
            cpuMicroseconds += (childAfter - childBefore).cpuMicroseconds
        }
        return ProcessRound(operations: result.saves, nanoseconds: result.lastReturn - start, latencies: result.latencies)
    }

    public var counters: [String: Double] {
        let statistics = store.logStatistics
        var counters = [
            "saves": Double(saves + childSaves), "childSaves": Double(childSaves),
            "fdatasyncs": Double(statistics.syncCount), "turns": Double(statistics.turnCount),
            "caughtUpRecords": Double(statistics.caughtUpRecordCount),
            "cpuMicroseconds": Double(cpuMicroseconds), "syncsCoveredElsewhere": Double(statistics.syncsCoveredElsewhere),
        ]
        if let child, let remote = try? ChildStatistics(child) {
            counters["childFdatasyncs"] = remote.syncs
            counters["childTurns"] = remote.turns
            counters["childCaughtUpRecords"] = remote.caughtUp
        }
        // Records per fdatasync over both processes (each record is one save's transaction).
        counters["records"] = counters["saves"]
        counters["fdatasyncs"] = (counters["fdatasyncs"] ?? 0) + (counters["childFdatasyncs"] ?? 0)
        return counters
    }

    public var facts: [String: String] {
        [
            "store": "LogStore", "layer": SaveLayer.contextPerSave.label, "allowsOtherWriters": String(shared),
            "processes": child == nil ? "1" : "2", "localThreads": String(gang.threads),
            "windowMilliseconds": String(window / 1_000_000),
        ]
    }

    public func close() throws {
        try child?.stop()
        try store.close()
    }
}

extension LineChannel {
    /// `request` without sending: the answer to a command sent earlier.
    func request(_ unused: String, expecting expected: String, receiveOnly: Bool) throws -> [Substring] {
        precondition(receiveOnly)
        let answer = try receive()
        let fields = answer.split(separator: " ", omittingEmptySubsequences: true)
        guard let first = fields.first, first == expected else {
            throw HarnessError("the child answered \"\(answer.prefix(300))\", expected \(expected)")
        }
        return Array(fields.dropFirst())
    }
}

/// Arrival times of remote changes, filled by the task iterating `remoteChanges`.
final class Arrivals: @unchecked Sendable {
    // @unchecked: every field is under `condition`.
    private let condition = NSCondition()
    private var times: [UInt64] = []
    private var failure: (any Error)?

    func append(_ time: UInt64) {
        condition.withLock {
            times.append(time)
            condition.broadcast()
        }
    }

    func fail(_ error: any Error) {
        condition.withLock {
            failure = error
            condition.broadcast()
        }
    }

    var count: Int { condition.withLock { times.count } }

    /// Waits until at least `count` arrivals (at most `timeout` seconds), then returns them all.
    func wait(for count: Int, timeout: Double) throws -> [UInt64] {
        let deadline = Date(timeIntervalSinceNow: timeout)
        return try condition.withLock {
            // Bounded by the deadline.
            while times.count < count && failure == nil {
                guard condition.wait(until: deadline) else { break }
            }
            if let failure { throw failure }
            guard times.count >= count else {
                throw HarnessError("\(times.count) remote changes arrived within \(timeout) s, expected \(count)")
            }
            return times
        }
    }
}

/// How the process that waits for remote changes opens the store.
public enum RemoteReader: String, Sendable {
    /// A writer too (`allowsOtherWriters`), as an app beside its writing widget.
    case sharedWriter = "allowsOtherWriters writer"
    /// `allowsSave: false`: a follower that never takes the turn.
    case readOnly = "read-only"
}

/// Remote-change latency: a child saves one Trip at a time (every 20 ms, so notifications do not
/// merge); this process iterates `LogStore.remoteChanges` and notes when each token arrives. A
/// sample is the arrival minus the child's `save()` call (from the save's start: its own
/// fdatasync included); the arrival minus the save's return is in the facts (it can be
/// negative: the other process may be told before the saver's thread wakes). `finish` then
/// measures this process's CPU time and context switches over `idleSeconds` with no saves, the
/// iterator still waiting (and the idle saver's too).
public final class RemoteChangeLatencyWorkload: ProcessWorkload, @unchecked Sendable {
    // @unchecked: the harness drives it from one thread at a time; `arrivals` is locked.
    let reader: RemoteReader
    let container: ModelContainer
    let store: LogStore
    let child: ChildProcess
    let arrivals = Arrivals()
    let task: Task<Void, Never>
    let savesPerRound: Int
    let interval: UInt64 = 20_000_000
    let idleSeconds: Double
    var expected = 0
    var fromReturn: [Int64] = []
    var idle: ProcessUsage?
    var childIdle: ProcessUsage?

    public init(context: WorkloadContext, reader: RemoteReader) throws {
        self.reader = reader
        let directory = context.directory + "/store"
        savesPerRound = context.profile.isSmoke ? 3 : 25
        idleSeconds = context.profile.isSmoke ? 0.5 : 5
        // The store exists before the read-only reader opens it (it never creates one).
        let first = try ModelContainer(
            for: tripModels, configuration: processStoreConfiguration(directory: directory, shared: true))
        try first.dataStore(as: LogStore.self)?.close()
        var configuration = processStoreConfiguration(directory: directory, shared: reader == .sharedWriter)
        configuration.allowsSave = reader == .sharedWriter
        container = try ModelContainer(for: tripModels, configuration: configuration)
        store = try container.dataStore(as: LogStore.self).unwrap(or: "the container's store is not a LogStore")
        child = try ChildProcess(
            role: "savers",
            parameters: [
                "STORE": directory, "THREADS": "1", "INDEX_BASE": String(childIndexBase), "DURABILITY": "synchronous",
            ])
        let changes = store.remoteChanges(after: store.currentToken)
        let arrivals = arrivals
        task = Task.detached {
            do {
                for try await _ in changes { arrivals.append(monotonicNanoseconds()) }
            } catch {
                arrivals.fail(error)
            }
        }
        // Warm-up: a few paced saves, their notifications awaited and dropped from the count.
        _ = try child.channel.request("paced 3 \(interval)", expecting: "times")
        expected = 3
        _ = try arrivals.wait(for: expected, timeout: 10)
    }

    public func round() throws -> ProcessRound {
        let fields = try child.channel.request("paced \(savesPerRound) \(interval)", expecting: "times")
        let times: [(called: UInt64, returned: UInt64)] = try fields.first.unwrap(or: "no times")
            .split(separator: ",").map { pair in
                let parts = pair.split(separator: ":")
                guard parts.count == 2, let called = UInt64(parts[0]), let returned = UInt64(parts[1]) else {
                    throw HarnessError("bad save time \(pair)")
                }
                return (called, returned)
            }
        guard times.count == savesPerRound else { throw HarnessError("\(times.count) save times, expected \(savesPerRound)") }
        let all = try arrivals.wait(for: expected + savesPerRound, timeout: 10)
        // One token per save, in order (only the child saves).
        let arrived = all[expected..<(expected + savesPerRound)]
        expected += savesPerRound
        var latencies: [UInt64] = []
        for (time, arrival) in zip(times, arrived) {
            guard arrival >= time.called else { throw HarnessError("a remote change arrived before its save began") }
            latencies.append(arrival - time.called)
            fromReturn.append(Int64(arrival) - Int64(time.returned))
        }
        let elapsed = arrived.last! - times.first!.called
        return ProcessRound(operations: savesPerRound, nanoseconds: elapsed, latencies: latencies)
    }

    public func finish() throws {
        let childBefore = try ProcessUsage(fields: try child.channel.request("usage", expecting: "usage"))
        let before = ProcessUsage.now()
        let arrivedBefore = arrivals.count
        usleep(useconds_t(idleSeconds * 1_000_000))
        idle = ProcessUsage.now() - before
        childIdle = try ProcessUsage(fields: try child.channel.request("usage", expecting: "usage")) - childBefore
        guard arrivals.count == arrivedBefore else { throw HarnessError("a remote change arrived while nobody saved") }
    }

    public var counters: [String: Double] {
        ["notifications": Double(arrivals.count)]
    }

    public var facts: [String: String] {
        let sorted = fromReturn.sorted()
        func percentile(_ p: Double) -> String {
            guard !sorted.isEmpty else { return "" }
            let rank = min(sorted.count - 1, max(0, Int((p / 100 * Double(sorted.count)).rounded(.up)) - 1))
            return String(format: "%.1f", Double(sorted[rank]) / 1_000)
        }
        var facts = [
            "store": "LogStore", "reader": reader.rawValue, "saver": "allowsOtherWriters writer, 1 thread, synchronous",
            "watch": store.changeWatchMechanism.map { "\($0)" } ?? "none",
            "fromReturnP50Microseconds": percentile(50), "fromReturnP99Microseconds": percentile(99),
            "fromReturnMinMicroseconds": percentile(0), "fromReturnMaxMicroseconds": percentile(100),
            "saveIntervalMilliseconds": String(interval / 1_000_000), "idleSeconds": String(idleSeconds),
        ]
        if let idle {
            facts["idleReaderCPUMicroseconds"] = String(idle.cpuMicroseconds)
            facts["idleReaderVoluntarySwitches"] = String(idle.voluntarySwitches)
            facts["idleReaderInvoluntarySwitches"] = String(idle.involuntarySwitches)
        }
        if let childIdle {
            facts["idleSaverCPUMicroseconds"] = String(childIdle.cpuMicroseconds)
            facts["idleSaverVoluntarySwitches"] = String(childIdle.voluntarySwitches)
        }
        return facts
    }

    public func close() throws {
        task.cancel()
        try child.stop()
        try store.close()
    }
}

/// Catch-up per foreign transaction: each round a child (an `allowsOtherWriters` writer,
/// durability `.none` and no idle durable-end marks, so nothing it writes is published as durable
/// and this process's change watcher leaves it alone — an idle child's mark synced and published
/// its records, and the watcher read some before the turn) saves `backlog` one-Trip transactions; then this process saves one
/// Trip — its turn catches up with the backlog (reads and checks the records) and folds them
/// into its working state and unique index before resolving — and saves one more with nothing
/// to fold. Both saves are `.none` here too (no fdatasync in the timing). The sample is
/// (first save − second save) ÷ the records the turn folded (the backlog, less any this process
/// read before the turn: such rounds are counted): what one foreign transaction adds to a turn.
/// Operations are the folded transactions, the time the extra time they cost.
public final class CatchUpWorkload: ProcessWorkload, @unchecked Sendable {
    // @unchecked: the harness drives it from one thread at a time.
    let container: ModelContainer
    let store: LogStore
    let gang: SaverGang
    let child: ChildProcess
    let backlog: Int
    var turnsWithBacklog: [UInt64] = []
    var turnsWithout: [UInt64] = []
    var folded = 0
    /// Rounds whose turn folded only part of the backlog: this process had read the rest before
    /// the turn (following the other process outside a turn).
    var partialRounds = 0

    public init(context: WorkloadContext, backlog: Int) throws {
        let directory = context.directory + "/store"
        self.backlog = context.profile.isSmoke ? 10 : backlog
        container = try ModelContainer(
            for: tripModels,
            configuration: processStoreConfiguration(directory: directory, shared: true, durability: .none, idleMarks: false))
        store = try container.dataStore(as: LogStore.self).unwrap(or: "the container's store is not a LogStore")
        gang = SaverGang(container: container, threads: 1, indexBase: 0)
        try gang.saveSerially(context.profile.isSmoke ? 2 : 200)
        child = try ChildProcess(
            role: "savers",
            parameters: [
                "STORE": directory, "THREADS": "1", "INDEX_BASE": String(childIndexBase), "DURABILITY": "none",
                "IDLE_MARKS": "off",
            ])
        // Enough that the child's early roll to a segment with a dictionary (FORMAT.md §6.8: once
        // it holds 32 KiB of samples) happens here, not in a measured round (one more record).
        _ = try child.channel.request("warm \(context.profile.isSmoke ? 10 : 600)", expecting: "ok")
        try gang.saveSerially(10)
    }

    public func round() throws -> ProcessRound {
        _ = try child.channel.request("warm \(backlog)", expecting: "ok")
        let caughtUpBefore = store.logStatistics.caughtUpRecordCount
        let start = monotonicNanoseconds()
        try gang.save(thread: 0)
        let middle = monotonicNanoseconds()
        try gang.save(thread: 0)
        let end = monotonicNanoseconds()
        let caughtUp = store.logStatistics.caughtUpRecordCount - caughtUpBefore
        // The turn folds what this process had not read yet: the whole backlog, unless it read
        // some of the child's records before the turn (one round of a full run: 988 of 1,000).
        // The cost is divided by what the turn folded; a turn that folded none, or more than the
        // child wrote, is a broken round.
        guard caughtUp > 0, caughtUp <= UInt64(backlog) else {
            throw HarnessError("the turn caught up with \(caughtUp) records, the child wrote \(backlog)")
        }
        if caughtUp < UInt64(backlog) { partialRounds += 1 }
        let withBacklog = middle - start
        let without = end - middle
        turnsWithBacklog.append(withBacklog)
        turnsWithout.append(without)
        folded += Int(caughtUp)
        let extra = withBacklog > without ? withBacklog - without : 0
        return ProcessRound(operations: Int(caughtUp), nanoseconds: extra, latencies: [extra / caughtUp])
    }

    public var counters: [String: Double] {
        [
            "foldedTransactions": Double(folded), "caughtUpRecords": Double(store.logStatistics.caughtUpRecordCount),
            "partialRounds": Double(partialRounds),
        ]
    }

    public var facts: [String: String] {
        func median(_ values: [UInt64]) -> String {
            guard !values.isEmpty else { return "" }
            return String(format: "%.1f", Double(values.sorted()[values.count / 2]) / 1_000)
        }
        return [
            "store": "LogStore", "backlog": String(backlog), "durability": "none (both processes)",
            "saveWithBacklogMicrosecondsMedian": median(turnsWithBacklog),
            "saveWithoutBacklogMicrosecondsMedian": median(turnsWithout),
        ]
    }

    public func close() throws {
        try child.stop()
        try store.close()
    }
}

/// "Anything new?" when nothing is: one check per operation, alone on the store.
public final class NothingNewWorkload: Workload, @unchecked Sendable {
    // @unchecked: one thread.
    public enum Check: String, Sendable {
        /// `Log.refreshFromOtherWriters()` of an `allowsOtherWriters` writer (what its fetches
        /// and watcher call).
        case sharedWriter = "Log.refreshFromOtherWriters, allowsOtherWriters writer"
        /// `Log.refresh()` of a read-only follower.
        case readOnly = "Log.refresh, read-only follower"
        /// A fetch of one Trip by name, new context, in a store opened with `allowsOtherWriters`
        /// (it checks first) …
        case fetchShared = "fetch of one Trip by name, allowsOtherWriters store"
        /// … and in one opened without it (no check).
        case fetchAlone = "fetch of one Trip by name, store opened alone"
    }

    let check: Check
    let log: Log?
    let container: ModelContainer?
    let store: LogStore?
    let trips = 100
    var checks = 0

    public init(directory: String, check: Check) throws {
        self.check = check
        let path = directory + "/store"
        // The store: 100 Trips, so that a fetch has something to find (and scans little: the
        // check's share of a fetch shows).
        let shared = check != .fetchAlone
        let seeding = try ModelContainer(
            for: tripModels, configuration: processStoreConfiguration(directory: path, shared: shared))
        let context = ModelContext(seeding)
        for index in 0..<trips { context.insert(Trip(TripValues(index: index))) }
        try context.save()
        switch check {
        case .sharedWriter, .readOnly:
            try seeding.dataStore(as: LogStore.self)?.close()
            if check == .sharedWriter {
                var options = LogOptions()
                options.allowsOtherWriters = true
                log = try Log.open(directory: path, options: options)
            } else {
                log = try Log.openReadOnly(directory: path)
            }
            container = nil
            store = nil
        case .fetchShared, .fetchAlone:
            log = nil
            container = seeding
            store = seeding.dataStore(as: LogStore.self)
        }
    }

    public func perform(thread: Int, index: Int) throws {
        switch check {
        case .sharedWriter:
            guard try !log!.refreshFromOtherWriters() else { throw HarnessError("something new in a store nobody writes") }
        case .readOnly:
            guard try !log!.refresh() else { throw HarnessError("something new in a store nobody writes") }
        case .fetchShared, .fetchAlone:
            let name = TripValues(index: (index &* 7_919) % trips).name
            let found = try ModelContext(container!).fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.name == name }))
            guard found.count == 1 else { throw HarnessError("found \(found.count) Trips named \(name)") }
        }
        checks += 1
    }

    public var counters: [String: Double] { ["checks": Double(checks)] }

    public var facts: [String: String] { ["store": "LogStore", "check": check.rawValue, "trips": String(trips)] }

    public func close() throws {
        try log?.close()
        try store?.close()
    }
}
