import Foundation
@testable import LogStore
import LogStoreEngine
import LogStoreTestSupport
import SampleTrips
import Testing

/// Regression tests from the review of issue #5 (History): each failed before its fix and names
/// the finding of the review report it demonstrates.
@Suite struct HistoryReviewTests {
    typealias H = HistoryTests

    /// REVIEW finding 1 (wrong answer / retention stops): a consumer whose bookmark is behind L
    /// (after a forced deletion, or after `acknowledgeHistory` with an old token) makes every
    /// later non-forced `deleteHistory` — and every retention pass — throw
    /// `.log(offsetOutOfRange)`, because `recordEnd(of:)` looks the bookmark's record up in a
    /// segment that was deleted. D7 says the deletion is clamped to the bookmark: with the
    /// bookmark already behind L that is a no-op, not an error.
    @Test func review1_aBookmarkBehindDeletedHistoryMakesDeleteHistoryThrow() throws {
        let (container, store) = try H.open(SimulatedFileSystem(), segmentByteCountMax: 1024)
        var tokens: [HistoryToken] = []
        for number in 0..<40 { tokens.append(try H.saveTrip(container, number)) }
        try store.registerHistoryConsumer("sync", after: tokens[2])
        let cutoff = tokens[30]
        let forced = try store.deleteHistory(HistoryDescriptor(predicate: #Predicate { $0.token <= cutoff }), force: true)
        #expect(!forced.deletedSegments.isEmpty)
        #expect(tokens[2].offset < store.log.startOffset) // the bookmark's record is gone

        // Clamped to "sync" (behind L): nothing to do — but it throws.
        #expect(throws: Never.self) { try store.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>()) }
        // Retention (what the background passes run) fails the same way, so history then grows
        // without bound (only logged by the background thread).
        #expect(throws: Never.self) { try store.applyRetention(HistoryRetention(historyByteCountMax: 1)) }
        try store.close()
    }

    /// REVIEW finding 1, second path: `acknowledgeHistory` accepts a token below L (validation
    /// skips it), which moves the bookmark behind L without any force.
    @Test func review1b_acknowledgingAnOldTokenMakesDeleteHistoryThrow() throws {
        let (container, store) = try H.open(SimulatedFileSystem(), segmentByteCountMax: 1024)
        var tokens: [HistoryToken] = []
        for number in 0..<40 { tokens.append(try H.saveTrip(container, number)) }
        let cutoff = tokens[30]
        try store.deleteHistory(HistoryDescriptor(predicate: #Predicate { $0.token <= cutoff }))
        try store.registerHistoryConsumer("sync")
        // Fixed: an expired token is refused, so the bookmark cannot move behind L this way.
        #expect(throws: LogStoreError.historyTokenExpired(resumeToken: cutoff)) {
            try store.acknowledgeHistory("sync", through: tokens[1])
        }
        #expect(throws: LogStoreError.historyTokenExpired(resumeToken: cutoff)) {
            try store.registerHistoryConsumer("late", after: tokens[1])
        }
        #expect(throws: Never.self) { try store.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>()) }
        try store.close()
    }

    /// REVIEW finding 2 (wrong answer): after a compaction the log starts above 0, but
    /// `refreshAfterLogFailure` (run after a fail-stop in `.none`/`.batched` mode) still folds
    /// the log from its start with an empty state and an empty intern table. The fold throws
    /// (first record is a transaction with an unknown schema id) and `try?` swallows it, so the
    /// store keeps serving the save the log cut back; if it did not throw it would serve the
    /// state without everything in the deleted segments.
    @Test func review2_afterCompactionAFailedSyncStillServesExactlyWhatTheLogHolds() throws {
        let fileSystem = SimulatedFileSystem()
        let (container, store) = try H.open(fileSystem, segmentByteCountMax: 1024, durability: .none)
        for number in 0..<30 { try H.saveTrip(container, number) }
        try store.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        #expect(store.log.startOffset > 0)
        try store.log.sync()
        // Let the syncer finish its index writes (their trim sync of a sealed segment would
        // otherwise consume the fault), then fail every sync of a segment from now on.
        Thread.sleep(forTimeInterval: 0.2)
        fileSystem.injectFault(.sync, path: .any, repeating: true)
        let context = ModelContext(container)
        context.insert(Trip(name: "cut back", destination: "", startDate: Date(), endDate: Date()))
        try context.save() // returns after the write in .none mode
        #expect(throws: (any Error).self) { try store.log.sync() } // fail-stop: cut back to the durable end
        let names = Set((store.allSnapshots()["Trip"] ?? []).compactMap { $0["name"] })
        #expect(names.count == 30)
        #expect(!names.contains(.string("cut back")))
        try? store.close()
    }

    /// REVIEW finding 3 (data loss for a consumer): `registerHistoryConsumer` returns before its
    /// bookmark record is durable (no sync, and no later save makes it durable). A power cut then
    /// forgets the registration, and the next deletion removes history the consumer was promised.
    /// (Losing an *acknowledgement* only keeps more history; losing a registration keeps less.)
    @Test func review3_aRegistrationIsLostByAPowerCutAndItsHistoryDeleted() throws {
        let fileSystem = SimulatedFileSystem()
        let (container, store) = try H.open(fileSystem, segmentByteCountMax: 1024)
        var tokens: [HistoryToken] = []
        for number in 0..<20 { tokens.append(try H.saveTrip(container, number)) }
        try store.registerHistoryConsumer("sync", after: tokens[3])
        #expect(store.historyConsumers.map(\.name) == ["sync"])
        let cut = fileSystem.powerCut(.nothingUnsynced)
        try? store.close()

        let (_, reopened) = try H.open(cut, segmentByteCountMax: 1024)
        #expect(reopened.historyConsumers.map(\.name) == ["sync"])
        try reopened.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        // The consumer's next fetch from its bookmark must still work.
        #expect(throws: Never.self) { try reopened.fetchHistory(H.after(tokens[3])) }
        try reopened.close()
    }

    /// REVIEW finding 4 (wrong answer / time travel broken): `LogStore.replay(directory:through:)`
    /// (what `logstore replay` prints; D4 calls the checkpoint at L "the base for time travel")
    /// still folds from the log's first kept record with an empty state and intern table. After
    /// any compaction it throws `corruptRecord` (the first kept transaction names schema ids the
    /// empty table lacks) instead of folding from the checkpoint at L.
    @Test func review4_timeTravelAfterCompactionStartsFromTheCheckpointAtL() throws {
        let fileSystem = SimulatedFileSystem()
        let (container, store) = try H.open(fileSystem, segmentByteCountMax: 1024)
        var tokens: [HistoryToken] = []
        for number in 0..<40 { tokens.append(try H.saveTrip(container, number)) }
        let cutoff = tokens[30]
        try store.deleteHistory(HistoryDescriptor(predicate: #Predicate { $0.token <= cutoff }))
        #expect(store.log.startOffset > 0)
        try store.close()

        let whole = try LogStore.replay(directory: H.directory, fileSystem: fileSystem)
        #expect(whole.entities.first { $0.name == "Trip" }?.rows.count == 40)
        let atToken = try LogStore.replay(directory: H.directory, fileSystem: fileSystem, through: tokens[35].offset)
        #expect(atToken.entities.first { $0.name == "Trip" }?.rows.count == 36)
    }

    /// REVIEW finding 6 (nit, wrong answer for a bad token): when L's segment was deleted the
    /// log starts at L's end, and `HistoryReader.verify` skips every token below the log's start
    /// — including a token strictly inside L's record, which no transaction ever had. Such a
    /// token (a restored backup's, a hand-edited one) is taken as "after L" and returns all
    /// retained history instead of throwing `historyTokenInvalid`.
    @Test func review6_aTokenInsideLsDeletedRecordIsInvalid() throws {
        let (container, store) = try H.open(SimulatedFileSystem(), segmentByteCountMax: 1024)
        var tokens: [HistoryToken] = []
        for number in 0..<40 { tokens.append(try H.saveTrip(container, number)) }
        // L = a transaction that is the last record of its segment, so its segment is deleted.
        let bases = Set(store.log.segmentBaseOffsets)
        let index = try #require((0..<39).first { bases.contains(tokens[$0 + 1].offset) && $0 > 5 })
        let mark = tokens[index]
        try store.deleteHistory(HistoryDescriptor(predicate: #Predicate { $0.token <= mark }))
        #expect(store.log.startOffset == tokens[index + 1].offset)
        let forged = HistoryToken(storeIdentifier: mark.storeIdentifier, offset: mark.offset + 1, check: 0)
        #expect {
            try store.fetchHistory(H.after(forged))
        } throws: { error in
            if case LogStoreError.historyTokenInvalid = error { return true }
            return false
        }
        try store.close()
    }
}
