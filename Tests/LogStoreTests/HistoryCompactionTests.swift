import Foundation
import LogStoreEngine
import LogStoreTestSupport
import SampleTrips
import Testing

@testable import LogStore

/// The store after history deletion: failure refolds, time travel and token checks start from the
/// checkpoint at the low-water mark, not from the first kept record.
@Suite struct HistoryCompactionTests {
    typealias H = HistoryTests

    /// Found by the history review (finding 2) (wrong answer): after a compaction the log starts above 0, but
    /// `refreshAfterLogFailure` (run after a fail-stop in `.none`/`.batched` mode) still folds
    /// the log from its start with an empty state and an empty intern table. The fold throws
    /// (first record is a transaction with an unknown schema id) and `try?` swallows it, so the
    /// store keeps serving the save the log cut back; if it did not throw it would serve the
    /// state without everything in the deleted segments.
    @Test func aFailedSyncAfterCompactionServesExactlyWhatTheLogHolds() throws {
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
        try context.save()  // returns after the write in .none mode
        #expect(throws: (any Error).self) { try store.log.sync() }  // fail-stop: cut back to the durable end
        let names = Set((store.allSnapshots()["Trip"] ?? []).compactMap { $0["name"] })
        #expect(names.count == 30)
        #expect(!names.contains(.string("cut back")))
        try? store.close()
    }

    /// Found by the history review (finding 4) (wrong answer / time travel broken): `LogStore.replay(directory:through:)`
    /// (what `logstore replay` prints; D4 calls the checkpoint at L "the base for time travel")
    /// still folds from the log's first kept record with an empty state and intern table. After
    /// any compaction it throws `corruptRecord` (the first kept transaction names schema ids the
    /// empty table lacks) instead of folding from the checkpoint at L.
    @Test func timeTravelAfterCompactionStartsFromTheCheckpointAtL() throws {
        let fileSystem = SimulatedFileSystem()
        let (container, store) = try H.open(fileSystem, segmentByteCountMax: 1024)
        var tokens: [DefaultHistoryToken] = []
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

    /// Found by the history review (finding 6) (nit, wrong answer for a bad token): when L's segment was deleted the
    /// log starts at L's end, and `HistoryReader.verify` skips every token below the log's start
    /// — including a token strictly inside L's record, which no transaction ever had. Such a
    /// token (a restored backup's, a hand-edited one) is taken as "after L" and returns all
    /// retained history instead of throwing `historyTokenInvalid`.
    @Test func aTokenInsideTheLowWaterMarksDeletedRecordIsInvalid() throws {
        let (container, store) = try H.open(SimulatedFileSystem(), segmentByteCountMax: 1024)
        var tokens: [DefaultHistoryToken] = []
        for number in 0..<40 { tokens.append(try H.saveTrip(container, number)) }
        // L = a transaction that is the last record of its segment, so its segment is deleted.
        let bases = Set(store.log.segmentBaseOffsets)
        let index = try #require((0..<39).first { bases.contains(tokens[$0 + 1].offset) && $0 > 5 })
        let mark = tokens[index]
        try store.deleteHistory(HistoryDescriptor(predicate: #Predicate { $0.token <= mark }))
        #expect(store.log.startOffset == tokens[index + 1].offset)
        let forged = DefaultHistoryToken(storeIdentifier: mark.storeIdentifier, offset: mark.offset + 1, check: 0)
        #expect {
            try store.fetchHistory(H.after(forged))
        } throws: { error in
            if case LogStoreError.historyTokenInvalid = error { return true }
            return false
        }
        try store.close()
    }
}
