import ArgumentParser
import Foundation
import LogStore
import LogStoreEngine
import SampleTrips
import Testing

@testable import LogStoreCommands

/// `logstore compact`: --through, --keep-bytes, --keep-age, consumers and --force, option rules.
@Suite struct CompactCommandTests {
    /// Small segments, so deletions free whole segment files.
    static let segmentByteCountMax: UInt64 = 1024

    static func segmentFiles(_ directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".log") }.sorted()
    }

    @Test func throughATokenDeletesThroughItAndTheSegmentsItFrees() throws {
        let store = TemporaryStore()
        // 16 saves: about four records of ~240 bytes fill a 1 KiB segment, and their sizes vary by
        // a few bytes from run to run (the pid's digits in the process identifier, LZ4 on random
        // UUID text): 12 saves made 3 segments once, not the 4 the test needs (a fresh clone's run).
        let tokens = try store.saveTrips(
            Array(repeating: "app", count: 16), segmentByteCountMax: Self.segmentByteCountMax)
        let before = try Self.segmentFiles(store.directory)
        #expect(before.count > 3)
        let command = try #require(
            try LogStoreCommand.parseAsRoot(["compact", store.directory, "--through", tokens[7].json])
                as? CompactCommand)
        #expect(command.mode == .through(.token(tokens[7])))
        let report = try CompactCommand.compact(directory: store.directory, mode: command.mode!, force: false)
        #expect(report.previousLowWaterMark == nil)
        #expect(report.lowWaterMark == tokens[7])
        #expect(report.deletedHistory)
        #expect(!report.deletedSegments.isEmpty)
        #expect(report.reclaimedByteCount > 0)
        let after = try Self.segmentFiles(store.directory)
        #expect(Set(before).subtracting(after) == Set(report.deletedSegments))
        #expect(report.deletedSegments.allSatisfy { $0.count == 24 && $0.hasSuffix(".log") })
        #expect(report.text.contains("Low-water mark: none → \(tokens[7].json)"))
        #expect(report.text.contains("Deleted \(report.deletedSegments.count) segment file"))
        #expect(
            try HistoryCommand.fetch(directory: store.directory, after: nil, author: nil, limit: nil).map(\.token)
                == Array(tokens[8...]))

        // Again through a bare offset at or below L: nothing to delete.
        let again = try CompactCommand.compact(
            directory: store.directory, mode: .through(.offset(tokens[3].offset)), force: false)
        #expect(!again.deletedHistory && again.deletedSegments.isEmpty && again.lowWaterMark == tokens[7])
        #expect(again.text == "Nothing to delete: the low-water mark stays at \(tokens[7].json).")
        // A bare offset past L moves it.
        let further = try CompactCommand.compact(
            directory: store.directory, mode: .through(.offset(tokens[9].offset)), force: false)
        #expect(further.previousLowWaterMark == tokens[7] && further.lowWaterMark == tokens[9])
        // The JSON form.
        let json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(further)) as? [String: Any]
        #expect(json?["deletedHistory"] as? Bool == true)
        #expect((json?["lowWaterMark"] as? [String: Any])?["offset"] as? String == String(tokens[9].offset))
        #expect(json?["heldBackByConsumer"] is NSNull)
    }

    @Test func keepBytesKeepsAboutThatMuchHistory() throws {
        let store = TemporaryStore()
        let tokens = try store.saveTrips(
            Array(repeating: "app", count: 12), segmentByteCountMax: Self.segmentByteCountMax)
        let end = try Log.inspect(directory: store.directory).endOffset
        let keep = end - tokens[6].offset  // keep the records from the seventh save on
        #expect(try CompactCommand.parseByteCount(String(keep)) == keep)
        let report = try CompactCommand.compact(directory: store.directory, mode: .keepBytes(keep), force: false)
        #expect(report.lowWaterMark == tokens[5])
        #expect(!report.deletedSegments.isEmpty)
        #expect(
            try HistoryCommand.fetch(directory: store.directory, after: nil, author: nil, limit: nil).map(\.token)
                == Array(tokens[6...]))
        // A limit above the history's size deletes nothing.
        let none = try CompactCommand.compact(directory: store.directory, mode: .keepBytes(1 << 30), force: false)
        #expect(!none.deletedHistory && none.lowWaterMark == tokens[5])
    }

    @Test func keepAgeDeletesWhatIsOlder() throws {
        let store = TemporaryStore()
        let old = try store.saveTrips(["app", "app", "app"])
        let pause = Duration.seconds(5)
        Thread.sleep(forTimeInterval: 5)
        let youngStart = ContinuousClock.now
        let young = try store.saveTrips(["app", "app"])
        #expect(try CompactCommand.parseAge("1s") == .seconds(1))
        // Keep what is as young as the young saves plus half the pause; the old ones are older
        // than that by the other half. So the young saves may take any time, and the compaction's
        // own open (before it reads the clock) up to 2.5 s. A fixed 1 s age failed under
        // AddressSanitizer on 2026-11-26: more than 1 s passed between the young saves and the
        // compaction's clock, and it deleted them too.
        let keep = (ContinuousClock.now - youngStart) + pause / 2
        let report = try CompactCommand.compact(directory: store.directory, mode: .keepAge(keep), force: false)
        #expect(report.lowWaterMark == old[2])
        #expect(
            try HistoryCommand.fetch(directory: store.directory, after: nil, author: nil, limit: nil).map(\.token)
                == young)
        let none = try CompactCommand.compact(
            directory: store.directory, mode: .keepAge(.seconds(7 * 86_400)), force: false)
        #expect(!none.deletedHistory)
    }

    @Test func aConsumerHoldsTheDeletionBackUnlessForced() throws {
        let store = TemporaryStore()
        let tokens = try store.saveTrips(Array(repeating: "app", count: 8)) { store in
            let bookmark = try store.fetchHistory(HistoryDescriptor())[2].token
            try store.registerHistoryConsumer("sync", after: bookmark)
        }
        let held = try CompactCommand.compact(
            directory: store.directory, mode: .through(.token(tokens[6])), force: false)
        #expect(held.lowWaterMark == tokens[2])
        #expect(held.heldBackByConsumer == "sync")
        #expect(held.text.contains(#"Held back by the history consumer "sync""#))
        let forced = try CompactCommand.compact(
            directory: store.directory, mode: .through(.token(tokens[6])), force: true)
        #expect(forced.previousLowWaterMark == tokens[2] && forced.lowWaterMark == tokens[6])
        #expect(forced.heldBackByConsumer == nil)
        let parsed = try #require(
            try LogStoreCommand.parseAsRoot(["compact", store.directory, "--keep-bytes", "1K", "--force"])
                as? CompactCommand)
        #expect(parsed.force && parsed.mode == .keepBytes(1024))
    }

    @Test func exactlyOneModeAndWellFormedValues() throws {
        let directory = "/nonexistent"
        #expect(usageExitCode(["compact", directory]) == 64)
        #expect(usageExitCode(["compact", directory, "--through", "5", "--keep-bytes", "1K"]) == 64)
        #expect(usageExitCode(["compact", directory, "--keep-bytes", "1K", "--keep-age", "1d"]) == 64)
        #expect(
            usageExitCode(["compact", directory, "--through", "5", "--keep-bytes", "1K", "--keep-age", "1d"]) == 64)
        #expect(usageExitCode(["compact", directory, "--keep-bytes", "12X"]) == 64)
        #expect(usageExitCode(["compact", directory, "--keep-age", "12"]) == 64)
        #expect(usageExitCode(["compact", directory, "--keep-age", "7d"]) == nil)
        #expect(try CompactCommand.parseByteCount("512K") == 512 * 1024)
        #expect(try CompactCommand.parseByteCount("64M") == 64 << 20)
        #expect(try CompactCommand.parseByteCount("2g") == 2 << 30)
        #expect(try CompactCommand.parseByteCount("3KiB") == 3072)
        #expect(throws: ValidationError.self) { try CompactCommand.parseByteCount("99999999999999999999G") }
        #expect(try CompactCommand.parseAge("90s") == .seconds(90))
        #expect(try CompactCommand.parseAge("30m") == .seconds(1800))
        #expect(try CompactCommand.parseAge("12h") == .seconds(43_200))
        #expect(try CompactCommand.parseAge("7d") == .seconds(604_800))
    }

    @Test func aStoreOpenElsewhereOrMissingFailsClearly() throws {
        let store = TemporaryStore()
        _ = try store.saveTrips(["app"])
        let (_, open) = try store.open()
        // `history` reads beside the writer; `compact` needs the lock.
        #expect(try HistoryCommand.fetch(directory: store.directory, after: nil, author: "app", limit: nil).count == 1)
        #expect(throws: LogStoreError.self) {
            try CompactCommand.compact(directory: store.directory, mode: .keepBytes(0), force: false)
        }
        try open.close()
        let missing = store.directory + "-missing"
        #expect(throws: LogStoreError.self) {
            try CompactCommand.compact(directory: missing, mode: .keepBytes(0), force: false)
        }
        #expect(!FileManager.default.fileExists(atPath: missing))
    }
}
