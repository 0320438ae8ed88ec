import Foundation
import LogStore
import LogStoreEngine
import SampleTrips

/// Issue 13, item 4: the long soak, run only with `LOGSTORE_LONG=1` (StateBenchmarks registers it
/// then). The fixture: 1,000,000 Trips inserted in saves of 1,000, then one-update transactions
/// (a new destination, round-robin over the Trips) up to 10,000,000 transaction records — built
/// once with durability `.none`, no checkpoint, and cached like P5's. One operation, on a fresh
/// copy of it:
///
/// 1. **open**: `ModelContainer` on the store — a full replay of the 10M records — and the
///    resident-set growth that leaves (after `malloc_trim`, as P8);
/// 2. **save into it**: 2,000 saves through one long-lived `ModelContext` holding the first 2,000
///    Trips, durability `.synchronous`, each updating one Trip and every tenth inserting one;
/// 3. **compact**: `deleteHistory` through the 9,000,000th transaction (a checkpoint at the low-
///    water mark, then every segment wholly below it deleted);
/// 4. **reopen** from that checkpoint and check the counts (Trips, retained transactions) and the
///    values it samples (the first Trip's last update, the last saved Trip, an inserted one); the
///    resident growth of this open against the checkpoint's uncompressed bytes is P8's ratio at
///    the soak's scale.
///
/// Anything it reads back that differs from what was written stops the run (a `HarnessError`).
public final class LongSoakWorkload: Workload, @unchecked Sendable {
    // @unchecked: single-threaded (threads: 1), one operation.
    static let entities = 1_000_000
    static let transactionRecords = 10_000_000
    static let saves = 2_000
    static let deleteThrough = 9_000_000

    let fixture: String
    let fixtureFacts: [String: String]
    let workDirectory: String
    var figures: [String: String] = [:]

    public init(profile: BenchmarkProfile, workDirectory: String) throws {
        let entities = profile.isSmoke ? 2_000 : Self.entities
        let records = profile.isSmoke ? 20_000 : Self.transactionRecords
        let (path, facts) = try Fixtures.prepare("soak-\(records)x\(entities)") { building in
            let directory = building + "/store"
            let container = try ModelContainer(
                for: tripModels, configuration: Fixtures.configuration(directory, durability: .none))
            let store = try container.dataStore(as: LogStore.self).unwrap(or: "not a LogStore")
            let identifiers = try Fixtures.insertTrips(store, count: entities)
            let insertRecords = (entities + 999) / 1_000
            let deleteThrough = min(Self.deleteThrough, records * 9 / 10)
            var deleteToken: DefaultHistoryToken?
            try Fixtures.updateRoundRobin(store, identifiers, count: records - insertRecords) { transaction in
                if insertRecords + transaction + 1 == deleteThrough { deleteToken = store.currentToken }
            }
            let logBytes = store.logEndOffset
            try store.close()
            let token = try deleteToken.unwrap(or: "no token at transaction \(deleteThrough)")
            return [
                "entities": String(entities), "transactionRecords": String(records),
                "updates": String(records - insertRecords), "logBytes": String(logBytes),
                "deleteThrough": String(deleteThrough),
                "deleteToken": String(decoding: try JSONEncoder().encode(token), as: UTF8.self),
            ]
        }
        fixture = path + "/store"
        fixtureFacts = facts
        self.workDirectory = workDirectory + "/soak"
    }

    public func perform(thread: Int, index: Int) throws {
        let entities = Int(fixtureFacts["entities"] ?? "") ?? 0
        let updates = Int(fixtureFacts["updates"] ?? "") ?? 0
        let records = Int(fixtureFacts["transactionRecords"] ?? "") ?? 0
        try? FileManager.default.removeItem(atPath: workDirectory)
        try FileManager.default.createDirectory(
            atPath: (workDirectory as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: fixture, toPath: workDirectory)
        defer { try? FileManager.default.removeItem(atPath: workDirectory) }
        let configuration = LogStoreConfiguration(directory: workDirectory)

        // 1. Open: a full replay.
        ProcessMemory.trimHeap()
        let baseline = ProcessMemory.residentBytes()
        ProcessMemory.resetPeak()
        var started = monotonicNanoseconds()
        var container: ModelContainer? = try ModelContainer(for: tripModels, configuration: configuration)
        let openSeconds = Double(monotonicNanoseconds() - started) / 1e9
        let opened = ProcessMemory.residentBytes()
        let openPeak = ProcessMemory.peakResidentBytes()
        var store = try container!.dataStore(as: LogStore.self).unwrap(or: "not a LogStore")
        let count = try ModelContext(container!).fetchCount(FetchDescriptor<Trip>())
        guard count == entities else { throw HarnessError("\(count) Trips after the open, expected \(entities)") }
        // The last update of the first Trip (updates go round-robin over the Trips in insertion
        // order): "Stop <the last multiple of entities below the update count>".
        let lastForFirst = ((updates - 1) / entities) * entities
        try Self.expectDestination(of: TripValues(index: 0).name, "Stop \(lastForFirst)", in: container!)

        // 2. Save into it through one long-lived context holding the first Trips (a fetch in
        // insertion order), each save durable.
        let saves = min(Self.saves, entities)
        var inserted = 0
        let saveSeconds: Double
        do {
            let context = ModelContext(container!)
            var first = FetchDescriptor<Trip>()
            first.fetchLimit = saves
            let trips = try context.fetch(first)
            guard trips.count == saves, trips[saves - 1].name == TripValues(index: saves - 1).name else {
                throw HarnessError("the first \(saves) Trips in insertion order are not the first inserted")
            }
            started = monotonicNanoseconds()
            for save in 0..<saves {
                trips[save].destination = "Soak \(save)"
                if save % 10 == 0 {
                    context.insert(Trip(name: "Soak trip \(save)", destination: "Soak"))
                    inserted += 1
                }
                try context.save()
            }
            saveSeconds = Double(monotonicNanoseconds() - started) / 1e9
        }
        let lastName = TripValues(index: saves - 1).name
        try Self.expectDestination(of: lastName, "Soak \(saves - 1)", in: container!)

        // 3. Compact: history through the deleteThrough-th transaction record (its token was
        // taken when the fixture was built).
        let deleteThrough = Int(fixtureFacts["deleteThrough"] ?? "") ?? 0
        let token = try JSONDecoder().decode(DefaultHistoryToken.self, from: Data((fixtureFacts["deleteToken"] ?? "").utf8))
        let expectedRetained = records - deleteThrough + saves
        // Counted, then let go (a million transactions must not sit in the reopen's baseline).
        let afterCount = try store.fetchHistory(
            HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token > token })
        ).count
        guard afterCount == expectedRetained else {
            throw HarnessError("\(afterCount) transactions after the token, expected \(expectedRetained)")
        }
        let bytesBefore = try Self.directoryBytes(workDirectory)
        started = monotonicNanoseconds()
        try store.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token <= token }))
        let compactSeconds = Double(monotonicNanoseconds() - started) / 1e9
        let bytesAfter = try Self.directoryBytes(workDirectory)
        let retained = try store.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).count
        guard retained == expectedRetained, store.historyLowWaterMark == token else {
            throw HarnessError("\(retained) transactions retained after deleting through #\(deleteThrough), expected \(expectedRetained)")
        }
        try store.close()
        container = nil

        // 4. Reopen from the checkpoint the compaction wrote; check everything again.
        ProcessMemory.trimHeap()
        let reopenBaseline = ProcessMemory.residentBytes()
        ProcessMemory.resetPeak()
        started = monotonicNanoseconds()
        container = try ModelContainer(for: tripModels, configuration: configuration)
        let reopenSeconds = Double(monotonicNanoseconds() - started) / 1e9
        let reopened = ProcessMemory.residentBytes()
        store = try container!.dataStore(as: LogStore.self).unwrap(or: "not a LogStore")
        let recount = try ModelContext(container!).fetchCount(FetchDescriptor<Trip>())
        guard recount == entities + inserted else {
            throw HarnessError("\(recount) Trips after the reopen, expected \(entities + inserted)")
        }
        try Self.expectDestination(of: lastName, "Soak \(saves - 1)", in: container!)
        try Self.expectDestination(of: "Soak trip 0", "Soak", in: container!)
        guard let checkpointFile = try Fixtures.newestCheckpoint(in: workDirectory) else {
            throw HarnessError("no checkpoint after the compaction")
        }
        let checkpoint = try Fixtures.checkpointUncompressedByteCount(checkpointFile)
        try store.close()
        container = nil

        figures = [
            "openSeconds": String(format: "%.2f", openSeconds),
            "openResidentGrowthBytes": String(opened - baseline),
            "openPeakGrowthBytes": String(openPeak - baseline),
            "saves": String(saves), "savesPerSecond": String(format: "%.0f", Double(saves) / saveSeconds),
            "compactSeconds": String(format: "%.2f", compactSeconds),
            "storeBytesBeforeCompaction": String(bytesBefore), "storeBytesAfterCompaction": String(bytesAfter),
            "transactionsRetained": String(retained),
            "reopenSeconds": String(format: "%.3f", reopenSeconds),
            "reopenResidentGrowthBytes": String(reopened - reopenBaseline),
            "liveTrips": String(recount),
            "checkpointFileBytes": String(checkpoint.file),
            "checkpointUncompressedBytes": String(checkpoint.uncompressed),
        ]
    }

    static func expectDestination(of name: String, _ destination: String, in container: ModelContainer) throws {
        let trips = try ModelContext(container).fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.name == name }))
        guard trips.count == 1, trips[0].destination == destination else {
            throw HarnessError("\(name): \(trips.map(\.destination)), expected [\(destination)]")
        }
    }

    static func directoryBytes(_ path: String) throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: path).reduce(0) { total, name in
            let attributes = try FileManager.default.attributesOfItem(atPath: path + "/" + name)
            return total + ((attributes[.size] as? NSNumber)?.intValue ?? 0)
        }
    }

    public var facts: [String: String] { fixtureFacts.merging(figures) { $1 } }
}
