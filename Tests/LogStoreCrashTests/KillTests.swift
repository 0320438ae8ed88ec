import Foundation
import LogStore
import LogStoreEngine
import LogStoreTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Real crashes (issue 14): a child process (`Tests/LogStoreCrashChild`) saves from several
/// threads — synchronous, batched or no durability, with checkpoints, history deletions and a
/// consumer's bookmark at random moments — and reports each acknowledged save; the test kills it
/// with SIGKILL at a random moment, reopens the store and checks that every acknowledged save is
/// there and the state is exactly what the acknowledged saves built (a save in flight at the
/// kill may or may not be there; nothing else may). `verify` runs beside the live child and must
/// never report corruption.
///
/// A kill keeps the page cache, so in every durability mode an acknowledged save must survive
/// (a power cut is the simulator's business: `SimulatorTests`).
///
/// Default: 30 kills. `LOGSTORE_KILLS=1000` for the long run; `LOGSTORE_KILL_SEED` changes the
/// seed (printed with the figures).
@Suite struct KillTests {
    /// Must match the child's `schema`.
    static let schema = Schema([
        Schema.Entity(
            "Item",
            attributes: [.init("key", .string), .init("token", .int), .init("payload", .string)])
    ])

    /// Must match the child's `payload(for:)`.
    static func payload(for token: Int64) -> String {
        var mixed = UInt64(bitPattern: token) &* 0x9E37_79B9_7F4A_7C15
        mixed ^= mixed >> 29
        let length = Int(mixed % 6000)
        let unit = "\(token);"
        return String(String(repeating: unit, count: length / unit.count + 1).prefix(length))
    }

    /// The child executable, built beside the test binary (`LOGSTORE_CRASH_CHILD` overrides).
    static func childExecutable() -> URL? {
        let environment = ProcessInfo.processInfo.environment
        if let path = environment["LOGSTORE_CRASH_CHILD"] { return URL(fileURLWithPath: path) }
        let starts = [Bundle.main.executableURL, URL(fileURLWithPath: CommandLine.arguments[0])].compactMap { $0 }
        for start in starts {
            var directory = start.deletingLastPathComponent()
            for _ in 0..<5 {
                let candidate = directory.appendingPathComponent("LogStoreCrashChild")
                if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
                directory = directory.deletingLastPathComponent()
            }
        }
        return nil
    }

    /// A save the child announced.
    struct Announced: Equatable, Sendable {
        enum Operation: String, Sendable { case insert, update, delete }
        var operation: Operation
        var key: String
        var token: Int64
    }

    /// What the child reported, filled by the pipe reader.
    struct Reports: Sendable {
        var ready = false
        /// Per saver, the save announced and not yet acknowledged.
        var inFlight: [Int: Announced] = [:]
        /// Acknowledged saves in the order reported, with their history token.
        var acknowledged: [(save: Announced, offset: UInt64, check: UInt32)] = []
        var failures: [String] = []
    }

    /// The figures of one run.
    struct Figures {
        var kills = 0
        var killedBeforeReady = 0
        var acknowledged = 0
        var lost = 0
        var inFlightApplied = 0
        var inFlightNotApplied = 0
        var verifyRunsBesideWriter = 0
        var historyChecked = 0
    }

    @Test func everyAcknowledgedSaveSurvivesKillNine() throws {
        guard let child = Self.childExecutable() else {
            Issue.record("LogStoreCrashChild not found beside \(CommandLine.arguments[0]); build with --build-tests")
            return
        }
        let environment = ProcessInfo.processInfo.environment
        let kills = environment["LOGSTORE_KILLS"].flatMap(Int.init) ?? 30
        let seed = environment["LOGSTORE_KILL_SEED"].flatMap(UInt64.init) ?? 0x4B11_1E2
        var random = SeededGenerator(seed: seed)
        let temporary = TemporaryDirectory("kills")
        defer { temporary.remove() }
        let directory = temporary.path

        var reference: [String: Int64] = [:]
        var acknowledgedTokens: [UInt64: UInt32] = [:]  // history offset -> check, every generation
        var seenHistory: Set<UInt64> = []
        var figures = Figures()
        for generation in 1...kills {
            let mode = ["sync", "batched", "none"][Int.random(in: 0..<3, using: &random)]
            let savers = Int.random(in: 1...4, using: &random)
            let context = "seed \(seed), generation \(generation) (\(mode), \(savers) savers)"
            let (reports, verified) = try Self.runAndKill(
                child, directory: directory, seed: random.next(), generation: generation, savers: savers,
                mode: mode, killsDuringOpen: Int.random(in: 0..<8, using: &random) == 0,
                delayMicroseconds: UInt32.random(in: 0...250_000, using: &random))
            figures.kills += 1
            figures.verifyRunsBesideWriter += verified.runs
            if !reports.ready { figures.killedBeforeReady += 1 }
            #expect(reports.failures.isEmpty, "\(context): the child reported \(reports.failures)")
            #expect(verified.corruptions.isEmpty, "\(context): verify beside the live writer: \(verified.corruptions)")
            if !reports.failures.isEmpty || !verified.corruptions.isEmpty { return }

            for (save, offset, check) in reports.acknowledged {
                Self.apply(save, to: &reference)
                acknowledgedTokens[offset] = check
            }
            figures.acknowledged += reports.acknowledged.count

            // Reopen as the next writer would, and compare.
            let store = try LogStore(
                LogStoreConfiguration(
                    schema: Self.schema, directory: directory, segmentByteCountMax: 256 * 1024,
                    checkpointIntervalByteCount: 512 * 1024))
            let rows = store.allSnapshots()["Item"] ?? []
            var actual: [String: Int64] = [:]
            for row in rows {
                guard case .string(let key)? = row.values["key"], case .int(let token)? = row.values["token"] else {
                    Issue.record("\(context): a row without key or token: \(row.values)")
                    continue
                }
                #expect(actual.updateValue(token, forKey: key) == nil, "\(context): key \(key) twice")
                #expect(row.values["payload"] == .string(Self.payload(for: token)), "\(context): payload of \(key)")
            }
            // A save in flight at the kill: applied entirely or not at all.
            for save in reports.inFlight.values {
                var applied = reference
                Self.apply(save, to: &applied)
                let touched = actual[save.key]
                if touched == applied[save.key] && touched != reference[save.key] {
                    reference = applied
                    figures.inFlightApplied += 1
                } else {
                    figures.inFlightNotApplied += 1
                }
            }
            let missing = reference.filter { actual[$0.key] != $0.value }
            let extra = actual.filter { reference[$0.key] == nil }
            figures.lost += missing.count
            #expect(missing.isEmpty && extra.isEmpty, "\(context): lost or wrong \(missing.prefix(5)), extra \(extra.prefix(5))")

            // History: every acknowledged save after L, with its check; unacknowledged ones only
            // from saves in flight.
            let mark = store.historyLowWaterMark?.offset ?? 0
            let history = try store.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
            let offsets = Dictionary(uniqueKeysWithValues: history.map { ($0.token.offset, $0.token.check) })
            for (offset, check) in acknowledgedTokens where offset > mark {
                #expect(offsets[offset] == check, "\(context): acknowledged transaction at \(offset) missing from history")
                figures.historyChecked += 1
            }
            let unknown = offsets.keys.filter { acknowledgedTokens[$0] == nil && !seenHistory.contains($0) }
            #expect(unknown.count <= reports.inFlight.count, "\(context): history holds unacknowledged \(unknown)")
            seenHistory.formUnion(offsets.keys)
            acknowledgedTokens = acknowledgedTokens.filter { $0.key > mark }
            seenHistory = seenHistory.filter { $0 > mark }
            try store.close()
            let report = try Log.verify(directory: directory)
            #expect(!report.hasCorruption, "\(context): verify after reopen: \(report.corruptions)")
            if !missing.isEmpty || !extra.isEmpty || report.hasCorruption { return }
            // Long runs say how far they are (a run cut short still has figures).
            if kills > 30 && generation % 25 == 0 {
                print("after " + Self.summary(figures, seed: seed, items: reference.count))
            }
        }
        print(Self.summary(figures, seed: seed, items: reference.count))
        #expect(figures.lost == 0)
    }

    /// The figures of a run, as one line.
    static func summary(_ figures: Figures, seed: UInt64, items: Int) -> String {
        "kill campaign (seed \(seed)): \(figures.kills) kills (\(figures.killedBeforeReady) before the store was open), "
            + "\(figures.acknowledged) acknowledged saves checked, \(figures.lost) lost; saves in flight at the "
            + "kill: \(figures.inFlightApplied) applied, \(figures.inFlightNotApplied) not; "
            + "\(figures.historyChecked) history checks; verify beside the live writer \(figures.verifyRunsBesideWriter) times, "
            + "\(items) items"
    }

    /// A value shared between the test's threads.
    final class Locked<Value: Sendable>: Sendable {
        let mutex: Mutex<Value>
        init(_ value: Value) { mutex = Mutex(value) }
        func withLock<Result: Sendable>(_ body: (inout Value) -> Result) -> Result { mutex.withLock { body(&$0) } }
    }

    static func apply(_ save: Announced, to state: inout [String: Int64]) {
        switch save.operation {
        case .insert, .update: state[save.key] = save.token
        case .delete: state[save.key] = nil
        }
    }

    /// Starts the child, lets it run for the delay after its store is open (from its start when
    /// `killsDuringOpen`), kills it with SIGKILL, and returns what it
    /// reported and what `verify` beside it found.
    static func runAndKill(
        _ executable: URL, directory: String, seed: UInt64, generation: Int, savers: Int, mode: String,
        killsDuringOpen: Bool, delayMicroseconds: UInt32
    ) throws -> (Reports, (runs: Int, corruptions: [String])) {
        let process = Process()
        process.executableURL = executable
        process.arguments = [directory, String(seed), String(generation), String(savers), mode]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.standardError
        let reports = Locked(Reports())
        try process.run()
        let readerDone = DispatchSemaphore(value: 0)
        let reader = Thread {
            Self.readReports(output.fileHandleForReading, into: reports)
            readerDone.signal()
        }
        reader.start()
        // verify beside the live writer, until the kill.
        let stop = Locked(false)
        let verified = Locked<(runs: Int, corruptions: [String])>((0, []))
        let verifierDone = DispatchSemaphore(value: 0)
        let verifier = Thread {
            defer { verifierDone.signal() }
            while !stop.withLock({ $0 }) {
                guard reports.withLock({ $0.ready }) else {
                    usleep(2_000)
                    continue
                }
                do {
                    let report = try Log.verify(directory: directory)
                    verified.withLock {
                        $0.runs += 1
                        $0.corruptions += report.corruptions.map(\.description)
                    }
                    if report.hasCorruption { return }
                } catch {
                    verified.withLock { $0.corruptions.append("verify threw \(error)") }
                    return
                }
            }
        }
        verifier.start()
        // The delay counts from the open (or, for a kill during the open and its recovery, from the start).
        let deadline = Date().addingTimeInterval(30)
        while !killsDuringOpen && !reports.withLock({ $0.ready || !$0.failures.isEmpty }) && Date() < deadline {
            usleep(1_000)
        }
        usleep(delayMicroseconds)
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        stop.withLock { $0 = true }
        readerDone.wait()
        verifierDone.wait()
        return (reports.withLock { $0 }, verified.withLock { $0 })
    }

    /// Reads lines until end of file (the child is dead and every report it wrote is read).
    static func readReports(_ handle: Foundation.FileHandle, into reports: Locked<Reports>) {
        var pending = Data()
        while true {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            pending.append(chunk)
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                pending.removeSubrange(pending.startIndex...newline)
                reports.withLock { parse(line, into: &$0) }
            }
        }
    }

    static func parse(_ line: String, into reports: inout Reports) {
        let fields = line.split(separator: " ").map(String.init)
        switch fields.first {
        case "R":
            reports.ready = true
        case "W":
            guard fields.count == 5, let saver = Int(fields[1]), let operation = Announced.Operation(rawValue: fields[2]),
                let token = Int64(fields[4])
            else { return reports.failures.append("bad line: \(line)") }
            if reports.inFlight[saver] != nil { reports.failures.append("two saves in flight for saver \(saver)") }
            reports.inFlight[saver] = Announced(operation: operation, key: fields[3], token: token)
        case "A":
            guard fields.count == 5, let saver = Int(fields[1]), let token = Int64(fields[2]),
                let offset = UInt64(fields[3]), let check = UInt32(fields[4]),
                let save = reports.inFlight.removeValue(forKey: saver), save.token == token
            else { return reports.failures.append("bad acknowledgement: \(line)") }
            reports.acknowledged.append((save, offset, check))
        case "F":
            reports.failures.append(line)
        default:
            reports.failures.append("unexpected line: \(line)")
        }
    }
}
