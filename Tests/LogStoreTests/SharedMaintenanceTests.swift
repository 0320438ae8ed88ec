import Foundation
@testable import LogStore
import LogStoreEngine
import LogStoreTestSupport
import SampleTrips
import Synchronization
import Testing

/// Checkpoints and history deletion in a store shared by writers (D11, `MAINTENANCE`): the
/// findings of the review of 2dddcf6, each as what two writers of one store do. Two stores in
/// this process stand for the two processes (``TaggedPosixFileSystem``); the second one's
/// change watcher is stopped, so it follows the first only when it is called — as a process
/// that was suspended, or slow.
@Suite struct SharedMaintenanceTests {
    static func configuration(_ directory: String, fileSystem: any FileSystem, segmentByteCountMax: UInt64)
        -> LogStoreConfiguration
    {
        var configuration = ModelConfiguration(url: URL(fileURLWithPath: directory))
        configuration.allowsOtherWriters = true
        configuration.segmentByteCountMax = segmentByteCountMax
        configuration.fileSystem = fileSystem
        return configuration
    }

    static func open(
        _ directory: String, _ fileSystem: any FileSystem, following: Bool = true, segmentByteCountMax: UInt64 = 2048
    ) throws -> (ModelContainer, LogStore) {
        let container = try ModelContainer(
            for: Trip.self,
            configurations: configuration(directory, fileSystem: fileSystem, segmentByteCountMax: segmentByteCountMax))
        let store = try #require(container.dataStore(as: LogStore.self))
        if !following { store.changeWatcher.withLock { $0.watcher }?.cancel() }
        return (container, store)
    }

    static func save(_ count: Int, in container: ModelContainer, prefix: String) throws -> [String] {
        let context = ModelContext(container)
        return try (0..<count).map { number in
            let name = "\(prefix) \(number)"
            context.insert(Trip(name: name, destination: "Somewhere"))
            try context.save()
            return name
        }
    }

    /// Finding 2: a writer that had not followed the other's history deletion wrote a checkpoint
    /// recording its own older low-water mark and pruned the checkpoint recording the new one;
    /// the store then reopened with the old mark over deleted segments. Its checkpoint now
    /// follows the others and takes L from every checkpoint on disk under `MAINTENANCE`.
    @Test func aCheckpointAfterAnotherWriterDeletedHistoryRecordsTheNewLowWaterMark() throws {
        let temporary = TemporaryDirectory("shared-maintenance")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        // One segment: nothing to fall behind of, the low-water mark is what matters here.
        let (a, aStore) = try Self.open(directory, TaggedPosixFileSystem(process: 1), segmentByteCountMax: 64 << 20)
        let (b, bStore) = try Self.open(
            directory, TaggedPosixFileSystem(process: 2), following: false, segmentByteCountMax: 64 << 20)
        var names = try Self.save(30, in: a, prefix: "a")
        #expect(try ModelContext(b).fetchCount(FetchDescriptor<Trip>()) == 30)
        names += try Self.save(5, in: a, prefix: "a more")
        let compaction = try aStore.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>(), force: false)
        let mark = try #require(compaction.lowWaterMark)
        names += try Self.save(5, in: a, prefix: "a later")
        // b's view of the log ends before L's checkpoint: it has not called anything since.
        try bStore.checkpoint()
        try bStore.close()
        try aStore.close()

        let (alone, aloneStore) = try Self.open(directory, PosixFileSystem())
        #expect(aloneStore.historyLowWaterMark == mark)
        #expect(Set(try ModelContext(alone).fetch(FetchDescriptor<Trip>()).map(\.name)) == Set(names))
        #expect(try ModelContext(alone).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).count == 5)
        try aloneStore.close()
    }

    /// Finding 1: a pass cut short (an unlink failed) left segments below L that the other writer
    /// had already forgotten; its own later pass deleted only the segments in its list, above
    /// them, and left a gap — the store no longer opened ("sealed segment ends … missing"). A
    /// pass in a shared store now deletes what the directory holds below L, lowest first.
    @Test func aHistoryDeletionCutShortIsFinishedByTheOtherWritersNextPassWithoutAGap() throws {
        let temporary = TemporaryDirectory("shared-maintenance")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        let aFileSystem = TaggedPosixFileSystem(process: 1)
        let (a, aStore) = try Self.open(directory, aFileSystem)
        let (b, bStore) = try Self.open(directory, TaggedPosixFileSystem(process: 2), following: false)
        var names = try Self.save(80, in: a, prefix: "a")
        // b follows: it opens every segment a rolled to (as a process's change watcher does).
        #expect(try ModelContext(b).fetchCount(FetchDescriptor<Trip>()) == 80)
        let bases = aStore.log.segmentBaseOffsets
        #expect(bases.count > 6)
        // a's pass fails at the third segment: the first two are gone, the rest stay.
        aFileSystem.failingRemoval.withLock { $0 = String(format: "%020llu.log", bases[2]) }
        #expect(throws: (any Error).self) {
            try aStore.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>(), force: false)
        }
        aFileSystem.failingRemoval.withLock { $0 = nil }
        // b follows (it learns L and forgets the segments below it), then more saves, then b's pass.
        #expect(try ModelContext(b).fetchCount(FetchDescriptor<Trip>()) == 80)
        names += try Self.save(30, in: a, prefix: "a later")
        try bStore.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>(), force: false)
        try bStore.close()
        try aStore.close()

        let (alone, aloneStore) = try Self.open(directory, PosixFileSystem())
        #expect(!aloneStore.log.segmentBaseOffsets.contains(bases[2]))
        #expect(Set(try ModelContext(alone).fetch(FetchDescriptor<Trip>()).map(\.name)) == Set(names))
        try aloneStore.close()
    }

    /// Finding 3: a writer that did not follow while the other deleted history past segments it
    /// never opened cannot fold the records they held. Its next save said `corruption` ("no record
    /// … before the written end another writer published"); it is `reopenRequired`, naming why.
    @Test func aWriterThatFellBehindAHistoryDeletionIsToldToReopenNotThatTheStoreIsCorrupt() throws {
        let temporary = TemporaryDirectory("shared-maintenance")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        let (a, aStore) = try Self.open(directory, TaggedPosixFileSystem(process: 1))
        let (b, bStore) = try Self.open(directory, TaggedPosixFileSystem(process: 2), following: false)
        let names = try Self.save(80, in: a, prefix: "a")
        let compaction = try aStore.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>(), force: false)
        #expect(compaction.deletedSegments.count > 3)
        let context = ModelContext(b)
        context.insert(Trip(name: "b", destination: "Somewhere"))
        let error = #expect(throws: LogStoreError.self) { try context.save() }
        #expect(error?.code == .reopenRequired, "\(String(describing: error))")
        #expect(error?.message.contains("deleted history this process had not read yet") == true)
        try bStore.close()
        // Reopened, it is the store as it is.
        let (again, againStore) = try Self.open(directory, TaggedPosixFileSystem(process: 2))
        #expect(Set(try ModelContext(again).fetch(FetchDescriptor<Trip>()).map(\.name)) == Set(names))
        try againStore.close()
        try aStore.close()
        _ = a
    }

    /// Review of c0233f1 (F1): an idle writer — no fetch, no save, no tail — keeps up with the
    /// other's new segments through its change watcher, so the other's history deletion does not
    /// leave it behind (next save `reopenRequired`, as in the test above). Seen failing with the
    /// watcher started only by a history tail (the wait below ran out, the save threw).
    @Test func anIdleWriterKeepsUpWithTheOthersSegmentsAndSurvivesItsHistoryDeletion() throws {
        let temporary = TemporaryDirectory("shared-maintenance")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        // Without idle durable-end marks: b's syncer would catch up under the turn to mark.
        func open(_ process: UInt64) throws -> (ModelContainer, LogStore) {
            var configuration = Self.configuration(
                directory, fileSystem: TaggedPosixFileSystem(process: process), segmentByteCountMax: 2048)
            configuration.durableEndMarkDelay = nil
            let container = try ModelContainer(for: Trip.self, configurations: configuration)
            return (container, try #require(container.dataStore(as: LogStore.self)))
        }
        let (a, aStore) = try open(1)
        let (b, bStore) = try open(2)
        let names = try Self.save(80, in: a, prefix: "a")
        let last = try #require(aStore.log.segmentBaseOffsets.last)
        // Bounded: 30 s for b's watcher (a look every 10 ms on this wrapped file system).
        let deadline = Date().addingTimeInterval(30)
        while bStore.log.segmentBaseOffsets.last != last && Date() < deadline { usleep(2_000) }
        #expect(bStore.log.segmentBaseOffsets.last == last)
        let compaction = try aStore.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>(), force: false)
        #expect(compaction.deletedSegments.count > 3)
        let context = ModelContext(b)
        context.insert(Trip(name: "b", destination: "Somewhere"))
        try context.save()
        #expect(Set(try context.fetch(FetchDescriptor<Trip>()).map(\.name)) == Set(names + ["b"]))
        try bStore.close()
        try aStore.close()
        _ = a
    }

    /// Consumers across processes (D7 with D11): a consumer registered by one writer holds back
    /// the other's history deletion, and the other can acknowledge it without having followed
    /// first (before, its bookmarks were as of its last follow: `unknownConsumer`).
    @Test func aConsumerRegisteredByOneWriterHoldsBackTheOthersDeletionAndTheOtherAcknowledgesIt() throws {
        let temporary = TemporaryDirectory("shared-maintenance")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        let (a, aStore) = try Self.open(directory, TaggedPosixFileSystem(process: 1), following: false)
        let (b, bStore) = try Self.open(directory, TaggedPosixFileSystem(process: 2), following: false)
        _ = try Self.save(10, in: a, prefix: "a")
        let history = try ModelContext(b).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        #expect(history.count == 10)
        let kept = history[3].token
        try bStore.registerHistoryConsumer("mirror", after: history[3].token)
        // a has not followed since b registered: the acknowledgement still finds the consumer.
        try aStore.acknowledgeHistory("mirror", through: history[6].token)
        _ = try Self.save(5, in: a, prefix: "a more")
        let compaction = try aStore.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>(), force: false)
        #expect(compaction.heldBackByConsumer == "mirror")
        #expect(compaction.lowWaterMark == history[6].token)
        // b sees the consumer's acknowledgement (another process's record) and the new L.
        #expect(bStore.historyConsumers.first { $0.name == "mirror" }?.token == history[6].token)
        #expect(bStore.historyLowWaterMark == history[6].token)
        let expired = #expect(throws: LogStoreError.self) {
            _ = try ModelContext(b).fetchHistory(
                HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token > kept }))
        }
        #expect(expired?.code == .historyTokenExpired)
        try bStore.close()
        try aStore.close()
        _ = (a, b)
    }
}
