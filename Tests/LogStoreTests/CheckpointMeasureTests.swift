import Foundation
import LogStoreEngine
import LogStoreTestSupport
import SampleTrips
import Testing

@testable import LogStore

/// Open time with and without a checkpoint, on real files. Not an assertion, a measurement: runs
/// only with `LOGSTORE_MEASURE=1` (optionally `LOGSTORE_MEASURE_COUNT=<transactions>`, default
/// 100 000) and prints its figures. Best in a release build:
///
///     LOGSTORE_MEASURE=1 swift test -c release -Xswiftc -enable-testing --filter CheckpointMeasureTests
@Suite struct CheckpointMeasureTests {
    static let isEnabled = ProcessInfo.processInfo.environment["LOGSTORE_MEASURE"] == "1"

    static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    @Test(.enabled(if: isEnabled))
    func openTimeWithAndWithoutACheckpoint() throws {
        let environment = ProcessInfo.processInfo.environment
        let transactionCount = environment["LOGSTORE_MEASURE_COUNT"].flatMap(Int.init) ?? 100_000
        let temporary = TemporaryDirectory("checkpoint-measure")
        let directory = temporary.path
        defer { temporary.remove() }
        let configuration = LogStoreConfiguration(
            directory: directory, durability: .none, checkpointIntervalByteCount: 0)
        let clock = ContinuousClock()
        func open() throws -> (ModelContainer, LogStore, Double) {
            let start = clock.now
            let container = try ModelContainer(for: sampleTripsModels, configuration: configuration)
            let elapsed = Self.seconds(clock.now - start)
            return (container, container.dataStore(as: LogStore.self)!, elapsed)
        }

        // Build: each save inserts one trip (60 %) or updates one (40 %).
        var random = CheckpointTests.Random(state: 2026)
        var identifiers: [PersistentIdentifier] = []
        var (_, store, _) = try open()
        let buildStart = clock.now
        for number in 0..<transactionCount {
            if identifiers.isEmpty || Int.random(in: 0..<10, using: &random) < 6 {
                let temporary = PersistentIdentifier.temporary(entityName: "Trip")
                let values: [String: AttributeValue] = [
                    "name": .string("trip \(number)"), "destination": .string("place \(number % 977)"),
                    "startDate": .date(day(number)), "endDate": .date(day(number + 3)),
                    "bucketList": .array([]), "livingAccommodation": .null,
                ]
                let result = try store.save(
                    DataStoreSaveChangesRequest(
                        inserted: [DefaultSnapshot(persistentIdentifier: temporary, values: values)]))
                identifiers.append(result.remappedIdentifiers[temporary]!)
            } else {
                let identifier = identifiers.randomElement(using: &random)!
                var values = store.snapshot(for: identifier)!.values
                values["destination"] = .string("moved \(number)")
                _ = try store.save(
                    DataStoreSaveChangesRequest(
                        updated: [DefaultSnapshot(persistentIdentifier: identifier, values: values)]))
            }
        }
        let buildSeconds = Self.seconds(clock.now - buildStart)
        let logBytes = store.logEndOffset
        let rowCount = store.allSnapshots()["Trip"]!.count
        try store.close()

        var withoutCheckpoint: [Double] = []
        var expected: [String: [DefaultSnapshot]] = [:]
        for _ in 0..<3 {
            let (_, opened, seconds) = try open()
            withoutCheckpoint.append(seconds)
            #expect(opened.lastOpenReplayedRecordCount >= transactionCount)
            expected = opened.allSnapshots()
            try opened.close()
        }

        (_, store, _) = try open()
        let checkpointStart = clock.now
        let offset = try store.checkpoint()
        let checkpointSeconds = Self.seconds(clock.now - checkpointStart)
        try store.close()
        let checkpointPath = directory + "/" + CheckpointFileName.name(offset: offset)
        let checkpointBytes =
            (try FileManager.default.attributesOfItem(atPath: checkpointPath)[.size] as? NSNumber)?.intValue ?? 0

        var withCheckpoint: [Double] = []
        for _ in 0..<3 {
            let (_, opened, seconds) = try open()
            withCheckpoint.append(seconds)
            #expect(opened.openedFromCheckpointOffset == offset)
            #expect(opened.lastOpenReplayedRecordCount == 0)
            #expect(opened.allSnapshots() == expected)
            try opened.close()
        }
        // Where the time of an open from a checkpoint goes: the log's own open, and reading the checkpoint.
        var options = LogOptions()
        options.durability = .none
        let logStart = clock.now
        let log = try Log.open(directory: directory, options: options)
        let logOpenSeconds = Self.seconds(clock.now - logStart)
        let readStart = clock.now
        _ = try CheckpointFiles(log: log, directory: directory, fileSystem: PosixFileSystem()).read(
            offset: offset,
            decodesRows: true)
        let readSeconds = Self.seconds(clock.now - readStart)
        let validateStart = clock.now
        _ = try CheckpointFiles(log: log, directory: directory, fileSystem: PosixFileSystem()).read(
            offset: offset,
            decodesRows: false)
        let validateSeconds = Self.seconds(clock.now - validateStart)
        try log.close()
        func milliseconds(_ values: [Double]) -> String {
            values.map { String(format: "%.0f", $0 * 1000) }.joined(separator: " / ") + " ms"
        }
        print(
            """
            CHECKPOINT MEASUREMENT: \(transactionCount) transactions, \(rowCount) trips, log \(logBytes) bytes, \
            built in \(String(format: "%.1f", buildSeconds)) s
              open without checkpoint (replay all): \(milliseconds(withoutCheckpoint))
              checkpoint() at \(offset): \(String(format: "%.0f", checkpointSeconds * 1000)) ms, file \(checkpointBytes) bytes
              open with checkpoint (0 records replayed): \(milliseconds(withCheckpoint))
                of which: log open \(milliseconds([logOpenSeconds])), checkpoint read + decode \(milliseconds([readSeconds])) \
            (framing and counts only: \(milliseconds([validateSeconds])))
            """)
    }
}
