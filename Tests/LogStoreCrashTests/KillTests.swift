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
/// Default: 30 kills. `LOGSTORE_KILLS=1000` for the long run, which also has rounds with two
/// writing processes (`allowsOtherWriters`), one killed at the random moment while the other must
/// go on saving; `LOGSTORE_KILL_SEED` changes the seed (printed with the figures). A fresh store
/// every `LOGSTORE_KILLS_PER_STORE` kills (default 50), so a round's cost does not grow with the run.
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
        /// The maintenance call under way ("checkpoint", "delete", "register"…), if any.
        var maintenance: String?
        var failures: [String] = []
    }

    /// The figures of one run.
    struct Figures {
        /// SIGKILLs sent (a two-writer round sends two).
        var kills = 0
        var rounds = 0
        /// Fresh stores the run started (one every `LOGSTORE_KILLS_PER_STORE` kills).
        var stores = 0
        var killedBeforeReady = 0
        /// Kills that landed inside a maintenance call, by the call ("checkpoint", "delete"…).
        var killedDuring: [String: Int] = [:]
        /// Reopens that cut a torn tail (a kill in the middle of a write).
        var tornTailsCut = 0
        /// Reopens that removed a temporary file the kill left (mid checkpoint or segment creation).
        var temporaryFilesLeft = 0
        var acknowledged = 0
        var lost = 0
        var inFlightApplied = 0
        var inFlightNotApplied = 0
        var verifyRunsBesideWriter = 0
        var historyChecked = 0
        /// Rounds with two writing processes (`allowsOtherWriters`), one killed while the other saves.
        var twoWriterRounds = 0
        /// Saves the survivor of a two-writer round acknowledged after the other was killed.
        var survivorSavesAfterKill = 0
    }

    @Test func everyAcknowledgedSaveSurvivesKillNine() throws {
        guard let child = Self.childExecutable() else {
            Issue.record("LogStoreCrashChild not found beside \(CommandLine.arguments[0]); build with --build-tests")
            return
        }
        let environment = ProcessInfo.processInfo.environment
        let kills = environment["LOGSTORE_KILLS"].flatMap(Int.init) ?? 30
        let seed = environment["LOGSTORE_KILL_SEED"].flatMap(UInt64.init) ?? 0x4B11_1E2
        // A fresh store every so many kills: a store that grows through the whole run makes each
        // round slower (reopen, fold, history and verify of everything: 2.6 s at first, ~14 s after
        // 350 kills on this machine), so 1,000 kills took hours.
        let killsPerStore = max(1, environment["LOGSTORE_KILLS_PER_STORE"].flatMap(Int.init) ?? 50)
        // The long run adds rounds with two writing processes, one of them killed.
        let twoWriterRounds = environment["LOGSTORE_KILLS"] != nil
        var random = SeededGenerator(seed: seed)

        var temporary = TemporaryDirectory("kills")
        defer { temporary.remove() }
        var storeStartKills = 0
        var reference: [String: Int64] = [:]
        var acknowledgedTokens: [UInt64: UInt32] = [:]  // history offset -> check, every round
        var seenHistory: Set<UInt64> = []
        /// The store's history low-water mark L at the last reopen: it never moves back (two
        /// writing children both write checkpoints that carry it).
        var previousMark: UInt64 = 0
        var figures = Figures()
        var round = 0
        let started = Date()
        while figures.kills < kills {
            round += 1
            if figures.stores == 0 || figures.kills - storeStartKills >= killsPerStore {
                temporary.remove()
                temporary = TemporaryDirectory("kills")
                figures.stores += 1
                storeStartKills = figures.kills
                reference = [:]
                acknowledgedTokens = [:]
                seenHistory = []
                previousMark = 0
            }
            let directory = temporary.path
            let mode = ["sync", "batched", "none"][Int.random(in: 0..<3, using: &random)]
            let savers = Int.random(in: 1...4, using: &random)
            let twoWriters = twoWriterRounds && Int.random(in: 0..<5, using: &random) == 0
            // The second writer's savers are numbered from 50, so the two own disjoint items.
            let otherSavers = twoWriters ? Int.random(in: 1...3, using: &random) : 0
            let context =
                "seed \(seed), round \(round) (\(mode), \(savers) savers"
                + (twoWriters ? " beside a second writer with \(otherSavers))" : ")")
            var specs = [
                ChildSpec(
                    seed: random.next(), firstSaver: 0, savers: savers, allSavers: twoWriters ? 50 + otherSavers : savers,
                    shared: twoWriters)
            ]
            if twoWriters {
                specs.append(
                    ChildSpec(
                        seed: random.next(), firstSaver: 50, savers: otherSavers, allSavers: 50 + otherSavers, shared: true))
            }
            let run = try Self.runAndKill(
                child, directory: directory, generation: round, mode: mode, children: specs,
                killsDuringOpen: Int.random(in: 0..<8, using: &random) == 0,
                delayMicroseconds: UInt32.random(in: 0...250_000, using: &random),
                survivorMicroseconds: UInt32.random(in: 20_000...200_000, using: &random))
            let reports = run.reports
            figures.rounds += 1
            figures.kills += reports.count
            figures.verifyRunsBesideWriter += run.verified.runs
            if twoWriters {
                figures.twoWriterRounds += 1
                figures.survivorSavesAfterKill += run.survivorSavesAfterKill
            }
            // The first child is the one killed at the random moment (the survivor's kill only ends the round).
            if !reports[0].ready { figures.killedBeforeReady += 1 }
            if let call = reports[0].maintenance { figures.killedDuring[call, default: 0] += 1 }
            let failures = reports.flatMap(\.failures) + run.failures
            #expect(failures.isEmpty, "\(context): \(failures)")
            #expect(run.verified.corruptions.isEmpty, "\(context): verify beside the live writer: \(run.verified.corruptions)")
            if !failures.isEmpty || !run.verified.corruptions.isEmpty { return }

            // The two children own disjoint items, so their saves commute.
            for (save, offset, check) in reports.flatMap(\.acknowledged) {
                Self.apply(save, to: &reference)
                acknowledgedTokens[offset] = check
            }
            figures.acknowledged += reports.map(\.acknowledged.count).reduce(0, +)

            // Reopen as the next writer would, and compare.
            let store = try LogStore(
                LogStoreConfiguration(
                    schema: Self.schema, directory: directory, segmentByteCountMax: 256 * 1024,
                    checkpointIntervalByteCount: 512 * 1024))
            if store.recoveryReport.truncatedAt != nil || !store.recoveryReport.droppedRecords.isEmpty {
                figures.tornTailsCut += 1
            }
            if !store.recoveryReport.removedTemporaryFiles.isEmpty { figures.temporaryFilesLeft += 1 }
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
            let inFlight = reports.flatMap(\.inFlight.values)
            for save in inFlight {
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
            #expect(mark >= previousMark, "\(context): the low-water mark moved back from \(previousMark) to \(mark)")
            previousMark = max(previousMark, mark)
            let history = try store.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
            let offsets = Dictionary(uniqueKeysWithValues: history.map { ($0.token.offset, $0.token.check) })
            for (offset, check) in acknowledgedTokens where offset > mark {
                #expect(offsets[offset] == check, "\(context): acknowledged transaction at \(offset) missing from history")
                figures.historyChecked += 1
            }
            let unknown = offsets.keys.filter { acknowledgedTokens[$0] == nil && !seenHistory.contains($0) }
            #expect(unknown.count <= inFlight.count, "\(context): history holds unacknowledged \(unknown)")
            seenHistory.formUnion(offsets.keys)
            acknowledgedTokens = acknowledgedTokens.filter { $0.key > mark }
            seenHistory = seenHistory.filter { $0 > mark }
            try store.close()
            let report = try Log.verify(directory: directory)
            #expect(!report.hasCorruption, "\(context): verify after reopen: \(report.corruptions)")
            if !missing.isEmpty || !extra.isEmpty || report.hasCorruption { return }
            // Long runs say how far they are (a run cut short still has figures).
            if kills > 30 && round % 25 == 0 {
                let elapsed = Int(Date().timeIntervalSince(started))
                print("after \(elapsed) s, " + Self.summary(figures, seed: seed, items: reference.count))
            }
        }
        print("in \(Int(Date().timeIntervalSince(started))) s, " + Self.summary(figures, seed: seed, items: reference.count))
        #expect(figures.lost == 0)
    }

    /// The figures of a run, as one line.
    static func summary(_ figures: Figures, seed: UInt64, items: Int) -> String {
        let during = figures.killedDuring.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }
        return "kill campaign (seed \(seed)): \(figures.kills) kills in \(figures.rounds) rounds on \(figures.stores) "
            + "stores (\(figures.killedBeforeReady) before the store was open, during maintenance calls: "
            + "\(during.isEmpty ? "none" : during.joined(separator: ", "))), "
            + "\(figures.acknowledged) acknowledged saves checked, \(figures.lost) lost; saves in flight at the "
            + "kill: \(figures.inFlightApplied) applied, \(figures.inFlightNotApplied) not; reopens that cut a torn "
            + "tail \(figures.tornTailsCut), that removed a temporary file \(figures.temporaryFilesLeft); "
            + "\(figures.historyChecked) history checks; verify beside the live writer \(figures.verifyRunsBesideWriter) "
            + "times; two-writer rounds \(figures.twoWriterRounds) (survivor saves after the kill "
            + "\(figures.survivorSavesAfterKill)); \(items) items in the current store"
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

    /// One child process of a round.
    struct ChildSpec {
        var seed: UInt64
        var firstSaver: Int
        var savers: Int
        var allSavers: Int
        /// Opened with `allowsOtherWriters`, beside another writing child.
        var shared: Bool
    }

    /// What a round saw.
    struct Round {
        /// One per child, in the order of the specs.
        var reports: [Reports]
        var verified: (runs: Int, corruptions: [String])
        var survivorSavesAfterKill = 0
        var failures: [String] = []
    }

    /// Starts the children (at once, on one store), lets them run for the delay after their
    /// stores are open (from their start when `killsDuringOpen`), and kills the first with
    /// SIGKILL. With a second child (two writing processes), that one must go on saving after the
    /// kill — its next turn cleans up whatever the dead writer left — for `survivorMicroseconds`
    /// and at least one acknowledged save, and is then killed too. Returns what they reported and
    /// what `verify` beside them found.
    static func runAndKill(
        _ executable: URL, directory: String, generation: Int, mode: String, children specs: [ChildSpec],
        killsDuringOpen: Bool, delayMicroseconds: UInt32, survivorMicroseconds: UInt32
    ) throws -> Round {
        var processes: [(process: Process, reports: Locked<Reports>, done: DispatchSemaphore)] = []
        defer {
            for child in processes where child.process.isRunning { kill(child.process.processIdentifier, SIGKILL) }
        }
        for spec in specs {
            let process = Process()
            process.executableURL = executable
            process.arguments =
                [directory, String(spec.seed), String(generation), String(spec.savers), mode]
                + (specs.count > 1 || spec.firstSaver != 0
                    ? [String(spec.firstSaver), String(spec.allSavers)] + (spec.shared ? ["shared"] : []) : [])
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
            processes.append((process, reports, readerDone))
        }
        func allReady() -> Bool { processes.allSatisfy { $0.reports.withLock { $0.ready } } }
        func anyFailed() -> Bool { processes.contains { $0.reports.withLock { !$0.failures.isEmpty } } }
        // verify beside the live writers, until the last kill.
        let stop = Locked(false)
        let verified = Locked<(runs: Int, corruptions: [String])>((0, []))
        let verifierDone = DispatchSemaphore(value: 0)
        let firstReports = processes[0].reports
        let verifier = Thread {
            defer { verifierDone.signal() }
            while !stop.withLock({ $0 }) {
                guard firstReports.withLock({ $0.ready }) else {
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
        while !killsDuringOpen && !allReady() && !anyFailed() && Date() < deadline { usleep(1_000) }
        usleep(delayMicroseconds)
        kill(processes[0].process.processIdentifier, SIGKILL)
        processes[0].process.waitUntilExit()
        var round = Round(reports: [], verified: (0, []))
        if processes.count > 1 {
            // The survivor goes on: it must acknowledge saves after the other writer died.
            let survivor = processes[1].reports
            let before = survivor.withLock { $0.acknowledged.count }
            usleep(survivorMicroseconds)
            let progressDeadline = Date().addingTimeInterval(30)
            while survivor.withLock({ $0.acknowledged.count == before && $0.failures.isEmpty })
                && processes[1].process.isRunning && Date() < progressDeadline
            {
                usleep(1_000)
            }
            let after = survivor.withLock { $0.acknowledged.count }
            round.survivorSavesAfterKill = after - before
            if after == before && survivor.withLock({ $0.failures.isEmpty }) {
                round.failures.append("the surviving writer acknowledged no save in 30 s after the other was killed")
            }
            kill(processes[1].process.processIdentifier, SIGKILL)
            processes[1].process.waitUntilExit()
        }
        stop.withLock { $0 = true }
        for child in processes { child.done.wait() }
        verifierDone.wait()
        round.reports = processes.map { child in child.reports.withLock { $0 } }
        round.verified = verified.withLock { $0 }
        return round
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
        case "M":
            guard fields.count == 2 else { return reports.failures.append("bad maintenance line: \(line)") }
            reports.maintenance = fields[1] == "-" ? nil : fields[1]
        case "F":
            reports.failures.append(line)
        default:
            reports.failures.append("unexpected line: \(line)")
        }
    }
}
