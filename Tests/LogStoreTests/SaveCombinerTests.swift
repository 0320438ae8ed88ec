import Foundation
import Synchronization
import Testing

@testable import LogStore
@testable import LogStoreEngine

/// The save combiner on its own (``SaveCombiner``): who writes which batch, and what each caller
/// is told when the batch's `fdatasync` fails.
@Suite struct SaveCombinerTests {
    /// Three callers: A writes its batch alone (the others call while it writes), hands the
    /// writing to B, whose batch holds B and C. That batch's durability wait fails with the
    /// durable end between B's record and C's: B's record is durable and published (an earlier
    /// `fdatasync` covered it) and B succeeds; C throws. Seen failing with every written save of
    /// the batch throwing (review of 196f290, finding 1).
    @Test func aFailedSyncFailsOnlyTheSavesItDidNotCover() throws {
        let combiner = SaveCombiner()
        let ends: [String: UInt64] = ["A": 50, "B": 100, "C": 200]
        let firstBatchMayEnd = DispatchSemaphore(value: 0)
        let outcomes = Mutex<[String: Result<DataStoreSaveChangesResult<DefaultSnapshot>, any Error>]>([:])
        let group = DispatchGroup()
        func call(_ name: String) {
            group.enter()
            Thread {
                defer { group.leave() }
                let request = DataStoreSaveChangesRequest<DefaultSnapshot>(editingState: EditingState(author: name))
                let outcome = Result {
                    try combiner.save(
                        request,
                        writeBatch: { batch in
                            if batch.contains(where: { $0.request.editingState.author == "A" }) {
                                firstBatchMayEnd.wait()
                            }
                            for slot in batch {
                                let end = ends[slot.request.editingState.author!]!
                                slot.written = .success(
                                    (LogPosition(offset: end - 10, endOffset: end, payloadCRC: 0),
                                     DataStoreSaveChangesResult(storeIdentifier: "store")))
                            }
                        },
                        finish: { last in
                            last.endOffset == 200
                                ? (LogStoreError.log(LogError(.syncFailed, "the batch's fdatasync failed")), 150) : nil
                        })
                }
                outcomes.withLock { $0[name] = outcome }
            }.start()
        }
        call("A")
        // Bounded: 10 s each for A to take its batch, then for B and C to queue behind it.
        var deadline = Date().addingTimeInterval(10)
        while combiner.counts.batches < 1 && Date() < deadline { usleep(1_000) }
        call("B")
        deadline = Date().addingTimeInterval(10)
        while combiner.queuedCount < 1 && Date() < deadline { usleep(1_000) }
        call("C")
        deadline = Date().addingTimeInterval(10)
        while combiner.queuedCount < 2 && Date() < deadline { usleep(1_000) }
        #expect(combiner.queuedCount == 2)
        firstBatchMayEnd.signal()
        #expect(group.wait(timeout: .now() + 30) == .success)
        #expect(combiner.counts == (batches: 2, saves: 3))
        let results = outcomes.withLock { $0 }
        #expect(throws: Never.self) { try results["A"]!.get() }
        #expect(throws: Never.self) { try results["B"]!.get() }
        #expect(throws: LogStoreError.self) { try results["C"]!.get() }
    }
}
