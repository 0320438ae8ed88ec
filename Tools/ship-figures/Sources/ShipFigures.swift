import Foundation
import LogStore
#if canImport(Glibc)
import Glibc
#endif

/// `logstore-ship-figures`: the two store-side halves of `Tools/ship-figures/run.sh`, which
/// measures `logstore ship` for the README (issue 16's figures). Built in release with the tool.
///
///     logstore-ship-figures generate <dir> --transactions N [--seed S]
///         A new store of N transactions (durability .none, one fdatasync at close): each inserts a
///         Trip, an Item and a Lodging and updates an earlier Trip — 4 changes per transaction.
///     logstore-ship-figures write <dir> --rate R --seconds T [--seed S]
///         Opens the store (created if missing) and saves R transactions a second for T seconds
///         (`.batched` durability, 5 ms), in 10 ms ticks, holding it open for writing meanwhile.
///
/// Each prints one JSON line on standard output with what it did. Exit code 64 on bad arguments,
/// 2 when the store cannot be opened or a save fails.
@main
struct ShipFigures {
    static func main() {
        var arguments = Array(CommandLine.arguments.dropFirst())
        guard arguments.count >= 2, ["generate", "write"].contains(arguments[0]) else {
            usage("expected `generate <dir> --transactions N` or `write <dir> --rate R --seconds T`")
        }
        let command = arguments.removeFirst()
        let directory = arguments.removeFirst()
        var options: [String: Int] = [:]
        while !arguments.isEmpty {
            let name = arguments.removeFirst()
            guard ["--transactions", "--seed", "--rate", "--seconds"].contains(name) else { usage("unknown option \(name)") }
            guard let text = arguments.first, let value = Int(text), value > 0 else {
                usage("\(name) needs a positive whole number")
            }
            arguments.removeFirst()
            options[name] = value
        }
        do {
            switch command {
            case "generate":
                guard let count = options["--transactions"] else { usage("generate needs --transactions N") }
                try generate(directory, count: count, seed: UInt64(options["--seed"] ?? 11))
            default:
                guard let rate = options["--rate"], let seconds = options["--seconds"] else {
                    usage("write needs --rate R and --seconds T")
                }
                try write(directory, rate: rate, seconds: seconds, seed: UInt64(options["--seed"] ?? 12))
            }
        } catch {
            FileHandle.standardError.write(Data("logstore-ship-figures: \(error)\n".utf8))
            exit(2)
        }
    }

    static func usage(_ message: String) -> Never {
        FileHandle.standardError.write(Data("logstore-ship-figures: \(message)\n".utf8))
        exit(64)
    }

    static func generate(_ directory: String, count: Int, seed: UInt64) throws {
        guard !FileManager.default.fileExists(atPath: directory) else {
            throw FiguresError("\(directory) exists already: generate makes a new store")
        }
        let store = try LogStore(LogStoreConfiguration(schema: FiguresWorkload.schema, directory: directory, durability: .none))
        var workload = FiguresWorkload(seed: seed)
        let started = ContinuousClock.now
        for _ in 0..<count { try workload.save(to: store) }
        try store.close()
        let seconds = (ContinuousClock.now - started).seconds
        // Changes asked for: the store drops an update that sets the values a model already has.
        print(#"{"transactions":\#(count),"changesRequested":\#(workload.changes),"seconds":\#(rounded(seconds)),"# +
              #""transactionsPerSecond":\#(rounded(Double(count) / seconds))}"#)
    }

    static func write(_ directory: String, rate: Int, seconds: Int, seed: UInt64) throws {
        let store = try LogStore(LogStoreConfiguration(schema: FiguresWorkload.schema, directory: directory,
                                                       durability: .batched(syncIntervalMax: .milliseconds(5))))
        var workload = FiguresWorkload(seed: seed)
        let ticksPerSecond = 100
        let started = ContinuousClock.now
        var saved = 0, lateTicks = 0
        for tick in 0..<(seconds * ticksPerSecond) {
            // Saves due by the end of this tick: spreads a rate that is not a multiple of 100.
            let due = rate * (tick + 1) / ticksPerSecond
            while saved < due {
                try workload.save(to: store)
                saved += 1
            }
            let end = started + .milliseconds(1000 / ticksPerSecond * (tick + 1))
            let now = ContinuousClock.now
            if now < end { Thread.sleep(forTimeInterval: (end - now).seconds) } else { lateTicks += 1 }
        }
        let elapsed = (ContinuousClock.now - started).seconds
        let last = store.currentToken
        try store.close()
        print(#"{"transactions":\#(saved),"seconds":\#(rounded(elapsed)),"savesPerSecond":\#(rounded(Double(saved) / elapsed)),"# +
              #""lateTicks":\#(lateTicks),"lastOffset":\#(last.map { String($0.offset) } ?? "null")}"#)
    }

    static func rounded(_ value: Double) -> String { String(format: "%.3f", value) }
}

struct FiguresError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The shape of the shipping tests' workload without deletes (a delete costs the store a scan for
/// references): per transaction a Lodging, a Trip referring to it and an Item referring to the
/// Trip are inserted and an earlier Trip's budget and notes updated.
struct FiguresWorkload {
    static let schema = Schema([
        Schema.Entity("Trip", attributes: [
            .init("name", .string), .init("start", .date), .init("budget", .double), .init("rating", .int),
            .init("active", .bool), .init("photo", .data, isOptional: true), .init("tags", .array(.string)),
            .init("notes", .string, isOptional: true),
        ], relationships: [.init("lodging", destination: "Lodging")]),
        Schema.Entity("Item", attributes: [.init("title", .string), .init("done", .bool)],
                      relationships: [.init("trip", destination: "Trip")]),
        Schema.Entity("Lodging", attributes: [.init("place", .string)]),
    ])

    var state: UInt64
    var trips: [PersistentIdentifier] = []
    var changes = 0

    init(seed: UInt64) { state = seed }

    /// SplitMix64, so every run saves the same values.
    mutating func next(_ upperBound: Int) -> Int {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476C_E484_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return Int((z ^ (z >> 31)) % UInt64(upperBound))
    }

    mutating func save(to store: LogStore) throws {
        var request = DataStoreSaveChangesRequest<DefaultSnapshot>(editingState: EditingState(author: "figures"))
        let lodging = PersistentIdentifier.temporary(entityName: "Lodging")
        let trip = PersistentIdentifier.temporary(entityName: "Trip")
        request.inserted.append(DefaultSnapshot(persistentIdentifier: lodging, values: ["place": .string("Inn \(next(1000))")]))
        var values: [String: AttributeValue] = [
            "name": .string("Trip \(next(1_000_000))"),
            "start": .date(Date(timeIntervalSince1970: 1_700_000_000 + Double(next(10_000_000)) / 7)),
            "budget": .double(Double(next(100_000)) / 3), "rating": .int(Int64(next(11)) - 5),
            "active": .bool(next(2) == 0), "tags": .array([.string("a"), .string("b \(next(9))")]),
            "lodging": .reference(lodging),
        ]
        if next(3) == 0 { values["photo"] = .data(Data((0..<next(40)).map { UInt8($0 * 7 % 256) })) }
        if next(2) == 0 { values["notes"] = .string("note \(next(100))") }
        request.inserted.append(DefaultSnapshot(persistentIdentifier: trip, values: values))
        request.inserted.append(DefaultSnapshot(persistentIdentifier: .temporary(entityName: "Item"), values: [
            "title": .string("see \(next(99))"), "done": .bool(false), "trip": .reference(trip),
        ]))
        if !trips.isEmpty {
            let target = trips[next(trips.count)]
            request.updated.append(DefaultSnapshot(persistentIdentifier: target, values: [
                "budget": .double(Double(next(1000)) + 0.25), "notes": .string("updated \(next(50))"),
            ]))
        }
        changes += request.inserted.count + request.updated.count
        let result = try store.save(request)
        guard let saved = result.remappedIdentifiers[trip] else { throw FiguresError("the save returned no identifier for its Trip") }
        trips.append(saved)
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
