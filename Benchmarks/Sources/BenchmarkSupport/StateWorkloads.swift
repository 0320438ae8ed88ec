import Foundation
import LogStore
import LogStoreEngine
import SampleTrips
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

// P5 (open = checkpoint + replay) and P8 (resident memory of the folded state) need stores far
// larger than a benchmark can write in its measured time. They are built once, with durability
// `.none`, and kept under `Benchmarks/.cache/fixtures/format-<version>.<document revision>/`:
// a new on-disk format version or revision (docs/FORMAT.md) starts a new directory, so a cached store is never
// read by an engine that did not write its format. A fixture is built in a temporary directory and
// renamed into place when complete, so an interrupted build is never used.

/// Cached benchmark stores.
public enum Fixtures {
    /// Bump when a fixture's recipe changes (what is saved, not the format).
    static let recipeVersion = 1

    /// `$LOGSTORE_BENCH_FIXTURES`, else `Benchmarks/.cache/fixtures/format-<version>.<revision>`.
    public static let root: String = {
        if let path = ProcessInfo.processInfo.environment["LOGSTORE_BENCH_FIXTURES"], !path.isEmpty {
            return path + "/format-\(FormatConstants.formatVersion).\(FormatConstants.documentRevision)"
        }
        // …/Benchmarks/Sources/BenchmarkSupport/StateWorkloads.swift → …/Benchmarks/.cache/fixtures
        return URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".cache/fixtures/format-\(FormatConstants.formatVersion).\(FormatConstants.documentRevision)").path
    }()

    /// The fixture called `name` (built by `build` into the directory it is given when missing),
    /// and the facts `build` returned (kept in `fixture.json`).
    static func prepare(_ name: String, build: (String) throws -> [String: String]) throws -> (
        path: String, facts: [String: String]
    ) {
        let path = root + "/" + name + "-r\(recipeVersion)"
        let factsPath = path + "/fixture.json"
        if let data = FileManager.default.contents(atPath: factsPath),
            let facts = try? JSONDecoder().decode([String: String].self, from: data)
        {
            return (path, facts)
        }
        try? FileManager.default.removeItem(atPath: path)
        let building = path + ".building-\(getpid())"
        try? FileManager.default.removeItem(atPath: building)
        try FileManager.default.createDirectory(atPath: building, withIntermediateDirectories: true)
        FileHandle.standardError.write(Data("building fixture \(name) in \(root) (once per format version)\n".utf8))
        let started = monotonicNanoseconds()
        var facts = try build(building)
        facts["fixtureBuildSeconds"] = String(format: "%.1f", Double(monotonicNanoseconds() - started) / 1e9)
        try JSONEncoder().encode(facts).write(to: URL(fileURLWithPath: building + "/fixture.json"))
        try FileManager.default.moveItem(atPath: building, toPath: path)
        return (path, facts)
    }

    static func configuration(_ directory: String, durability: Durability = .synchronous) -> LogStoreConfiguration {
        // No automatic checkpoints: the fixtures decide where checkpoints are.
        LogStoreConfiguration(directory: directory, durability: durability, checkpointIntervalByteCount: 0)
    }

    /// Inserts `count` benchmark Trips in saves of `perSave`; returns their identifiers.
    static func insertTrips(_ store: LogStore, count: Int, perSave: Int = 1_000) throws -> [PersistentIdentifier] {
        var identifiers: [PersistentIdentifier] = []
        identifiers.reserveCapacity(count)
        var index = 0
        while index < count {
            var request = DataStoreSaveChangesRequest<DefaultSnapshot>()
            for offset in 0..<min(perSave, count - index) {
                request.inserted.append(
                    DefaultSnapshot(
                        persistentIdentifier: .temporary(entityName: Trip.entityName),
                        values: TripValues(index: index + offset).attributeValues))
            }
            let result = try store.save(request)
            identifiers += request.inserted.map { result.remappedIdentifiers[$0.persistentIdentifier]! }
            index += request.inserted.count
        }
        return identifiers
    }

    /// `count` saves of one update each — a new destination, "Stop <n>" — round-robin over
    /// `identifiers` (P5's and the long soak's fixtures); `saved(n)` runs after save n.
    static func updateRoundRobin(
        _ store: LogStore, _ identifiers: [PersistentIdentifier], count: Int, saved: (Int) -> Void = { _ in }
    ) throws {
        for transaction in 0..<count {
            var request = DataStoreSaveChangesRequest<DefaultSnapshot>()
            request.updated = [
                DefaultSnapshot(
                    persistentIdentifier: identifiers[transaction % identifiers.count],
                    values: ["destination": .string("Stop \(transaction)")])
            ]
            _ = try store.save(request)
            saved(transaction)
        }
    }

    /// Payload bytes (uncompressed) of the records of a checkpoint file — the state it holds
    /// as the format encodes it (docs/FORMAT.md §9: a 64-byte file header, then 32-byte record
    /// headers each followed by its stored payload).
    public static func checkpointUncompressedByteCount(_ path: String) throws -> (
        file: Int, uncompressed: Int, records: Int
    ) {
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let fileHeader = 64
        let recordHeader = FormatConstants.recordHeaderByteCount
        var position = fileHeader
        var uncompressed = 0
        var records = 0
        while position + recordHeader <= bytes.count {
            let decoded = bytes[position..<position + recordHeader].withUnsafeBytes {
                RecordHeader.decode($0, expectedOffset: UInt64(position - fileHeader))
            }
            guard case .valid(let header) = decoded else {
                throw HarnessError("\(path): no valid record header at \(position)")
            }
            uncompressed += Int(header.uncompressedByteCount)
            records += 1
            position += Int(header.recordByteCount)
        }
        guard position == bytes.count else {
            throw HarnessError("\(path): \(bytes.count - position) bytes after the last record")
        }
        return (bytes.count, uncompressed, records)
    }

    static func newestCheckpoint(in directory: String) throws -> String? {
        try FileManager.default.contentsOfDirectory(atPath: directory)
            .filter { CheckpointFileName.offset($0) != nil }
            .max { CheckpointFileName.offset($0)! < CheckpointFileName.offset($1)! }
            .map { directory + "/" + $0 }
    }
}

/// P5: opening a store = loading its newest checkpoint (if any) and replaying the log after it.
/// The fixture: `entities` Trips inserted (saves of 1,000), then `transactions` saves of one
/// update each (a new destination), round-robin over the Trips. `replay` holds no checkpoint;
/// `checkpoint` is a copy of it with a checkpoint at the end of the log. One operation = open the
/// store through `ModelContainer` (everything folded), then close it.
public final class StoreOpenWorkload: Workload, @unchecked Sendable {
    // @unchecked: single-threaded (threads: 1); the harness calls perform and counters in turn.
    public enum Variant: String, Sendable { case replay, checkpoint }

    let directory: String
    let variant: Variant
    let fixtureFacts: [String: String]
    let changesPerOpen: Int
    let recordsPerOpen: Int
    var opens = 0

    public init(profile: BenchmarkProfile, variant: Variant) throws {
        let transactions = profile.isSmoke ? 2_000 : 1_000_000
        let entities = profile.isSmoke ? 100 : 10_000
        let (path, facts) = try Fixtures.prepare("p5-\(transactions)x\(entities)") { building in
            try Self.build(building, transactions: transactions, entities: entities)
        }
        self.variant = variant
        directory = path + "/" + variant.rawValue
        fixtureFacts = facts
        changesPerOpen = Int(facts["changes"] ?? "") ?? 0
        // Records replayed per open: all of them, or none after a checkpoint at the end.
        recordsPerOpen = variant == .replay ? Int(facts["transactionRecords"] ?? "") ?? 0 : 0
    }

    static func build(_ building: String, transactions: Int, entities: Int) throws -> [String: String] {
        let replay = building + "/replay"
        let container = try ModelContainer(
            for: tripModels, configuration: Fixtures.configuration(replay, durability: .none))
        let store = container.dataStore(as: LogStore.self)!
        let identifiers = try Fixtures.insertTrips(store, count: entities)
        let insertRecords = (entities + 999) / 1_000
        try Fixtures.updateRoundRobin(store, identifiers, count: transactions)
        let logBytes = store.logEndOffset
        try store.close()
        // The checkpoint variant: the same log, plus a checkpoint at its end.
        let checkpointed = building + "/checkpoint"
        try FileManager.default.copyItem(atPath: replay, toPath: checkpointed)
        let copy = try ModelContainer(for: tripModels, configuration: Fixtures.configuration(checkpointed))
        let copyStore = copy.dataStore(as: LogStore.self)!
        let offset = try copyStore.checkpoint()
        try copyStore.close()
        guard let checkpointFile = try Fixtures.newestCheckpoint(in: checkpointed) else {
            throw HarnessError("no checkpoint written in \(checkpointed)")
        }
        let checkpoint = try Fixtures.checkpointUncompressedByteCount(checkpointFile)
        return [
            "transactions": String(transactions), "entities": String(entities),
            "transactionRecords": String(transactions + insertRecords),
            "changes": String(transactions + entities), "logBytes": String(logBytes),
            "checkpointOffset": String(offset), "checkpointFileBytes": String(checkpoint.file),
            "checkpointUncompressedBytes": String(checkpoint.uncompressed),
        ]
    }

    public func perform(thread: Int, index: Int) throws {
        let container = try ModelContainer(for: tripModels, configuration: Fixtures.configuration(directory))
        let store = container.dataStore(as: LogStore.self)!
        if variant == .checkpoint && store.newestCheckpointOffset == nil {
            throw HarnessError("\(directory) opened without a checkpoint")
        }
        try store.close()
        opens += 1
    }

    public var counters: [String: Double] {
        ["opens": Double(opens), "changes": Double(opens * changesPerOpen), "records": Double(opens * recordsPerOpen)]
    }

    public var facts: [String: String] {
        fixtureFacts.merging([
            "variant": variant.rawValue, "changesPerOpen": String(changesPerOpen),
            "recordsReplayedPerOpen": String(recordsPerOpen),
        ]) { $1 }
    }
}

/// P8: resident memory of a store holding `entities` live Trips, opened from its checkpoint (at
/// the end of the log), against the checkpoint's uncompressed bytes. One operation = open, read
/// the process's resident set, close. The baseline is read before each open, after `malloc_trim`
/// returned the free heap to the system; the peak is the kernel's high-water mark, reset before
/// the open (`/proc/self/clear_refs`).
///
/// Then, as a live store: two durable one-Trip saves (the first is the working state's first
/// change after the open), a third while another thread's fetch scans the published Trips, and
/// the resident set after them — facts only (the working and the published state share their rows
/// until the first save; what a save costs while a fetch holds the published state).
public final class ResidentMemoryWorkload: Workload, @unchecked Sendable {
    // @unchecked: single-threaded (threads: 1; the fetch thread only reads the store).
    let directory: String
    let fixtureFacts: [String: String]
    var baselineBytes: [Int] = []
    var openBytes: [Int] = []
    var peakBytes: [Int] = []
    var firstSaveNanoseconds: [UInt64] = []
    var secondSaveNanoseconds: [UInt64] = []
    var saveDuringFetchNanoseconds: [UInt64] = []
    var savesBytes: [Int] = []

    public init(profile: BenchmarkProfile) throws {
        let entities = profile.isSmoke ? 2_000 : 1_000_000
        let (path, facts) = try Fixtures.prepare("p8-\(entities)") { building in
            let directory = building + "/store"
            let container = try ModelContainer(
                for: tripModels, configuration: Fixtures.configuration(directory, durability: .none))
            let store = container.dataStore(as: LogStore.self)!
            _ = try Fixtures.insertTrips(store, count: entities)
            let offset = try store.checkpoint()
            try store.close()
            guard let file = try Fixtures.newestCheckpoint(in: directory) else {
                throw HarnessError("no checkpoint in \(directory)")
            }
            let checkpoint = try Fixtures.checkpointUncompressedByteCount(file)
            return [
                "entities": String(entities), "checkpointOffset": String(offset),
                "checkpointFileBytes": String(checkpoint.file),
                "checkpointUncompressedBytes": String(checkpoint.uncompressed),
                "checkpointRecords": String(checkpoint.records),
            ]
        }
        directory = path + "/store"
        copy = path + "/live-copy"
        fixtureFacts = facts
    }

    /// The open and the saves use a copy of the fixture (the saves must not change it).
    let copy: String

    public func perform(thread: Int, index: Int) throws {
        try? FileManager.default.removeItem(atPath: copy)
        try FileManager.default.copyItem(atPath: directory, toPath: copy)
        defer { try? FileManager.default.removeItem(atPath: copy) }
        ProcessMemory.trimHeap()
        let baseline = ProcessMemory.residentBytes()
        ProcessMemory.resetPeak()
        let container = try ModelContainer(for: tripModels, configuration: Fixtures.configuration(copy))
        let store = container.dataStore(as: LogStore.self)!
        let open = ProcessMemory.residentBytes()
        let peak = ProcessMemory.peakResidentBytes()
        let live = try ModelContext(container).fetchCount(FetchDescriptor<Trip>())
        guard live == Int(fixtureFacts["entities"] ?? "") else { throw HarnessError("\(live) Trips after open") }
        baselineBytes.append(baseline)
        openBytes.append(open)
        peakBytes.append(peak)

        func timedSave(_ name: String) throws -> UInt64 {
            let context = ModelContext(container)
            context.insert(Trip(name: "\(name) \(index)", destination: "P8 live"))
            let started = monotonicNanoseconds()
            try context.save()
            return monotonicNanoseconds() - started
        }
        firstSaveNanoseconds.append(try timedSave("first save"))
        secondSaveNanoseconds.append(try timedSave("second save"))
        // A fetch that scans every Trip (its predicate matches none), started on another thread;
        // the save runs while it scans.
        let started = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        let outcome = Mutex<(done: Bool, error: (any Error)?)>((false, nil))
        let fetching = Thread {
            started.signal()
            do {
                _ = try ModelContext(container).fetchCount(
                    FetchDescriptor<Trip>(predicate: #Predicate { $0.destination == "nowhere" }))
            } catch {
                outcome.withLock { $0.error = error }
            }
            outcome.withLock { $0.done = true }
            finished.signal()
        }
        fetching.start()
        started.wait()
        usleep(2_000)
        let fetchWasRunning = !outcome.withLock { $0.done }
        let duringFetch = try timedSave("save during a fetch")
        finished.wait()
        if let error = outcome.withLock({ $0.error }) { throw error }
        // Only a save that started while the fetch scanned is one "during a fetch".
        if fetchWasRunning { saveDuringFetchNanoseconds.append(duringFetch) }
        savesBytes.append(ProcessMemory.residentBytes())
        try store.close()
    }

    public var facts: [String: String] {
        func median(_ values: [Int]) -> String { values.isEmpty ? "" : String(values.sorted()[values.count / 2]) }
        return fixtureFacts.merging([
            "rssBaselineBytes": median(baselineBytes), "rssOpenBytes": median(openBytes),
            "rssPeakBytes": median(peakBytes), "opens": String(openBytes.count),
            "firstSaveMicroseconds": median(firstSaveNanoseconds.map { Int($0 / 1_000) }),
            "secondSaveMicroseconds": median(secondSaveNanoseconds.map { Int($0 / 1_000) }),
            "saveDuringFetchMicroseconds": median(saveDuringFetchNanoseconds.map { Int($0 / 1_000) }),
            "rssAfterSavesBytes": median(savesBytes),
        ]) { $1 }
    }
}

/// The process's resident set from `/proc/self/status`.
enum ProcessMemory {
    static func residentBytes() -> Int { field("VmRSS:") }
    static func peakResidentBytes() -> Int { field("VmHWM:") }

    /// glibc's `malloc_trim(0)` (not in the Glibc module): gives the free heap back to the system,
    /// so that the baseline is what is live, not what earlier work left cached in malloc.
    static func trimHeap() {
        guard let handle = dlopen(nil, RTLD_NOW), let symbol = dlsym(handle, "malloc_trim") else { return }
        typealias MallocTrim = @convention(c) (Int) -> Int32
        _ = unsafeBitCast(symbol, to: MallocTrim.self)(0)
    }

    /// Writing 5 to `clear_refs` resets the peak resident set (VmHWM) to the current one.
    static func resetPeak() {
        if let handle = FileHandle(forWritingAtPath: "/proc/self/clear_refs") {
            handle.write(Data("5".utf8))
            try? handle.close()
        }
    }

    private static func field(_ name: String) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name) }),
            let kilobytes = Int(
                line.dropFirst(name.count).trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "")
        else { return 0 }
        return kilobytes * 1_024
    }
}
