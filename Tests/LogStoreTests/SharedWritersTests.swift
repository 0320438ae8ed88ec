import Foundation
@testable import LogStore
import LogStoreEngine
import LogStoreTestSupport
import SampleTrips
import Synchronization
import Testing

/// Several writing processes, one store (issue 12 stage 2, DECISIONS.md D11 as built on
/// `allowsOtherWriters`): real processes (`LogStoreProcessHelper shared …`) save into one store at
/// once; afterwards the store, opened alone, must hold every acknowledged save exactly once.
@Suite struct SharedWritersTests {
    static func configuration(_ directory: String) -> LogStoreConfiguration {
        var configuration = ModelConfiguration(url: URL(fileURLWithPath: directory))
        configuration.allowsOtherWriters = true
        return configuration
    }

    /// The names a helper acknowledged ("saved <name>" lines) up to its "done".
    static func acknowledged(by helper: HelperProcess) throws -> [String] {
        var names: [String] = []
        // Bounded by the helper: nextLine throws when it ends or hangs.
        while true {
            let line = try helper.nextLine()
            if line == "done" { return names }
            guard line.hasPrefix("saved ") else {
                throw HelperProcess.HelperError(message: "expected \"saved <name>\" or \"done\", got \"\(line)\"")
            }
            names.append(String(line.dropFirst("saved ".count)))
        }
    }

    /// Takes `lock` (another holder, here: this process's syncer zero-filling under the turn, lets
    /// go within milliseconds); `false` after 10 s.
    static func lockExclusively(_ lock: any LogStoreEngine.FileHandle) throws -> Bool {
        let deadline = Date().addingTimeInterval(10)
        // Bounded by the deadline.
        while Date() < deadline {
            if try lock.tryLockExclusive() { return true }
            usleep(1_000)
        }
        return false
    }

    /// The saves a `shared-stream` helper acknowledged: read until there are `count`, then it is
    /// killed (SIGKILL, mid-stream), and the lines it printed before it died are added.
    static func acknowledgedUntilKilled(_ streamer: HelperProcess, after count: Int) throws -> [String] {
        var acknowledged: [String] = []
        func take(_ line: String) {
            if line.hasPrefix("saved ") { acknowledged.append(String(line.dropFirst("saved ".count))) }
        }
        // Bounded: the streamer saves until killed; nextLine throws if it stops saying anything.
        while acknowledged.count < count { take(try streamer.nextLine()) }
        streamer.stop()
        // Lines it printed before it died are acknowledged saves too.
        while let line = try? streamer.nextLine() { take(line) }
        return acknowledged
    }

    /// After a writer was killed: the survivor's fetch and the store opened alone afterwards hold
    /// every acknowledged save exactly once, and the survivor's own `survivorSaves`. Quits the
    /// survivor.
    static func expectEveryAcknowledgedSaveOnce(
        _ directory: String, acknowledged: [String], survivor: HelperProcess, survivorSaves: Int
    ) throws {
        survivor.send("count")
        let count = try survivor.nextLine()
        try survivor.quit()
        let names = try namesAfterReopening(directory)
        #expect(Set(names).count == names.count)
        #expect(Set(acknowledged).isSubset(of: Set(names)))
        #expect(count == "count \(names.count)")
        #expect(names.filter { $0.hasPrefix("survivor-") }.count == survivorSaves)
    }

    /// Opens the store alone (full recovery) and returns every trip's name.
    static func namesAfterReopening(_ directory: String) throws -> [String] {
        let container = try ModelContainer(for: Trip.self, configurations: configuration(directory))
        defer { try? container.dataStore(as: LogStore.self)?.close() }
        return try ModelContext(container).fetch(FetchDescriptor<Trip>()).map(\.name)
    }

    @Test(arguments: [2, 4])
    func writerProcessesSaveAtOnceAndEveryAcknowledgedSaveIsThereExactlyOnce(processCount: Int) throws {
        let temporary = TemporaryDirectory("writers")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        var helpers: [HelperProcess] = []
        defer { for helper in helpers { helper.stop() } }
        for index in 0..<processCount {
            let helper = try HelperProcess("shared", directory, "w\(index)")
            helpers.append(helper)
            // The first creates the store; the others open it beside it.
            try helper.expect("open")
        }
        let threads = 4
        let saves = 20
        for helper in helpers { helper.send("burst \(threads) \(saves)") }
        var acknowledged: [String] = []
        for helper in helpers { acknowledged += try Self.acknowledged(by: helper) }
        #expect(acknowledged.count == processCount * threads * saves)
        #expect(Set(acknowledged).count == acknowledged.count)
        // Each process's fetch sees every other's saves.
        for helper in helpers {
            helper.send("count")
            try helper.expect("count \(acknowledged.count)")
        }
        for helper in helpers { try helper.quit() }

        let container = try ModelContainer(for: Trip.self, configurations: Self.configuration(directory))
        let context = ModelContext(container)
        let names = try context.fetch(FetchDescriptor<Trip>()).map(\.name)
        #expect(names.count == acknowledged.count)
        #expect(Set(names) == Set(acknowledged))
        // One transaction per save, tokens strictly increasing, each process's found by author.
        let history = try context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        #expect(history.count == acknowledged.count)
        #expect(zip(history, history.dropFirst()).allSatisfy { $0.token.offset < $1.token.offset })
        for index in 0..<processCount {
            #expect(history.filter { $0.author == "w\(index)" }.count == threads * saves)
        }
        try container.dataStore(as: LogStore.self)?.close()
    }

    /// A process writing alone saves on the calling thread (no hand-over to the save writer and
    /// back); once another process writes, its saves go through the writer again — whose batches
    /// share one turn — until no other process has written for a second.
    @Test func aLoneWriterSavesOnItsOwnThreadAndHandsOverOnceAnotherProcessWrites() throws {
        let temporary = TemporaryDirectory("writers")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        let container = try ModelContainer(for: Trip.self, configurations: Self.configuration(directory))
        let store = try #require(container.dataStore(as: LogStore.self))
        defer { try? store.close() }
        #expect(store.inlineSaveQuietNanoseconds.load(ordering: .relaxed) == 1_000_000_000)
        // A minute, not the second it is: the saves below must not outlast it on a loaded machine.
        store.inlineSaveQuietNanoseconds.store(60_000_000_000, ordering: .relaxed)
        let context = ModelContext(container)
        func save(_ name: String) throws {
            context.insert(Trip(name: name, destination: "Somewhere"))
            try context.save()
        }
        for index in 0..<5 { try save("alone \(index)") }
        #expect(store.saveWriter.inlineSaves == 5)
        #expect(store.log.nanosecondsSinceOtherWritersWrote == nil)

        let other = try HelperProcess("shared", directory, "other")
        defer { other.stop() }
        try other.expect("open")
        other.send("burst 1 3")
        #expect(try Self.acknowledged(by: other).count == 3)
        // The first save after it may still run inline (nothing may have told this process yet);
        // by its end this process has read the other's records (at its turn's catch-up, or a
        // refresh the change watcher made), and the saves after it go through the writer.
        try save("after 0")
        #expect(store.log.nanosecondsSinceOtherWritersWrote != nil)
        let inlineBefore = store.saveWriter.inlineSaves
        for index in 1..<4 { try save("after \(index)") }
        #expect(store.saveWriter.inlineSaves == inlineBefore)
        try other.quit()
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<Trip>()) == 12)
    }

    /// Synchronous saves called at once while no other process writes are written in batches by
    /// one of their callers under one turn (SaveCombiner): here `TURN` is held by this test while
    /// six threads save, so the first caller waits in its turn and the others queue behind it; the
    /// next batch holds them all. Each caller gets its own outcome — one save too large to write
    /// fails alone — and its own record. Seen failing with one batch per save (batches == saves).
    @Test func synchronousSavesCalledAtOnceAreWrittenInOneTurnEachWithItsOwnOutcome() throws {
        let temporary = TemporaryDirectory("writers")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        let container = try ModelContainer(for: Trip.self, configurations: Self.configuration(directory))
        let store = try #require(container.dataStore(as: LogStore.self))
        defer { try? store.close() }
        store.inlineSaveQuietNanoseconds.store(60_000_000_000, ordering: .relaxed)
        let setup = ModelContext(container)
        setup.insert(Trip(name: "first", destination: "Somewhere"))
        try setup.save()
        let turn = try PosixFileSystem().openFile(
            directory + "/" + FormatConstants.turnLockFileName, mode: .createOrOpen)
        defer { turn.close() }
        #expect(try Self.lockExclusively(turn))
        let countsBefore = store.saveCombiner.counts
        let inlineBefore = store.saveWriter.inlineSaves
        let outcomes = Mutex<[Int: Result<Void, any Error>]>([:])
        let group = DispatchGroup()
        let tooLarge = String(repeating: "x", count: FormatConstants.recordByteCountMax + 1)
        for index in 0..<6 {
            group.enter()
            Thread {
                defer { group.leave() }
                let context = ModelContext(container)
                context.insert(Trip(name: "saver \(index)", destination: index == 3 ? tooLarge : "Somewhere"))
                let outcome = Result { try context.save() }
                outcomes.withLock { $0[index] = outcome }
            }.start()
        }
        // Bounded: 20 s for the six saves to be counted inline (the first waits for TURN).
        let deadline = Date().addingTimeInterval(20)
        while store.saveWriter.inlineSaves < inlineBefore + 6 && Date() < deadline { usleep(1_000) }
        #expect(store.saveWriter.inlineSaves == inlineBefore + 6)
        try turn.unlock()
        #expect(group.wait(timeout: .now() + 60) == .success)
        let counts = store.saveCombiner.counts
        #expect(counts.saves - countsBefore.saves == 6)
        // The first caller's batch (itself, and any that came before it took the queue), then
        // the rest in one.
        #expect(counts.batches - countsBefore.batches <= 3)
        let results = outcomes.withLock { $0 }
        for index in 0..<6 {
            let outcome = try #require(results[index])
            if index == 3 {
                #expect(throws: (any Error).self) { try outcome.get() }
            } else {
                #expect(throws: Never.self) { try outcome.get() }
            }
        }
        let names = try ModelContext(container).fetch(FetchDescriptor<Trip>()).map(\.name).sorted()
        #expect(names == ["first", "saver 0", "saver 1", "saver 2", "saver 4", "saver 5"])
        let tokens = try ModelContext(container).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
            .map(\.token)
        #expect(Set(tokens).count == 6)
    }

    /// Review of 33003ef: a save called while an inline save waits for the turn is written after
    /// it. A synchronous save (inline: the writer idle, no other process) blocks on `TURN`, held
    /// by this test; an async save of a later value of the same attribute is then queued; once
    /// `TURN` is released the later value must win.
    /// The async save is started with `Task.immediate` (it queues its write before it first
    /// suspends): a plain `Task` waited for the cooperative pool, which the suite's parallel tests
    /// kept busy for over 20 s in one full run.
    @available(macOS 26.0, *)  // Task.immediate
    @MainActor @Test func aSaveCalledWhileAnInlineSaveWaitsForTheTurnIsWrittenAfterIt() async throws {
        let temporary = TemporaryDirectory("writers")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        let container = try ModelContainer(for: Trip.self, configurations: Self.configuration(directory))
        let store = try #require(container.dataStore(as: LogStore.self))
        // The synchronous `save()` (in an `async` function the asynchronous one is chosen).
        @Sendable func saveSynchronously(_ context: ModelContext) throws { try context.save() }
        let setup = ModelContext(container)
        setup.insert(Trip(name: "ordered", destination: "zero"))
        try saveSynchronously(setup)
        let turn = try PosixFileSystem().openFile(directory + "/" + FormatConstants.turnLockFileName, mode: .createOrOpen)
        defer { turn.close() }
        #expect(try Self.lockExclusively(turn))
        let inlineBefore = store.saveWriter.inlineSaves
        let firstFailure = Mutex<String?>(nil)
        let firstDone = DispatchSemaphore(value: 0)
        let first = Thread {
            defer { firstDone.signal() }
            do {
                let context = ModelContext(container)
                let trip = try context.fetch(FetchDescriptor<Trip>()).first { $0.name == "ordered" }
                trip?.destination = "one"
                try saveSynchronously(context)
            } catch {
                firstFailure.withLock { $0 = "\(error)" }
            }
        }
        first.start()
        // Polled without suspending until `TURN` is released: resuming on the main actor waited
        // for the suite's other main-actor tests in a full run, past the inline save's 30 s turn
        // wait.
        let deadline = Date().addingTimeInterval(20)
        while store.saveWriter.inlineSaves == inlineBefore && Date() < deadline { usleep(1_000) }
        #expect(store.saveWriter.inlineSaves == inlineBefore + 1, "the synchronous save did not run inline")
        let context = ModelContext(container)
        let trip = try #require(try context.fetch(FetchDescriptor<Trip>()).first { $0.name == "ordered" })
        trip.destination = "two"
        let second = Task.immediate { @MainActor in try await context.save() }
        #expect(store.saveWriter.handedOver == 1, "the async save was not queued behind the inline one")
        try turn.unlock()
        try await second.value
        // Its own bound: the inline save may still wait for its fdatasync (30 s at most).
        #expect(firstDone.wait(timeout: .now() + 40) == .success, "the synchronous save never returned")
        let saved = try ModelContext(container).fetch(FetchDescriptor<Trip>()).first { $0.name == "ordered" }
        #expect(firstFailure.withLock { $0 } == nil)
        #expect(saved?.destination == "two")
        #expect(try ModelContext(container).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).count == 3)
        try store.close()
    }

    @Test func twoProcessesUpsertingOneUniqueKeyMakeOneModel() throws {
        let temporary = TemporaryDirectory("writers")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        let first = try HelperProcess("shared", directory, "first")
        defer { first.stop() }
        try first.expect("open")
        let second = try HelperProcess("shared", directory, "second")
        defer { second.stop() }
        try second.expect("open")
        first.send("upsert Same 15")
        second.send("upsert Same 15")
        #expect(try Self.acknowledged(by: first).count == 15)
        #expect(try Self.acknowledged(by: second).count == 15)
        // Without catch-up each process would insert its own model with the key.
        first.send("count")
        try first.expect("count 1")
        try first.quit()
        try second.quit()
        #expect(try Self.namesAfterReopening(directory) == ["Same"])
    }

    @Test func aWriterKilledMidStreamLosesNothingAcknowledgedAndTheOtherGoesOn() throws {
        let temporary = TemporaryDirectory("writers")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        let survivor = try HelperProcess("shared", directory, "survivor")
        defer { survivor.stop() }
        try survivor.expect("open")
        let killed = try HelperProcess("shared-stream", directory, "killed")
        defer { killed.stop() }
        try killed.expect("open")
        survivor.send("burst 2 30")
        var acknowledged = try Self.acknowledgedUntilKilled(killed, after: 40)
        acknowledged += try Self.acknowledged(by: survivor)
        // The survivor goes on writing after the kill.
        survivor.send("burst 2 10")
        acknowledged += try Self.acknowledged(by: survivor)
        try Self.expectEveryAcknowledgedSaveOnce(
            directory, acknowledged: acknowledged, survivor: survivor, survivorSaves: 80)
    }

    /// A writer alone in a shared store keeps `TURN` and leaves the turn slot unwritten between
    /// its saves; killed so, the kernel drops its `flock` with the slot behind its records. The
    /// other writer, idle until then, adopts every one of them at its next turn (D11's crash
    /// argument, step 3) and loses nothing acknowledged. (A regression test of that state, not of
    /// the deferral: it passed before it too — every acknowledged save lies under slot 1's
    /// durable end, which bounds catch-up whatever the turn slot says — and it cannot tell
    /// whether the streamer kept `TURN` at the kill: it reads nobody's records, so it keeps it
    /// unless the survivor's idle durable-end mark, about a second after its open, was read.)
    @Test func aLoneWriterKilledWhileKeepingTheTurnLosesNothingAcknowledged() throws {
        let temporary = TemporaryDirectory("writers")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        let survivor = try HelperProcess("shared", directory, "survivor")
        defer { survivor.stop() }
        try survivor.expect("open")
        let killed = try HelperProcess("shared-stream", directory, "killed")
        defer { killed.stop() }
        try killed.expect("open")
        // Killed alone: keeping TURN.
        var acknowledged = try Self.acknowledgedUntilKilled(killed, after: 60)
        survivor.send("burst 1 10")
        acknowledged += try Self.acknowledged(by: survivor)
        try Self.expectEveryAcknowledgedSaveOnce(
            directory, acknowledged: acknowledged, survivor: survivor, survivorSaves: 10)
    }

    @Test func aTornRecordPastThePublishedWrittenEndIsZeroedByTheNextTurn() throws {
        let temporary = TemporaryDirectory("writers")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        // No idle durable-end mark (shared stores mark since bfbe932): on a loaded machine one
        // landed at the end this test reads before it writes the torn bytes there.
        var configuration = Self.configuration(directory)
        configuration.durableEndMarkDelay = nil
        let container = try ModelContainer(for: Trip.self, configurations: configuration)
        let writer = try #require(container.dataStore(as: LogStore.self))
        let context = ModelContext(container)
        context.insert(Trip(name: "Before", destination: "Somewhere"))
        try context.save()
        // What a writer killed in the middle of its pwrite leaves past the written end it had not
        // published yet: the first bytes of a record that does not check out. Written under
        // `TURN`, as that writer held it (the kernel releases it at the kill): this process keeps
        // `TURN` between its turns while nobody else wants it, and lets it go once idle.
        let turn = try PosixFileSystem().openFile(directory + "/" + FormatConstants.turnLockFileName, mode: .createOrOpen)
        defer { turn.close() }
        #expect(try Self.lockExclusively(turn))
        let end = writer.log.writtenEnd
        let base = writer.log.segmentBaseOffsets.last!
        let segment = FileHandle(forUpdatingAtPath: directory + "/" + String(format: "%020llu.log", base))!
        try segment.seek(toOffset: UInt64(FormatConstants.segmentHeaderByteCount) + end - base)
        segment.write(Data(repeating: 0xA5, count: 300))
        try segment.close()
        try turn.unlock()

        context.insert(Trip(name: "After", destination: "Somewhere"))
        try context.save()
        #expect(writer.logStatistics.deadWriterTailsCleaned == 1)
        #expect(writer.logStatistics.deadWriterBytesZeroed > 0)
        try writer.close()
        // Opened alone: a full recovery finds nothing torn, and nothing is lost.
        let reopened = try ModelContainer(for: Trip.self, configurations: Self.configuration(directory))
        let store = try #require(reopened.dataStore(as: LogStore.self))
        #expect(store.recoveryReport.truncatedAt == nil && store.recoveryReport.droppedRecords.isEmpty)
        #expect(try ModelContext(reopened).fetch(FetchDescriptor<Trip>()).map(\.name).sorted() == ["After", "Before"])
        try store.close()
    }

    @MainActor @Test func twoWritingContainersInOneProcessShareTheOpenStore() throws {
        let temporary = TemporaryDirectory("writers")
        defer { temporary.remove() }
        let url = URL(fileURLWithPath: temporary.appending("Trips.store"))
        let app = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(url: url))
        // Another path to the same directory: one store per (device, inode).
        let widget = try ModelContainer(
            for: Trip.self, configurations: ModelConfiguration(url: URL(fileURLWithPath: url.path + "/.")))
        let store = try #require(app.dataStore(as: LogStore.self))
        #expect(widget.dataStore(as: LogStore.self) === store)
        let widgetContext = ModelContext(widget)
        widgetContext.insert(Trip(name: "Lisbon", destination: "Portugal"))
        try widgetContext.save()
        #expect(try ModelContext(app).fetchCount(FetchDescriptor<Trip>()) == 1)
        // Another configuration on the open store is refused, and says why.
        var unsynced = ModelConfiguration(url: url)
        unsynced.durability = .none
        let other = #expect(throws: LogStoreError.self) {
            _ = try ModelContainer(for: Trip.self, configurations: unsynced)
        }
        #expect(other?.code == .alreadyOpenInProcess)
        // Closing one container leaves the other working; the last close closes the store.
        try widget.close()
        try widget.close()
        let appContext = ModelContext(app)
        appContext.insert(Trip(name: "Porto", destination: "Portugal"))
        try appContext.save()
        #expect(try appContext.fetchCount(FetchDescriptor<Trip>()) == 2)
        try app.close()
        let closed = #expect(throws: LogStoreError.self) { try appContext.fetchCount(FetchDescriptor<Trip>()) }
        #expect(closed?.code == .closed)
        // And the directory opens again.
        let again = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(url: url))
        #expect(try ModelContext(again).fetchCount(FetchDescriptor<Trip>()) == 2)
        try again.close()
    }

    @Test func aReadOnlyProcessFollowsSeveralWritingOnes() throws {
        let temporary = TemporaryDirectory("writers")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        let first = try HelperProcess("shared", directory, "first")
        defer { first.stop() }
        try first.expect("open")
        let second = try HelperProcess("shared", directory, "second")
        defer { second.stop() }
        try second.expect("open")
        // Stage 1's read-only store follows slot 1, which in a shared store is the shared durable end.
        let reader = try ModelContainer(
            for: Trip.self, configurations: ModelConfiguration(url: URL(fileURLWithPath: directory), allowsSave: false))
        first.send("burst 2 10")
        second.send("burst 2 10")
        let acknowledged = try Self.acknowledged(by: first) + Self.acknowledged(by: second)
        let names = try ModelContext(reader).fetch(FetchDescriptor<Trip>()).map(\.name)
        #expect(Set(names) == Set(acknowledged))
        #expect(names.count == 40)
        try first.quit()
        try second.quit()
        try reader.dataStore(as: LogStore.self)?.close()
    }

    /// The WWDC24 scenario with both processes writing (issue 12 items 2 and 5): the app's store,
    /// opened with `allowsOtherWriters`, hears of the widget process's saves through
    /// `remoteChanges` — its own saves meanwhile are not news — and finds exactly the widget's
    /// transactions by `token > saved && author == "widget"`. Nothing here fetches while the
    /// widget saves: only the change watcher can wake the tail.
    @MainActor @Test func aWritingAppIsToldOfTheWidgetProcessesSavesThroughRemoteChanges() async throws {
        let temporary = TemporaryDirectory("writers")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        let app = try ModelContainer(for: Trip.self, configurations: Self.configuration(directory))
        let store = try #require(app.dataStore(as: LogStore.self))
        let appContext = ModelContext(app)
        appContext.author = "app"
        appContext.insert(Trip(name: "Before", destination: "Portugal"))
        try await appContext.save()
        let saved = try #require(store.currentToken)
        // No tail yet: the watcher pauses long after each call (a busy writer's default-paced
        // watcher woke for nearly every turn and sync of every process).
        #expect(store.changeWatcher.withLock { $0.watcher?.pauseMilliseconds } == LogStore.quietWatchPauseMilliseconds)
        let widget = try HelperProcess("shared", directory, "widget")
        defer { widget.stop() }
        try widget.expect("open")

        let count = 5
        let changes = Task {
            var tokens: [DefaultHistoryToken] = []
            for try await token in store.remoteChanges(after: saved) {
                tokens.append(token)
                if tokens.count == count { break }
            }
            return tokens
        }
        // A guard against a hang, not a timing assertion: a cancelled tail ends early and fails below.
        let watchdog = Task {
            try await Task.sleep(for: .seconds(120))
            changes.cancel()
        }
        defer { watchdog.cancel() }
        // Bounded by the watchdog: the tail shortens the pause on its first pass.
        while store.changeWatcher.withLock({ $0.watcher?.pauseMilliseconds }) != ChangeWatcher.defaultPauseMilliseconds,
            !changes.isCancelled
        {
            try await Task.sleep(for: .milliseconds(5))
        }
        #if os(Linux)
            #expect(store.changeWatchMechanism == .inotify)
        #endif
        appContext.insert(Trip(name: "Own", destination: "Portugal"))
        try await appContext.save()
        widget.send("burst 1 \(count)")
        let widgetNames = try Self.acknowledged(by: widget)
        let tokens = try await changes.value
        #expect(tokens.count == count)
        let found = try appContext.fetchHistory(
            HistoryDescriptor<DefaultHistoryTransaction>(
                predicate: #Predicate { $0.token > saved && $0.author == "widget" }))
        #expect(found.map(\.token) == tokens)
        #expect(Set(try appContext.fetch(FetchDescriptor<Trip>()).map(\.name)) == Set(["Before", "Own"] + widgetNames))
        try widget.quit()
        try app.close()
        // A tail after the close ends at once.
        for try await _ in store.historyTail(after: saved) { Issue.record("a closed store's tail yielded") }
    }

    @Test func writerProcessesRollSegmentsUnderEachOther() throws {
        let temporary = TemporaryDirectory("writers")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        // 2 KiB segments: about ten saves each, so each process rolls, and finds the other's rolls
        // when it catches up.
        let helpers = try ["a", "b"].map { try HelperProcess("shared", directory, $0, "2048") }
        defer { for helper in helpers { helper.stop() } }
        for helper in helpers { try helper.expect("open") }
        for helper in helpers { helper.send("burst 2 25") }
        var acknowledged: [String] = []
        for helper in helpers { acknowledged += try Self.acknowledged(by: helper) }
        for helper in helpers {
            helper.send("count")
            try helper.expect("count 100")
        }
        for helper in helpers { try helper.quit() }
        var configuration = Self.configuration(directory)
        configuration.segmentByteCountMax = 2048
        let container = try ModelContainer(for: Trip.self, configurations: configuration)
        let store = try #require(container.dataStore(as: LogStore.self))
        #expect(store.log.segmentBaseOffsets.count > 5)
        let names = try ModelContext(container).fetch(FetchDescriptor<Trip>()).map(\.name)
        #expect(names.count == 100)
        #expect(Set(names) == Set(acknowledged))
        try store.close()
    }

    /// D11: checkpoints in a store shared by writers — one process at a time (`MAINTENANCE`), each
    /// the fold of every process's records before its X. Automatic ones while two processes save,
    /// then one on demand in each at once: both name the same checkpoint (the second finds the
    /// first's), a process opening beside them starts from it and replays nothing, and the store
    /// opened alone afterwards validates the checkpoint left and holds every acknowledged save.
    /// (Before the maintenance lock, `checkpoint()` threw `unsupportedFeature` in a shared store.)
    @Test func writerProcessesWriteCheckpointsOneAtATime() throws {
        let temporary = TemporaryDirectory("writers")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        // 2 KiB of log between automatic checkpoints: several while the two save.
        let helpers = try ["a", "b"].map { try HelperProcess("shared", directory, $0, "\(64 << 20)", "2048") }
        defer { for helper in helpers { helper.stop() } }
        for helper in helpers { try helper.expect("open") }
        for helper in helpers { helper.send("burst 2 25") }
        var acknowledged: [String] = []
        for helper in helpers { acknowledged += try Self.acknowledged(by: helper) }
        var states: [String] = []
        for helper in helpers {
            helper.send("checkpoints")
            states.append(try helper.nextLine())
        }
        #expect(states.allSatisfy { $0.hasSuffix(" error none") }, "\(states)")
        #expect(states.contains { !$0.hasPrefix("newest none") }, "no automatic checkpoint: \(states)")
        // A checkpoint's temporary file left by a process killed while writing it: only the
        // MAINTENANCE holder writes those, so the next one removes it (review of 8838aa7: they
        // piled up while the store was never opened alone).
        let leftover = directory + "/checkpoint-00000000000000000100.ckpt.tmp"
        #expect(FileManager.default.createFile(atPath: leftover, contents: Data(repeating: 7, count: 4096)))
        // On demand in both at once: one writes it, the other finds it (nothing is saved between).
        for helper in helpers { helper.send("checkpoint") }
        let answers = try helpers.map { try $0.nextLine() }
        #expect(!FileManager.default.fileExists(atPath: leftover))
        #expect(answers[0].hasPrefix("checkpoint "), "\(answers)")
        #expect(answers[0] == answers[1])
        let offset = UInt64(answers[0].dropFirst("checkpoint ".count))
        #expect(offset != nil)

        // Beside them, an open starts from that checkpoint and replays nothing after it.
        let beside = try ModelContainer(for: Trip.self, configurations: Self.configuration(directory))
        let besideStore = try #require(beside.dataStore(as: LogStore.self))
        #expect(besideStore.openedFromCheckpointOffset == offset)
        #expect(besideStore.lastOpenReplayedRecordCount == 0)
        let besideNames = try ModelContext(beside).fetch(FetchDescriptor<Trip>()).map(\.name)
        #expect(besideNames.count == 100)
        #expect(Set(besideNames) == Set(acknowledged))
        try besideStore.close()
        for helper in helpers { try helper.quit() }

        // Alone: the open validates every checkpoint file; the older ones were pruned.
        let checkpointFiles = try FileManager.default.contentsOfDirectory(atPath: directory)
            .filter { $0.hasPrefix(FormatConstants.checkpointFilePrefix) }
        #expect(checkpointFiles.count == 1, "\(checkpointFiles)")
        let alone = try ModelContainer(for: Trip.self, configurations: Self.configuration(directory))
        let aloneStore = try #require(alone.dataStore(as: LogStore.self))
        #expect(aloneStore.openedFromCheckpointOffset == offset)
        let names = try ModelContext(alone).fetch(FetchDescriptor<Trip>()).map(\.name)
        #expect(names.count == 100)
        #expect(Set(names) == Set(acknowledged))
        try aloneStore.close()
    }

    /// D11 item 3: history deletion in a store shared by writers. One process deletes everything
    /// up to its newest transaction (L), writing the checkpoint after L and deleting the segments
    /// below it; the other learns of it at its next call — its history is what is after L, an
    /// older token it kept expires, it lets go of the deleted segments' descriptors — and its own
    /// checkpoint afterwards records the same L (written from L as the first left it, not its
    /// own stale one). Opened alone afterwards: L, every acknowledged save, history after L only.
    /// (Before the maintenance lock, `deleteHistory` threw `unsupportedFeature` in a shared store.)
    @Test func historyDeletedByOneWriterProcessExpiresInTheOther() throws {
        let temporary = TemporaryDirectory("writers")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        // 2 KiB segments: history spans many, and deleting it removes most of them.
        let helpers = try ["a", "b"].map { try HelperProcess("shared", directory, $0, "2048") }
        defer { for helper in helpers { helper.stop() } }
        let (a, b) = (helpers[0], helpers[1])
        for helper in helpers { try helper.expect("open") }
        var acknowledged: [String] = []
        for helper in helpers { helper.send("burst 2 10") }
        for helper in helpers { acknowledged += try Self.acknowledged(by: helper) }
        b.send("remember")
        #expect(try b.nextLine().hasPrefix("remembered "))
        for helper in helpers { helper.send("burst 2 10") }
        for helper in helpers { acknowledged += try Self.acknowledged(by: helper) }
        // b reads history through segments a is about to delete: its descriptors stay open.
        b.send("history")
        try b.expect("history 80")

        a.send("delete-history")
        let deleted = try a.nextLine().split(separator: " ")
        #expect(deleted.count == 4 && deleted[0] == "deleted" && deleted[2] == "segments", "\(deleted)")
        let mark = UInt64(deleted[1])
        #expect(mark != nil)
        #expect((Int(deleted[3]) ?? 0) > 5, "segments deleted: \(deleted)")

        b.send("history")
        try b.expect("history 0")
        b.send("history-after-remembered")
        try b.expect("failed historyTokenExpired")
        // b forgot the deleted segments: none of its descriptors names an unlinked file.
        b.send("deleted-files")
        try b.expect("deleted-files 0")
        b.send("checkpoint")
        #expect(try b.nextLine().hasPrefix("checkpoint "))
        for helper in helpers { helper.send("burst 1 5") }
        for helper in helpers { acknowledged += try Self.acknowledged(by: helper) }
        for helper in helpers { try helper.quit() }

        var configuration = Self.configuration(directory)
        configuration.segmentByteCountMax = 2048
        let container = try ModelContainer(for: Trip.self, configurations: configuration)
        let store = try #require(container.dataStore(as: LogStore.self))
        #expect(store.historyLowWaterMark?.offset == mark)
        let context = ModelContext(container)
        let names = try context.fetch(FetchDescriptor<Trip>()).map(\.name)
        #expect(names.count == 90)
        #expect(Set(names) == Set(acknowledged))
        let history = try context.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        #expect(history.count == 10)
        #expect(history.allSatisfy { $0.token.offset > mark! })
        try store.close()
    }

    /// Review of 8838aa7, finding 1: a read-only open fixes its end, then lists the checkpoints; a
    /// checkpoint a writer renamed in between lay beyond that end and the open failed with
    /// `corruption` (naming a valid checkpoint). Now it follows the writer once before judging.
    @Test func aReadOnlyOpenBesideACheckpointingWriterNeverCallsItsCheckpointCorrupt() throws {
        let temporary = TemporaryDirectory("writers")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        // Saves until stopped, with a checkpoint every 1 KiB of log: one every few saves.
        let writer = try HelperProcess("shared-stream", directory, "writer", "\(64 << 20)", "1024")
        defer { writer.stop() }
        try writer.expect("open")
        var checkpointsSeen = Set<String>()
        for _ in 0..<25 {
            let reader = try ModelContainer(
                for: Trip.self,
                configurations: ModelConfiguration(url: URL(fileURLWithPath: directory), allowsSave: false))
            try reader.dataStore(as: LogStore.self)?.close()
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            checkpointsSeen.formUnion(names.filter { $0.hasPrefix(FormatConstants.checkpointFilePrefix) })
        }
        writer.stop()
        #expect(writer.takeReadyLines().count > 25)
        // The writer checkpointed while the reads opened (else this test shows nothing).
        #expect(checkpointsSeen.count > 5, "\(checkpointsSeen.count) checkpoints seen")
    }

    /// D11: no thread of the cooperative pool waits on a `flock`. With `TURN` held elsewhere (a
    /// second descriptor here, which `flock` treats as another holder), four asynchronous saves
    /// wait for it, and the pool (2 threads on this machine) must stay free meanwhile. Before, each
    /// such save polled `TURN` on its cooperative thread: the small task below could run only
    /// once they gave up (30 s later, `locked`), and the saves failed.
    @Test func asynchronousSavesWaitingForTheTurnLeaveTheCooperativePoolFree() async throws {
        let temporary = TemporaryDirectory("writers")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        let container = try ModelContainer(for: Trip.self, configurations: Self.configuration(directory))
        let turn = try PosixFileSystem().openFile(directory + "/" + FormatConstants.turnLockFileName, mode: .createOrOpen)
        #expect(try Self.lockExclusively(turn))
        let saves = (0..<4).map { index in
            Task {
                let context = ModelContext(container)
                context.insert(Trip(name: "async \(index)", destination: "Somewhere"))
                try await context.save()
            }
        }
        // Runs on the cooperative pool while the saves wait for the turn.
        let answer = await Task.detached { 6 * 7 }.value
        #expect(answer == 42)
        try turn.unlock()
        for save in saves { try await save.value }
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<Trip>()) == 4)
        try container.dataStore(as: LogStore.self)?.close()
        turn.close()
    }

    /// One trip saved as "zero" through a main-actor context; for a store shared by writers,
    /// `TURN` then held by this test (the save writer keeps the next write until it is released)
    /// and the writer idle (a synchronous save returns before its batch ends). The call-order
    /// tests below change the trip twice — an async save, then a synchronous one — and check the
    /// later value wins.
    @MainActor final class OrderedSaves {
        let temporary: TemporaryDirectory
        let container: ModelContainer
        let store: LogStore
        let context: ModelContext
        let trip = Trip(name: "ordered", destination: "zero")
        /// `TURN`, held by the test (shared stores only).
        let turn: (any LogStoreEngine.FileHandle)?
        /// Every wait of the test ends by then.
        let deadline = Date().addingTimeInterval(20)

        init(shared: Bool) throws {
            temporary = TemporaryDirectory(shared ? "writers" : "not-shared")
            let directory = temporary.appending("Trips.store")
            container = try ModelContainer(
                for: Trip.self,
                configurations: shared ? SharedWritersTests.configuration(directory) : LogStoreConfiguration(directory: directory))
            store = try #require(container.dataStore(as: LogStore.self))
            context = ModelContext(container)
            context.insert(trip)
            try context.save()  // synchronous: an initializer is not async
            guard shared else {
                turn = nil
                return
            }
            let turn = try PosixFileSystem().openFile(directory + "/" + FormatConstants.turnLockFileName, mode: .createOrOpen)
            self.turn = turn
            #expect(try SharedWritersTests.lockExclusively(turn))
            // Bounded: 20 s; the writer is another thread.
            while store.saveWriter.handedOver != 0 && Date() < deadline { usleep(1_000) }
        }

        /// The synchronous `save()` (in an `async` function the asynchronous one is chosen).
        func saveSynchronously() throws { try context.save() }

        /// Releases `TURN` from another thread once both saves are handed over to the save writer
        /// (queued, or in one batch): the synchronous save blocks this thread meanwhile.
        func releaseTurnOnceBothSavesAreHandedOver() {
            let (store, turn, deadline) = (store, turn, deadline)
            Thread {
                // One read of both counts (two reads could count a job moving from queued to
                // running twice); bounded: 20 s.
                while store.saveWriter.handedOver < 2 && Date() < deadline { usleep(1_000) }
                try? turn?.unlock()
            }.start()
        }

        /// The trip's destination as stored, read through a new context.
        func savedDestination() throws -> String? {
            try ModelContext(container).fetch(FetchDescriptor<Trip>()).first { $0.name == "ordered" }?.destination
        }

        func close() throws {
            turn?.close()
            try store.close()
            temporary.remove()
        }
    }

    /// Review of 59576e3: one process's saves are written in the order they were called. An
    /// `await save()` whose write waits for the turn (held elsewhere), then a synchronous save of
    /// a later change to the same attribute: the store must end with the later value. (With a
    /// thread per asynchronous save, the two could take the turn's mutex in either order; that
    /// race is not forced here — the test pins the order the save writer guarantees.)
    @available(macOS 26.0, *)  // Task.immediate
    @MainActor @Test func savesOfOneProcessAreWrittenInTheOrderTheyWereCalled() async throws {
        let saves = try OrderedSaves(shared: true)
        saves.trip.destination = "one"
        // The first save queues its write before it first suspends (`Task.immediate` runs it on
        // this actor until then); the writer then waits for the turn. (A `Task` that this test
        // waited for with `Task.yield()` was left unrun for 20 s under TSan beside another
        // main-actor test.)
        let first = Task.immediate { @MainActor in try await saves.context.save() }
        while saves.store.saveWriter.backlog.running == 0 && Date() < saves.deadline { usleep(1_000) }
        #expect(saves.store.saveWriter.backlog.running == 1)
        saves.trip.destination = "two"
        saves.releaseTurnOnceBothSavesAreHandedOver()
        try saves.saveSynchronously()
        try await first.value
        #expect(try saves.savedDestination() == "two")
        let history = try ModelContext(saves.container).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        #expect(history.count == 3)
        try saves.close()
    }

    /// `await context.save()` on the main actor queues its write before it first suspends, so
    /// main-actor work that runs while it is suspended — a later change and a synchronous save —
    /// is written after it. `Task.immediate` runs the save on this actor up to that first
    /// suspension: the write must be queued when it returns. (Before the fix the save first left
    /// the main actor for the cooperative pool, and queued its write from there: nothing was
    /// queued yet, and the synchronous save could be written first.)
    @available(macOS 26.0, *)  // Task.immediate
    @MainActor @Test func anAsyncSaveIsQueuedBeforeItLeavesTheCallersActor() async throws {
        let saves = try OrderedSaves(shared: true)
        saves.trip.destination = "one"
        let first = Task.immediate { @MainActor in try await saves.context.save() }
        #expect(saves.store.saveWriter.handedOver == 1, "the async save had not queued its write when it first suspended")
        saves.trip.destination = "two"
        saves.releaseTurnOnceBothSavesAreHandedOver()
        try saves.saveSynchronously()
        try await first.value
        #expect(try saves.savedDestination() == "two")
        try saves.close()
    }

    /// The same guarantee in a store not shared by writers: its async save writes on the caller's
    /// actor before it first suspends (it used to leave for the cooperative pool first, so a
    /// synchronous save made meanwhile could be written before it).
    @available(macOS 26.0, *)  // Task.immediate
    @MainActor @Test func anAsyncSaveOfAStoreNotSharedWritesBeforeItLeavesTheCallersActor() async throws {
        let saves = try OrderedSaves(shared: false)
        let before = saves.store.log.writtenEnd
        saves.trip.destination = "one"
        let first = Task.immediate { @MainActor in try await saves.context.save() }
        #expect(saves.store.log.writtenEnd > before, "the async save had not written when it first suspended")
        saves.trip.destination = "two"
        try saves.saveSynchronously()
        try await first.value
        #expect(try saves.savedDestination() == "two")
        try saves.close()
    }

    /// The turn is to writes what group commit is to `fdatasync`: the saves queued while the
    /// save writer waited for the turn are written in one turn (one catch-up, one turn-slot
    /// write). Four saves submitted while `TURN` is held elsewhere: at most two turns (the batch
    /// that was waiting, and the saves queued behind it), not four.
    @Test func savesQueuedWhileTheTurnIsBusyShareOneTurn() async throws {
        let temporary = TemporaryDirectory("writers")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        let container = try ModelContainer(for: Trip.self, configurations: Self.configuration(directory))
        let store = try #require(container.dataStore(as: LogStore.self))
        let turn = try PosixFileSystem().openFile(directory + "/" + FormatConstants.turnLockFileName, mode: .createOrOpen)
        #expect(try Self.lockExclusively(turn))
        let turnsBefore = store.log.statistics.turnCount
        let saves = (0..<4).map { index in
            Task {
                let context = ModelContext(container)
                context.insert(Trip(name: "batched \(index)", destination: "Somewhere"))
                try await context.save()
            }
        }
        let deadline = Date().addingTimeInterval(20)
        func submitted() -> Int { store.saveWriter.handedOver }
        while submitted() < 4 && Date() < deadline { try await Task.sleep(for: .milliseconds(1)) }
        #expect(submitted() == 4)
        try turn.unlock()
        for save in saves { try await save.value }
        // The batch waiting for the turn, then (if any) the saves queued behind it: 1 or 2 turns.
        #expect(store.log.statistics.turnCount - turnsBefore <= 2)
        #expect(try ModelContext(container).fetchCount(FetchDescriptor<Trip>()) == 4)
        try store.close()
        turn.close()
    }
}

extension SaveWriter {
    /// Saves queued or in the batch being written, from one read of the backlog (two reads could
    /// count a job moving from the queue to the batch twice).
    var handedOver: Int {
        let backlog = backlog
        return backlog.queued + backlog.running
    }
}
