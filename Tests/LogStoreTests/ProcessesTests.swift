import Foundation
@testable import LogStore
import LogStoreEngine
import LogStoreTestSupport
import SampleTrips
import Synchronization
import Testing

/// Several processes, one store (issue 12, D11 as built): a second, real process
/// (`LogStoreProcessHelper`, Tests/ProcessHelper) writes the store while this one reads it.
@Suite struct ProcessesTests {
    @Test func aReadOnlyContainerOpensBesideTheWritingProcessAndSeesItsSaves() throws {
        let temporary = TemporaryDirectory("processes")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        let widget = try HelperProcess("write", directory, "widget")
        defer { widget.stop() }
        try widget.expect("open")
        let first = try widget.save(3)

        let url = URL(fileURLWithPath: directory)
        // The writing process holds the store: a second writer is refused, and the message names
        // what exists instead.
        let refusal = #expect(throws: LogStoreError.self) {
            _ = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(url: url))
        }
        #expect(refusal?.code == .locked)
        #expect(refusal.map { "\($0)".contains("allowsSave: false") } == true)

        let app = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(url: url, allowsSave: false))
        let store = try #require(app.dataStore(as: LogStore.self))
        #expect(store.isReadOnly)
        let context = ModelContext(app)
        #expect(try context.fetchCount(FetchDescriptor<Trip>()) == 3)
        let saved = try #require(store.currentToken)
        #expect(saved.offset == first.last)

        // Saves in the other process are seen by the next fetch here, with nothing in between.
        let second = try widget.save(2)
        #expect(try context.fetchCount(FetchDescriptor<Trip>()) == 5)
        let history = try context.fetchHistory(
            HistoryDescriptor<DefaultHistoryTransaction>(
                predicate: #Predicate { $0.token > saved && $0.author == "widget" }))
        #expect(history.map(\.token.offset) == second)
        #expect(history.allSatisfy { $0.processIdentifier != LogStore.processIdentifier })

        // A read-only container refuses saves.
        context.insert(Trip(name: "Here", destination: "Nowhere"))
        let readOnly = #expect(throws: LogStoreError.self) { try context.save() }
        #expect(readOnly?.code == .readOnly)
        context.rollback()

        // The writer closes and another process opens the store for writing: the reader goes on.
        try widget.quit()
        let next = try HelperProcess("write", directory, "widget")
        defer { next.stop() }
        try next.expect("open")
        let third = try next.save(1)
        #expect(try context.fetchCount(FetchDescriptor<Trip>()) == 6)
        #expect(store.currentToken?.offset == third.last)
        try next.quit()
        try app.dataStore(as: LogStore.self)?.close()
    }

    @Test func remoteChangesAndTheLiveTailYieldTheOtherProcessesSaves() async throws {
        let temporary = TemporaryDirectory("processes")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        let widget = try HelperProcess("write", directory, "widget")
        defer { widget.stop() }
        try widget.expect("open")
        _ = try widget.save(1)

        let store = try LogStore(
            LogStoreConfiguration(schema: Schema([Trip.self]), url: URL(fileURLWithPath: directory), allowsSave: false))
        defer { try? store.close() }
        #if os(Linux)
            #expect(store.changeWatchMechanism == .inotify)
        #endif
        let start = try #require(store.currentToken)
        let count = 5
        // Nothing here fetches while the other process saves: only the change watcher can wake these.
        let changes = Task {
            var tokens: [UInt64] = []
            for try await token in store.remoteChanges() {
                tokens.append(token.offset)
                if tokens.count == count { break }
            }
            return tokens
        }
        let tail = Task {
            var offsets: [UInt64] = []
            for try await transaction in store.historyTail(after: start) {
                offsets.append(transaction.token.offset)
                if offsets.count == count { break }
            }
            return offsets
        }
        // A guard against a hang, not a timing assertion: cancelled tasks end early and fail below.
        let watchdog = Task {
            try await Task.sleep(for: .seconds(120))
            changes.cancel()
            tail.cancel()
        }
        defer { watchdog.cancel() }
        // Let both iterators reach their first wait, so the saves below arrive as news.
        try await Task.sleep(for: .milliseconds(200))
        let saved = try widget.save(count)
        #expect(try await changes.value == saved)
        #expect(try await tail.value == saved)
        try widget.quit()
    }

    @Test func aWriterKilledMidSaveLosesNothingAcknowledgedAndTheReaderGoesOn() throws {
        let temporary = TemporaryDirectory("processes")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        let writer = try HelperProcess("stream", directory, "stream")
        defer { writer.stop() }
        try writer.expect("open")
        var acknowledged: [UInt64] = []
        while acknowledged.count < 20 { acknowledged.append(try writer.offset(from: writer.nextLine())) }
        let app = try ModelContainer(
            for: Trip.self, configurations: ModelConfiguration(url: URL(fileURLWithPath: directory), allowsSave: false))
        let store = try #require(app.dataStore(as: LogStore.self))
        while acknowledged.count < 200 { acknowledged.append(try writer.offset(from: writer.nextLine())) }
        // SIGKILL in the middle of its stream of saves; every line it printed was a returned save.
        writer.stop()
        while let line = try? writer.nextLine() { acknowledged.append(try writer.offset(from: line)) }

        // Nothing acknowledged is missing here, before any recovery…
        let seen = Set(try store.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).map(\.token.offset))
        #expect(Set(acknowledged).isSubset(of: seen))
        // …nor after the next writer recovered the store, which this reader keeps following.
        let next = try HelperProcess("write", directory, "widget")
        defer { next.stop() }
        try next.expect("open")
        let after = try next.save(2)
        let history = try store.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).map(\.token.offset)
        #expect(Set(acknowledged).isSubset(of: Set(history)))
        #expect(Array(history.suffix(2)) == after)
        #expect(history == history.sorted())
        #expect(try ModelContext(app).fetchCount(FetchDescriptor<Trip>()) == history.count)
        try next.quit()
        try store.close()
    }

    @Test func aReadOnlyContainerOpensBesideAWritingOneInTheSameProcess() throws {
        let temporary = TemporaryDirectory("processes")
        defer { temporary.remove() }
        let url = URL(fileURLWithPath: temporary.appending("Trips.store"))
        let writer = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(url: url))
        let writing = ModelContext(writer)
        writing.insert(Trip(name: "Lisbon", destination: "Portugal"))
        try writing.save()
        let reader = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(url: url, allowsSave: false))
        #expect(try ModelContext(reader).fetchCount(FetchDescriptor<Trip>()) == 1)
        writing.insert(Trip(name: "Porto", destination: "Portugal"))
        try writing.save()
        #expect(try ModelContext(reader).fetch(FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.name)])).map(\.name)
            == ["Lisbon", "Porto"])
        // A second writing container in this process shares the open store (D11: one open store
        // per directory in a process; SharedWritersTests has the rest).
        let second = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(url: url))
        #expect(second.dataStore(as: LogStore.self) === writer.dataStore(as: LogStore.self))
        try reader.dataStore(as: LogStore.self)?.close()
        try writer.dataStore(as: LogStore.self)?.close()
    }

    @Test func aReadOnlyStoreLearnsOfTheWritersHistoryDeletion() throws {
        let temporary = TemporaryDirectory("processes")
        defer { temporary.remove() }
        let url = URL(fileURLWithPath: temporary.appending("Trips.store"))
        let writer = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(url: url))
        let writing = ModelContext(writer)
        for name in ["Lisbon", "Porto", "Faro"] {
            writing.insert(Trip(name: name, destination: "Portugal"))
            try writing.save()
        }
        let reader = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(url: url, allowsSave: false))
        let reading = ModelContext(reader)
        let all = try reading.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        #expect(all.count == 3)
        let first = all[0].token, second = all[1].token
        try writing.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token <= second }))
        // The next call here sees L moved: what is at or below it is gone, older bounds expire.
        #expect(try reading.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).map(\.token) == [all[2].token])
        let expired = #expect(throws: LogStoreError.self) {
            _ = try reading.fetchHistory(
                HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token > first }))
        }
        #expect(expired?.code == .historyTokenExpired)
        #expect(try reading.fetchCount(FetchDescriptor<Trip>()) == 3)
        try reader.dataStore(as: LogStore.self)?.close()
        try writer.dataStore(as: LogStore.self)?.close()
    }

    /// Review F3: a follow that moved the log and then failed to reload L (here a checkpoint
    /// that does not read) lost the move: the next call saw nothing new and never folded the
    /// writer's save. What to fold is decided from the ends now.
    @Test func aFollowThatFailsAfterTheLogMovedFoldsTheRecordsNextTime() throws {
        let temporary = TemporaryDirectory("processes")
        defer { temporary.remove() }
        let url = URL(fileURLWithPath: temporary.appending("Trips.store"))
        let writer = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(url: url))
        let writing = ModelContext(writer)
        for name in ["Lisbon", "Porto"] {
            writing.insert(Trip(name: name, destination: "Portugal"))
            try writing.save()
        }
        let reader = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(url: url, allowsSave: false))
        let store = try #require(reader.dataStore(as: LogStore.self))
        // Only this test's fetches follow the writer (the watcher would fold before the damage).
        store.changeWatcher.withLock { $0.watcher?.cancel() }
        let reading = ModelContext(reader)
        #expect(try reading.fetchCount(FetchDescriptor<Trip>()) == 2)
        let first = try #require(try reading.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).first).token
        writing.insert(Trip(name: "Faro", destination: "Portugal"))
        try writing.save()
        try writing.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token <= first }))
        let checkpoints = try FileManager.default.contentsOfDirectory(atPath: url.path)
            .filter { CheckpointFileName.offset($0) != nil }.map { url.path + "/" + $0 }
        #expect(!checkpoints.isEmpty)
        let saved = try checkpoints.map { try Data(contentsOf: URL(fileURLWithPath: $0)) }
        for (path, data) in zip(checkpoints, saved) {
            try Data(repeating: 0xAB, count: data.count).write(to: URL(fileURLWithPath: path))
        }
        #expect(throws: LogStoreError.self) { _ = try reading.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()) }
        for (path, data) in zip(checkpoints, saved) { try data.write(to: URL(fileURLWithPath: path)) }
        #expect(try reading.fetchCount(FetchDescriptor<Trip>()) == 3)
        #expect(try reading.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).count == 2)
        try store.close()
        try writer.dataStore(as: LogStore.self)?.close()
    }

    @Test func aReadOnlyOpenRacingAWriterNeverReportsAnUnreadTail() throws {
        let temporary = TemporaryDirectory("processes")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        let writer = try HelperProcess("stream", directory, "stream")
        defer { writer.stop() }
        try writer.expect("open")
        var previousEnd: UInt64 = 0
        var opens = 0
        // Until the writer has rolled nothing and written for a while: each open races its appends.
        while opens < 40 {
            let log = try Log.openReadOnly(directory: directory)
            #expect(log.recoveryReport.unreadTail == nil, "open \(opens): \(String(describing: log.recoveryReport.unreadTail))")
            #expect(log.recoveryReport.droppedRecords.isEmpty)
            #expect(log.visibleEnd >= previousEnd)
            previousEnd = log.visibleEnd
            var records = try log.records(from: log.startOffset)
            var count = 0
            while try records.next() != nil { count += 1 }
            try log.close()
            opens += 1
        }
        #expect(previousEnd > 0)
    }
}

/// `LogStoreProcessHelper`, started with `arguments`, driven through its standard input and read
/// line by line from its standard output.
final class HelperProcess: Sendable {
    private let process: Process
    private let input: Pipe
    private final class Lines: Sendable {
        let state = Mutex<(buffer: [UInt8], lines: [String], ended: Bool)>(([], [], false))
    }
    private let lines = Lines()
    private let arrived = DispatchSemaphore(value: 0)

    init(_ arguments: String...) throws {
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
            .appendingPathComponent("LogStoreProcessHelper")
        process = Process()
        process.executableURL = executable
        process.arguments = arguments
        input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        let lines = self.lines
        let arrived = self.arrived
        output.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            lines.state.withLock { state in
                if data.isEmpty { state.ended = true }
                state.buffer += data
                while let newline = state.buffer.firstIndex(of: UInt8(ascii: "\n")) {
                    state.lines.append(String(decoding: state.buffer[..<newline], as: UTF8.self))
                    state.buffer.removeSubrange(...newline)
                }
            }
            arrived.signal()
            if data.isEmpty { handle.readabilityHandler = nil }
        }
        try process.run()
    }

    /// The next line, or a thrown error when the process ends first or says nothing for a minute
    /// (a guard against a hang, not a timing assertion).
    func nextLine() throws -> String {
        while true {
            let (line, ended) = lines.state.withLock { state -> (String?, Bool) in
                state.lines.isEmpty ? (nil, state.ended) : (state.lines.removeFirst(), state.ended)
            }
            if let line { return line }
            if ended { throw HelperError(message: "the helper process ended") }
            if arrived.wait(timeout: .now() + 60) == .timedOut {
                throw HelperError(message: "the helper process said nothing for 60 s")
            }
        }
    }

    /// The lines said so far and not yet taken, without waiting.
    func takeReadyLines() -> [String] {
        lines.state.withLock { state in
            defer { state.lines.removeAll() }
            return state.lines
        }
    }

    func expect(_ expected: String) throws {
        let line = try nextLine()
        guard line == expected else { throw HelperError(message: "expected \"\(expected)\", got \"\(line)\"") }
    }

    func send(_ line: String) {
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
    }

    /// Asks for `count` saves and returns their offsets, each acknowledged (durable) there.
    func save(_ count: Int) throws -> [UInt64] {
        send("save \(count)")
        return try (0..<count).map { _ in
            let line = try nextLine()
            return try offset(from: line)
        }
    }

    /// The offset in a "saved <offset>" line.
    func offset(from line: String) throws -> UInt64 {
        let words = line.split(separator: " ")
        guard words.count >= 2, words[0] == "saved", let offset = UInt64(words[1]) else {
            throw HelperError(message: "expected \"saved <offset>\", got \"\(line)\"")
        }
        return offset
    }

    func quit() throws {
        send("quit")
        try expect("closed")
        process.waitUntilExit()
    }

    /// Ends the process (SIGKILL) if it still runs.
    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    struct HelperError: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }
}

/// Figures for issue 12's closing note, on real files with a real second process. Not an
/// assertion, a measurement: runs only with `LOGSTORE_MEASURE=1` and prints its figures. Best in a
/// release build:
///
///     LOGSTORE_MEASURE=1 swift test -c release -Xswiftc -enable-testing --filter ProcessesMeasureTests
@Suite struct ProcessesMeasureTests {
    @Test(.enabled(if: CheckpointMeasureTests.isEnabled))
    func remoteChangeLatencyAndTheCostOfLearningNothingIsNew() async throws {
        let temporary = TemporaryDirectory("processes-measure")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        let widget = try HelperProcess("write", directory, "widget")
        defer { widget.stop() }
        try widget.expect("open")
        _ = try widget.save(1)
        let store = try LogStore(
            LogStoreConfiguration(schema: Schema([Trip.self]), url: URL(fileURLWithPath: directory), allowsSave: false))
        defer { try? store.close() }

        // Latency: from the save's timestamp in the other process (taken before its write and
        // fdatasync) to the token arriving here; one save at a time.
        var changes = store.remoteChanges().makeAsyncIterator()
        var latencies: [Double] = []
        var afterReturn: [Double] = []
        for _ in 0..<300 {
            widget.send("save 1")
            guard let token = try await changes.next() else { break }
            let arrived = Date().timeIntervalSince1970
            let line = try widget.nextLine().split(separator: " ")
            let returned = Double(line[3])! / 1_000_000
            let transaction = try store.fetchHistory(
                HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token == token }))
            latencies.append((arrived - transaction[0].timestamp.timeIntervalSince1970) * 1000)
            afterReturn.append(max(0, arrived - returned) * 1000)
        }
        func summary(_ values: [Double]) -> String {
            let sorted = values.sorted()
            return "p50 \(String(format: "%.2f", sorted[sorted.count / 2])) ms, "
                + "p99 \(String(format: "%.2f", sorted[sorted.count * 99 / 100])) ms, "
                + "max \(String(format: "%.2f", sorted.last!)) ms"
        }
        print("remote change latency over \(latencies.count) saves, watcher \(String(describing: store.changeWatchMechanism)): "
              + "from the save's timestamp (before its write and fdatasync) \(summary(latencies)); "
              + "from the save's return there (0 when the token arrived first) \(summary(afterReturn))")

        // Learning that nothing is new: the log's check (one pread of the coordination file), and
        // a store fetch of the current token (the check plus the store's lock).
        let log = try Log.openReadOnly(directory: directory)
        defer { try? log.close() }
        let clock = ContinuousClock()
        let count = 200_000
        var start = clock.now
        for _ in 0..<count { _ = try log.refresh() }
        let perRefresh = CheckpointMeasureTests.seconds(clock.now - start) / Double(count) * 1e9
        start = clock.now
        for _ in 0..<count { _ = store.currentToken }
        let perToken = CheckpointMeasureTests.seconds(clock.now - start) / Double(count) * 1e9
        let file = try PosixFileSystem().openFile(directory + "/coordination", mode: .readOnly)
        var bytes = [UInt8](repeating: 0, count: SharedEnd.byteCount)
        start = clock.now
        for _ in 0..<count { _ = try file.read(into: &bytes, range: 0..<SharedEnd.byteCount, at: 0) }
        let perPread = CheckpointMeasureTests.seconds(clock.now - start) / Double(count) * 1e9
        file.close()
        print("nothing new: Log.refresh \(String(format: "%.0f", perRefresh)) ns, "
              + "LogStore.currentToken \(String(format: "%.0f", perToken)) ns per call; "
              + "a bare 80-byte pread of the same file \(String(format: "%.0f", perPread)) ns")

        // Catch-up cost per foreign transaction, in the engine: 2000 saves there, then one
        // refresh here reads and checks their records (the store's fold then decodes them).
        _ = try widget.save(2000)
        start = clock.now
        #expect(try log.refresh())
        let check = CheckpointMeasureTests.seconds(clock.now - start)
        print("catch-up: 2000 foreign transactions checked by one Log.refresh in \(String(format: "%.1f", check * 1000)) ms "
              + "(\(String(format: "%.2f", check / 2000 * 1e6)) µs each)")
        try widget.quit()
    }
}
