import Foundation
import LogStoreEngine
import LogStoreTestSupport
import SampleTrips
import Testing

@testable import LogStore

/// The history figures of the issue, on real files. Not assertions, measurements: run only with
/// `LOGSTORE_MEASURE=1` and print their figures. Best in a release build:
///
///     LOGSTORE_MEASURE=1 swift test -c release -Xswiftc -enable-testing --filter HistoryMeasureTests
@Suite struct HistoryMeasureTests {
    static let clock = ContinuousClock()

    static func milliseconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) * 1e3 + Double(attoseconds) / 1e15
    }

    static func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

    /// Fetching 1,000 transactions after a token near the end of a 1M-transaction log: token
    /// only, and with an author filter (every 10th transaction by "widget").
    @Test(.enabled(if: CheckpointMeasureTests.isEnabled))
    func fetchAfterATokenNearTheEnd() throws {
        let temporary = TemporaryDirectory("history-measure")
        let directory = temporary.path
        defer { temporary.remove() }
        let configuration = LogStoreConfiguration(
            directory: directory, durability: .none, checkpointIntervalByteCount: 0)
        let container = try ModelContainer(for: sampleTripsModels, configuration: configuration)
        let store = try #require(container.dataStore(as: LogStore.self))
        // Two real saves give the two payloads (one by "app", one by "widget"); the log then
        // gets 1M of them appended straight, as the seek test does.
        var payloads: [[UInt8]] = []
        for author in ["app", "widget"] {
            let context = ModelContext(container)
            context.author = author
            context.insert(Trip(name: "trip \(author)", destination: "somewhere", startDate: Date(), endDate: Date()))
            try context.save()
            payloads.append(try #require(try store.log.firstRecord(atOrAfter: store.currentToken!.offset)).payload)
        }
        let count = 1_000_000
        var positions: [LogPosition] = []
        positions.reserveCapacity(count)
        for index in 0..<count {
            positions.append(try store.log.write(payloads[index % 10 == 9 ? 1 : 0], type: .transaction))
        }
        try store.log.sync()
        let near = positions[count - 1_001]
        let token = DefaultHistoryToken(storeIdentifier: store.log.storeID, offset: near.offset, check: near.payloadCRC)
        var tokenOnly = HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token > token })
        tokenOnly.fetchLimit = 1_000
        let farther = positions[count - 10_001]
        let widgetToken = DefaultHistoryToken(
            storeIdentifier: store.log.storeID, offset: farther.offset, check: farther.payloadCRC)
        var byAuthor = HistoryDescriptor<DefaultHistoryTransaction>(
            predicate: #Predicate {
                $0.token > widgetToken && $0.author == "widget"
            })
        byAuthor.fetchLimit = 1_000
        var tokenTimes: [Double] = []
        var authorTimes: [Double] = []
        for _ in 0..<21 {
            var start = Self.clock.now
            let fetched = try store.fetchHistory(tokenOnly)
            tokenTimes.append(Self.milliseconds(Self.clock.now - start))
            #expect(fetched.count == 1_000)
            start = Self.clock.now
            let widgets = try store.fetchHistory(byAuthor)
            authorTimes.append(Self.milliseconds(Self.clock.now - start))
            #expect(widgets.count == 1_000)
        }
        print(
            String(
                format: "HISTORY-MEASURE fetch 1,000 after a token near the end of 1M transactions: token only "
                    + "%.3f ms (median of 21), author filter over the last 10,000 %.3f ms", Self.median(tokenTimes),
                Self.median(authorTimes)))
        try store.close()
    }

    /// Compaction of a ~1 GB log: 10,000 trips, then update records (50 trips each) appended
    /// straight until the log holds 1 GiB. Deleting up to the middle folds from the log's start
    /// (no checkpoint); deleting everything after a reopen copies the state.
    @Test(.enabled(if: CheckpointMeasureTests.isEnabled))
    func compactionOfAGigabyteLog() throws {
        let temporary = TemporaryDirectory("compaction-measure")
        let directory = temporary.path
        defer { temporary.remove() }
        let target = UInt64(ProcessInfo.processInfo.environment["LOGSTORE_MEASURE_BYTES"].flatMap(Int.init) ?? 1 << 30)
        let configuration = LogStoreConfiguration(
            directory: directory, durability: .none, checkpointIntervalByteCount: 0)
        var container = try ModelContainer(for: sampleTripsModels, configuration: configuration)
        var store = try #require(container.dataStore(as: LogStore.self))
        for batch in 0..<10 {
            let context = ModelContext(container)
            for index in 0..<1_000 {
                context.insert(
                    Trip(name: "trip \(batch)-\(index)", destination: "start", startDate: Date(), endDate: Date()))
            }
            try context.save()
        }
        let trips = store.allSnapshots()[Trip.entityName]!.map(\.persistentIdentifier)
        let table = store.inner.withLock { $0.table }
        var random = CheckpointTests.Random(state: 7)
        var tokens: [DefaultHistoryToken] = []
        var round = 0
        while store.log.writtenEnd < target {
            round += 1
            let changes = (0..<50).map { _ in
                ResolvedChange.update(trips.randomElement(using: &random)!, ["destination": .string("place \(round)")])
            }
            let record = TransactionRecord(
                schemaVersion: table.version, author: "bulk", timestampMicroseconds: Int64(round),
                processIdentifier: LogStore.processIdentifier, changes: changes)
            let position = try store.log.write(record.encoded(table: table), type: .transaction)
            tokens.append(
                DefaultHistoryToken(storeIdentifier: store.log.storeID, offset: position.offset, check: position.payloadCRC))
        }
        try store.log.sync()
        let logBytes = store.log.writtenEnd
        let middle = tokens[tokens.count / 2]
        var start = Self.clock.now
        let half = try store.deleteHistory(
            HistoryDescriptor(predicate: #Predicate { $0.token <= middle }), force: false)
        let halfTime = Self.milliseconds(Self.clock.now - start)
        try store.close()
        start = Self.clock.now
        container = try ModelContainer(for: sampleTripsModels, configuration: configuration)
        store = try #require(container.dataStore(as: LogStore.self))
        let openTime = Self.milliseconds(Self.clock.now - start)
        start = Self.clock.now
        let all = try store.deleteHistory(HistoryDescriptor(), force: false)
        let allTime = Self.milliseconds(Self.clock.now - start)
        print(
            String(
                format: "HISTORY-MEASURE compaction of a %.0f MiB log (%d transactions of 50 updates): "
                    + "to the middle (fold from the log start) %.0f ms, %d segments, %.0f MiB reclaimed; reopen %.0f ms; "
                    + "everything (state copied) %.0f ms, %d segments, %.0f MiB reclaimed",
                Double(logBytes) / 1_048_576, tokens.count, halfTime, half.deletedSegments.count,
                Double(half.reclaimedByteCount) / 1_048_576, openTime, allTime, all.deletedSegments.count,
                Double(all.reclaimedByteCount) / 1_048_576))
        try store.close()
    }
}
