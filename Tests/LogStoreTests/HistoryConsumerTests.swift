import Foundation
import LogStoreEngine
import LogStoreTestSupport
import SampleTrips
import Testing

@testable import LogStore

/// History consumers (D7): a registration is durable before it returns, an expired token is
/// refused for a bookmark, and a bookmark behind the low-water mark holds nothing back.
@Suite struct HistoryConsumerTests {
    typealias H = HistoryTests

    /// Found by the history review (finding 1) (wrong answer / retention stops): a consumer whose bookmark is behind L
    /// (after a forced deletion, or after `acknowledgeHistory` with an old token) makes every
    /// later non-forced `deleteHistory` — and every retention pass — throw
    /// `.log(offsetOutOfRange)`, because `recordEnd(of:)` looks the bookmark's record up in a
    /// segment that was deleted. D7 says the deletion is clamped to the bookmark: with the
    /// bookmark already behind L that is a no-op, not an error.
    @Test func aBookmarkBehindDeletedHistoryHoldsNothingBack() throws {
        let (container, store) = try H.open(SimulatedFileSystem(), segmentByteCountMax: 1024)
        var tokens: [DefaultHistoryToken] = []
        for number in 0..<40 { tokens.append(try H.saveTrip(container, number)) }
        try store.registerHistoryConsumer("sync", after: tokens[2])
        let cutoff = tokens[30]
        let forced = try store.deleteHistory(
            HistoryDescriptor(predicate: #Predicate { $0.token <= cutoff }), force: true)
        #expect(!forced.deletedSegments.isEmpty)
        #expect(tokens[2].offset < store.log.startOffset)  // the bookmark's record is gone

        // Clamped to "sync" (behind L): nothing to do — but it throws.
        #expect(throws: Never.self) { try store.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>()) }
        // Retention (what the background passes run) fails the same way, so history then grows
        // without bound (only logged by the background thread).
        #expect(throws: Never.self) { try store.applyRetention(HistoryRetention(historyByteCountMax: 1)) }
        try store.close()
    }

    /// Found by the history review (finding 1, second path): `acknowledgeHistory` accepts a token below L (validation
    /// skips it), which moves the bookmark behind L without any force.
    @Test func registeringOrAcknowledgingAnExpiredTokenIsRefused() throws {
        let (container, store) = try H.open(SimulatedFileSystem(), segmentByteCountMax: 1024)
        var tokens: [DefaultHistoryToken] = []
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

    /// Found by the history review (finding 3) (data loss for a consumer): `registerHistoryConsumer` returns before its
    /// bookmark record is durable (no sync, and no later save makes it durable). A power cut then
    /// forgets the registration, and the next deletion removes history the consumer was promised.
    /// (Losing an *acknowledgement* only keeps more history; losing a registration keeps less.)
    @Test func aRegistrationSurvivesAPowerCutAndHoldsItsHistory() throws {
        let fileSystem = SimulatedFileSystem()
        let (container, store) = try H.open(fileSystem, segmentByteCountMax: 1024)
        var tokens: [DefaultHistoryToken] = []
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
}
