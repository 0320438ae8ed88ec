// The child process of the kill test (Tests/LogStoreCrashTests/KillTests.swift): opens a store,
// saves from several threads in a loop while a maintenance thread writes checkpoints, deletes
// history and moves a consumer's bookmark, and reports every acknowledged save on stdout. The
// parent kills it with SIGKILL at a random moment and checks the store against those reports.
//
//     LogStoreCrashChild <directory> <seed> <generation> <savers> <sync|batched|none>
//                        [<first saver> <all savers> [shared]]
//
// The savers are numbered `first saver ..< first saver + savers` (default 0); an item that was in
// the store at the open belongs to saver `hash(key) % all savers` (default `savers`), so two
// children with disjoint saver numbers never touch each other's items, and items of this
// generation (another child's, saved since) are left alone. `shared`: the store is opened with
// `allowsOtherWriters` beside another writing child (D11 stage 2); its maintenance thread writes
// checkpoints and deletes history under `MAINTENANCE` as it would alone. Only the child whose
// savers start at 0 runs the maintenance thread.
//
// Protocol (one line per write(2), each shorter than PIPE_BUF, so lines never interleave):
//     R                                        the store is open
//     W <saver> <insert|update|delete> <key> <token>   about to save (at most one per saver in flight)
//     A <saver> <token> <offset> <check>       that save returned: acknowledged
//     M <checkpoint|delete|register|unregister|acknowledge>   a maintenance call begins
//     M -                                      it returned
//     F <message>                              something failed that must not (the parent fails the test)
// A saver's next W comes only after its A. `token` is unique per save; an item's values are a
// function of the token of the save that last wrote it (see `payload(for:)`).

import Foundation
import LogStore
import LogStoreEngine

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Must match `KillTests.schema`.
let crashSchema = Schema([
    Schema.Entity(
        "Item",
        attributes: [.init("key", .string), .init("token", .int), .init("payload", .string)])
])

/// Must match `KillTests.payload(for:)`: 0 to ~6 KiB, determined by the token.
func payload(for token: Int64) -> String {
    var mixed = UInt64(bitPattern: token) &* 0x9E37_79B9_7F4A_7C15
    mixed ^= mixed >> 29
    let length = Int(mixed % 6000)
    let unit = "\(token);"
    return String(String(repeating: unit, count: length / unit.count + 1).prefix(length))
}

/// Which saver (of `all`) an item present at the open belongs to: FNV-1a of its key, so every
/// child agrees whatever else it sees in the store.
func owner(of key: String, all: Int) -> Int {
    var hash: UInt64 = 0xCBF2_9CE4_8422_2325
    for byte in key.utf8 {
        hash ^= UInt64(byte)
        hash &*= 0x100_0000_01B3
    }
    return Int(hash % UInt64(all))
}

/// One line to stdout in one write(2).
func emit(_ line: String) {
    var bytes = Array((line + "\n").utf8)
    precondition(bytes.count < 512, "a report line must stay below PIPE_BUF")
    bytes.withUnsafeMutableBytes { buffer in
        var done = 0
        while done < buffer.count {
            let written = write(1, buffer.baseAddress! + done, buffer.count - done)
            if written <= 0 { exit(3) }  // the parent is gone
            done += written
        }
    }
}

struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// What the savers and the maintenance thread share.
struct Child: Sendable {
    let store: LogStore
    let seed: UInt64
    let generation: Int64
    let allSavers: Int
    let shared: Bool
    let existing: [DefaultSnapshot]

    /// One saver: inserts, updates and deletes its own items, one save at a time, each save's
    /// changes a function of its token.
    func runSaver(_ number: Int) {
        var random = SplitMix(state: seed &+ UInt64(number) &* 0x51_7CC1_B727_220A)
        let thisGeneration = "g\(generation)s"
        var owned: [(key: String, identifier: PersistentIdentifier)] = existing.compactMap { row in
            guard case .string(let key)? = row.values["key"], !key.hasPrefix(thisGeneration),
                owner(of: key, all: allSavers) == number
            else { return nil }
            return (key, row.persistentIdentifier)
        }
        var counter: Int64 = 0
        while true {
            counter += 1
            let token = generation * 1_000_000_000 + Int64(number) * 10_000_000 + counter
            let roll = Int.random(in: 0..<10, using: &random)
            var request = DataStoreSaveChangesRequest<DefaultSnapshot>(editingState: EditingState(author: "saver \(number)"))
            let operation: String
            let key: String
            var ownedIndex: Int?
            if owned.isEmpty || roll < 5 {
                operation = "insert"
                key = "g\(generation)s\(number)n\(counter)"
                request.inserted = [
                    DefaultSnapshot(
                        persistentIdentifier: .temporary(entityName: "Item"),
                        values: ["key": .string(key), "token": .int(token), "payload": .string(payload(for: token))])
                ]
            } else {
                let index = Int.random(in: 0..<owned.count, using: &random)
                ownedIndex = index
                key = owned[index].key
                if roll < 8 {
                    operation = "update"
                    request.updated = [
                        DefaultSnapshot(
                            persistentIdentifier: owned[index].identifier,
                            values: ["key": .string(key), "token": .int(token), "payload": .string(payload(for: token))])
                    ]
                } else {
                    operation = "delete"
                    request.deleted = [DefaultSnapshot(persistentIdentifier: owned[index].identifier, values: [:])]
                }
            }
            emit("W \(number) \(operation) \(key) \(token)")
            let result: DataStoreSaveChangesResult<DefaultSnapshot>
            do { result = try store.save(request) } catch {
                emit("F save \(token): \(String(describing: error).prefix(400))")
                exit(1)
            }
            guard let saved = result.token else {
                emit("F save \(token) returned no token")
                exit(1)
            }
            switch operation {
            case "insert":
                owned.append((key, result.remappedIdentifiers[request.inserted[0].persistentIdentifier]!))
            case "delete":
                owned.remove(at: ownedIndex!)
            default:
                break
            }
            emit("A \(number) \(token) \(saved.offset) \(saved.check)")
        }
    }

    /// Checkpoints, history deletions (all of it, or up to a recent token) and a consumer's bookmark,
    /// at random moments — in a store shared by writers too (under `MAINTENANCE`, beside the
    /// other writing child).
    func runMaintenance() {
        var random = SplitMix(state: seed ^ 0xC0FF_EE00)
        var registered = false
        while true {
            usleep(UInt32.random(in: 2_000...40_000, using: &random))
            do {
                // The parent counts the kills that land between "M <kind>" and "M -".
                defer { emit("M -") }
                switch Int.random(in: 0..<10, using: &random) {
                case 0...3:
                    emit("M checkpoint")
                    try store.checkpoint()
                case 4...5:
                    emit("M delete")
                    try store.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>())
                case 6:
                    if let token = store.currentToken {
                        emit("M delete")
                        try store.deleteHistory(
                            HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token < token }))
                    }
                case 7:
                    if registered {
                        emit("M unregister")
                        try store.unregisterHistoryConsumer("mirror")
                    } else {
                        emit("M register")
                        try store.registerHistoryConsumer("mirror", after: store.currentToken)
                    }
                    registered.toggle()
                default:
                    if registered, let token = store.currentToken {
                        emit("M acknowledge")
                        try store.acknowledgeHistory("mirror", through: token)
                    }
                }
            } catch let error as LogStoreError where error.code == .historyTokenExpired {
                // A deletion passed the token read a moment ago: allowed, try again later.
            } catch {
                emit("F maintenance: \(String(describing: error).prefix(400))")
                exit(1)
            }
        }
    }
}

/// Parses the arguments, opens the store, starts the threads; never returns (the parent kills it).
func run() -> Never {
    let arguments = CommandLine.arguments
    let optional = Array(arguments.dropFirst(6))
    let saverCount = Int(arguments.count > 4 ? arguments[4] : "") ?? 0
    let firstSaver = optional.count >= 2 ? Int(optional[0]) ?? -1 : 0
    let allSavers = optional.count >= 2 ? Int(optional[1]) ?? -1 : saverCount
    guard [6, 8, 9].contains(arguments.count), let seed = UInt64(arguments[2]), let generation = Int64(arguments[3]),
        saverCount > 0, firstSaver >= 0, firstSaver + saverCount < 100, allSavers >= firstSaver + saverCount,
        optional.count < 3 || optional[2] == "shared"
    else {
        FileHandle.standardError.write(
            Data(
                ("usage: LogStoreCrashChild <directory> <seed> <generation> <savers> <sync|batched|none> "
                    + "[<first saver> <all savers> [shared]]\n").utf8))
        exit(2)
    }
    let shared = arguments.count == 9
    let durability: Durability
    switch arguments[5] {
    case "sync": durability = .synchronous
    case "batched": durability = .batched(syncIntervalMax: .milliseconds(5))
    case "none": durability = .none
    default:
        FileHandle.standardError.write(Data("unknown durability \(arguments[5])\n".utf8))
        exit(2)
    }

    let store: LogStore
    do {
        var configuration = LogStoreConfiguration(
            schema: crashSchema, directory: arguments[1], durability: durability,
            segmentByteCountMax: 256 * 1024, checkpointIntervalByteCount: 512 * 1024)
        configuration.allowsOtherWriters = shared
        store = try LogStore(configuration)
    } catch {
        emit("F open: \(String(describing: error).prefix(400))")
        exit(1)
    }

    // Items already in the store, shared out among the savers by their keys (`owner(of:all:)`).
    let existing = store.allSnapshots()["Item"] ?? []
    emit("R")
    let child = Child(
        store: store, seed: seed, generation: generation, allSavers: allSavers, shared: shared, existing: existing)

    for number in firstSaver..<(firstSaver + saverCount) {
        let thread = Thread { child.runSaver(number) }
        thread.name = "saver \(number)"
        thread.start()
    }
    // One maintenance thread per store: a second writing child (savers from 50) only saves, so
    // the two never move one consumer's bookmark under each other, and no consumer of its own
    // stays registered after its kill to hold history back in later rounds.
    if firstSaver == 0 {
        let maintenance = Thread { child.runMaintenance() }
        maintenance.name = "maintenance"
        maintenance.start()
    }
    while true { sleep(60) }
}

run()
