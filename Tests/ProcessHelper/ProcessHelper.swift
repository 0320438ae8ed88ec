import Foundation
import LogStore
import SampleTrips
import Synchronization

/// A second process for the tests of several processes on one store (issue 12). It writes the
/// store given on its command line and says what it did on standard output, one line per event,
/// so a test can drive it and check what another process sees.
///
///     LogStoreProcessHelper write <directory> <author>
///         opens the store for writing, prints "open", then reads commands from standard input:
///         "save <n>" saves n trips (one save each) and prints "saved <offset> at <µs since 1970>"
///         for each, the time taken when the save returned;
///         "quit" closes the store, prints "closed" and exits.
///     LogStoreProcessHelper stream <directory> <author>
///         opens the store for writing and saves trips without pause until killed (or orphaned);
///         prints "open" before the first save and "saved <offset>" after each.
///
/// Several writing processes (D11 stage 2: the store is opened with `allowsOtherWriters`):
///
///     LogStoreProcessHelper shared <directory> <author> [segment bytes [checkpoint interval bytes]]
///         as "write", plus: "burst <threads> <saves>" saves from that many threads at once, each
///         with its own context, printing "saved <name>" for each acknowledged save and
///         "done" at the end; "upsert <name> <saves>" saves that many trips with one unique key
///         (name, fixed dates), printing "saved <name>"; "count" prints "count <n>", the
///         trips a fetch sees now; "checkpoint" writes one and prints "checkpoint <X>";
///         "checkpoints" prints "newest <X or none> error <the last one's error or none>";
///         "delete-history" deletes all history and prints "deleted <L> segments <n>"; "remember"
///         keeps the newest token and prints "remembered <offset>"; "history-after-remembered"
///         prints "history <n>", the transactions after it, or "failed <error code>"; "history"
///         prints "history <n>", all of it; "deleted-files" prints "deleted-files <n>", how many
///         of its descriptors name files unlinked since they were opened.
///     LogStoreProcessHelper shared-stream <directory> <author>
///         as "stream", with `allowsOtherWriters`; prints "saved <name>" after each save.
@main
struct ProcessHelper {
    static func main() throws {
        let arguments = CommandLine.arguments
        guard arguments.count == 4 || ((5...6).contains(arguments.count) && arguments[1].hasPrefix("shared")),
            ["write", "stream", "shared", "shared-stream"].contains(arguments[1])
        else {
            FileHandle.standardError.write(
                Data("usage: LogStoreProcessHelper write|stream|shared|shared-stream <directory> <author>\n".utf8))
            exit(2)
        }
        if arguments[1].hasPrefix("shared") { return try shared(arguments) }
        let configuration = ModelConfiguration(url: URL(fileURLWithPath: arguments[2]))
        let container = try ModelContainer(for: Trip.self, configurations: configuration)
        let store = container.dataStore(as: LogStore.self)!
        let context = ModelContext(container)
        context.author = arguments[3]
        say("open")
        var counter = 0
        func saveOne() throws -> UInt64 {
            counter += 1
            context.insert(Trip(name: "\(arguments[3]) \(counter) \(UUID())", destination: "Somewhere"))
            try context.save()
            return store.currentToken!.offset
        }
        if arguments[1] == "stream" {
            // Until killed, or until the test that started it is gone.
            let parent = getppid()
            while getppid() == parent { say("saved \(try saveOne())") }
            return
        }
        while let line = readLine() {
            let words = line.split(separator: " ")
            switch words.first {
            case "save":
                for _ in 0..<(Int(words.dropFirst().first ?? "1") ?? 1) {
                    let offset = try saveOne()
                    // When the save returned, for the measurement of remote-change latency.
                    say("saved \(offset) at \(Int64(Date().timeIntervalSince1970 * 1_000_000))")
                }
            case "quit":
                try store.close()
                say("closed")
                return
            default:
                say("unknown command \(line)")
            }
        }
    }

    /// The modes with several writing processes.
    static func shared(_ arguments: [String]) throws {
        var configuration = ModelConfiguration(url: URL(fileURLWithPath: arguments[2]))
        configuration.allowsOtherWriters = true
        // An optional fifth argument: the segment size (small ones make the processes roll often).
        if arguments.count >= 5 { configuration.segmentByteCountMax = UInt64(arguments[4])! }
        // And a sixth: the interval of log between automatic checkpoints.
        if arguments.count == 6 { configuration.checkpointIntervalByteCount = UInt64(arguments[5])! }
        let container = try ModelContainer(for: Trip.self, configurations: configuration)
        let store = container.dataStore(as: LogStore.self)!
        let author = arguments[3]
        say("open")
        let counter = Mutex(0)
        var remembered: DefaultHistoryToken?
        /// One acknowledged save of a new trip; its line is printed once `save()` returned.
        @Sendable func saveOne(_ context: ModelContext, name: String? = nil, unique: Bool = false) throws {
            let number = counter.withLock { value in
                value += 1
                return value
            }
            let tripName = name ?? "\(author)-\(number)"
            let day = Date(timeIntervalSince1970: 1_700_000_000)
            context.insert(
                unique
                    ? Trip(name: tripName, destination: "\(author) \(number)", startDate: day, endDate: day)
                    : Trip(name: tripName, destination: "Somewhere"))
            try context.save()
            say("saved \(tripName)")
        }
        if arguments[1] == "shared-stream" {
            let context = ModelContext(container)
            context.author = author
            let parent = getppid()
            while getppid() == parent { try saveOne(context) }
            return
        }
        while let line = readLine() {
            let words = line.split(separator: " ").map(String.init)
            switch words.first {
            case "burst":
                let threads = Int(words[1])!
                let saves = Int(words[2])!
                let failures = Mutex<[String]>([])
                let group = DispatchGroup()
                for _ in 0..<threads {
                    group.enter()
                    // Threads, not tasks: a synchronous save blocks its thread (D2).
                    Thread {
                        defer { group.leave() }
                        let context = ModelContext(container)
                        context.author = author
                        do { for _ in 0..<saves { try saveOne(context) } } catch {
                            failures.withLock { $0.append("\(error)") }
                        }
                    }.start()
                }
                group.wait()
                let failed = failures.withLock { $0 }
                say(failed.isEmpty ? "done" : "failed \(failed.first!)")
            case "upsert":
                let context = ModelContext(container)
                context.author = author
                for _ in 0..<Int(words[2])! { try saveOne(context, name: words[1], unique: true) }
                say("done")
            case "count":
                let context = ModelContext(container)
                let trips = try context.fetchCount(FetchDescriptor<Trip>())
                say("count \(trips)")
            case "checkpoint":
                do { say("checkpoint \(try store.checkpoint())") } catch { say("failed \(error)") }
            case "delete-history":
                do {
                    let compaction = try store.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>(), force: false)
                    say(
                        "deleted \(compaction.lowWaterMark.map { String($0.offset) } ?? "none") segments "
                            + "\(compaction.deletedSegments.count)")
                } catch { say("failed \(error)") }
            case "remember":
                remembered = store.currentToken
                say("remembered \(remembered.map { String($0.offset) } ?? "none")")
            case "history-after-remembered":
                let token = remembered!
                do {
                    let history = try ModelContext(container).fetchHistory(
                        HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token > token }))
                    say("history \(history.count)")
                } catch let error as LogStoreError { say("failed \(error.code)") }
            case "history":
                let history = try ModelContext(container).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
                say("history \(history.count)")
            case "deleted-files":
                // /proc/self/fd: a descriptor of an unlinked file reads "<path> (deleted)".
                let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
                let deleted = descriptors.filter { descriptor in
                    let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + descriptor)
                    return target?.hasSuffix(" (deleted)") ?? false
                }
                say("deleted-files \(deleted.count)")
            case "checkpoints":
                say(
                    "newest \(store.newestCheckpointOffset.map(String.init) ?? "none") error "
                        + (store.lastCheckpointError.map { "\($0)" } ?? "none"))
            case "quit":
                try store.close()
                say("closed")
                return
            default:
                say("unknown command \(line)")
            }
        }
    }

    static func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}
