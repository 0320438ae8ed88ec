import Foundation
import LogStoreTestSupport
import Testing

@testable import LogStoreEngine

/// Found by the simulator (`SimulatorTests`, seed 77 of its first 300): the durable-end mark was
/// skipped when the last segment had no room for its 32 bytes — always so after a record larger
/// than `segmentByteCountMax`, which sits alone in its segment. A cleanly closed store then left
/// its last acknowledged records unstated, and a flipped bit in them was cut as a torn tail: the
/// save was lost without a word. The mark now goes past the limit (FORMAT.md §5.3, §6.6).
@Suite struct FullSegmentMarkTests {
    /// Appends `sizes` (incompressible payloads), closes cleanly, and returns the disk and positions.
    static func closedStore(sizes: [Int], segmentByteCountMax: UInt64) throws -> (SimulatedFileSystem, [LogPosition]) {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(
            directory: storePath,
            options: simulatedOptions(fileSystem, segmentByteCountMax: segmentByteCountMax, compresses: false))
        var generator = SeededGenerator(seed: 0xF011)
        let positions = try sizes.enumerated().map { number, size in
            try log.append(payload(number: number, byteCount: size, compressible: false, generator: &generator))
        }
        try log.close()
        #expect(log.statistics.markCount == 1, "the close states the last record durable")
        return (fileSystem, positions)
    }

    static func refusesRotInLastRecord(_ fileSystem: SimulatedFileSystem, _ positions: [LogPosition]) throws {
        let last = positions.last!
        let base = try Log.openReadOnly(directory: storePath, fileSystem: fileSystem).segmentBaseOffsets.last!
        let position = Int(last.offset - base) + FormatConstants.segmentHeaderByteCount + 40
        try fileSystem.corruptByte(at: position, in: segmentPath(base), mask: 0x04)
        let error = logError { _ = try Log.open(directory: storePath, options: simulatedOptions(fileSystem)) }
        #expect(error?.code == .corruption)
        #expect(error?.offset == last.offset)
    }

    @Test func aCleanCloseStatesARecordLargerThanTheSegmentLimitDurable() throws {
        let (fileSystem, positions) = try Self.closedStore(sizes: [100, 100, 3000], segmentByteCountMax: 1024)
        try Self.refusesRotInLastRecord(fileSystem, positions)
    }

    @Test func aCleanCloseStatesTheLastRecordOfAFullSegmentDurable() throws {
        // 64-byte header + 3 × (32 + 300) = 1060: no room for a 32-byte mark under 1070.
        let (fileSystem, positions) = try Self.closedStore(sizes: [300, 300, 300], segmentByteCountMax: 1070)
        #expect(positions.last!.endOffset == 996)
        try Self.refusesRotInLastRecord(fileSystem, positions)
    }

    @Test func aLogWhoseMarkWentPastTheLimitReopensAndRolls() throws {
        let (fileSystem, positions) = try Self.closedStore(sizes: [300, 300, 300], segmentByteCountMax: 1070)
        let log = try Log.open(
            directory: storePath, options: simulatedOptions(fileSystem, segmentByteCountMax: 1070, compresses: false))
        let next = try log.append(Array(repeating: 7, count: 300))
        #expect(log.segmentBaseOffsets.count == 2, "the record after the mark rolls")
        #expect(try readAll(log).map(\.offset) == positions.map(\.offset) + [next.offset])
        try log.close()
        let report = try Log.verify(directory: storePath, fileSystem: fileSystem)
        #expect(report.problems.isEmpty, "\(report.problems)")
    }
}
