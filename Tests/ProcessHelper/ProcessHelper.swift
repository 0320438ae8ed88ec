import Foundation
import LogStore
import SampleTrips

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
@main
struct ProcessHelper {
    static func main() throws {
        let arguments = CommandLine.arguments
        guard arguments.count == 4, ["write", "stream"].contains(arguments[1]) else {
            FileHandle.standardError.write(Data("usage: LogStoreProcessHelper write|stream <directory> <author>\n".utf8))
            exit(2)
        }
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

    static func say(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }
}
