import Foundation
import LogStoreTestSupport
import Testing

@testable import LogStoreEngine

/// `Log.verify` and `Log.inspect` on real store directories under the temporary directory.
@Suite struct StoreVerificationTests {
    /// A store written by a test: where it is and what was appended.
    struct WrittenStore {
        var directory: String
        var payloads: [[UInt8]]
        var positions: [LogPosition]
        var segmentBaseOffsets: [UInt64]

        func segmentPath(_ base: UInt64) -> String { directory + "/" + LogFileNames.segment(base) }

        /// The base offset of the segment holding `offset`.
        func segmentBase(of offset: UInt64) -> UInt64 { segmentBaseOffsets.last { $0 <= offset }! }

        func filePosition(of offset: UInt64) -> UInt64 {
            SegmentScanner.filePosition(logicalOffset: offset, baseOffset: segmentBase(of: offset))
        }

        var recordByteCount: UInt64 { positions.reduce(0) { $0 + $1.endOffset - $1.offset } }
    }

    /// A fresh path (TemporaryDirectory's naming); tests remove it with ``remove(_:)``.
    static func temporaryDirectory() -> String {
        TemporaryDirectory("verify").path
    }

    /// Fixed-seed payloads of 40–640 bytes: every third one repetitive (compresses), the rest random.
    static func payloads(count: Int, seed: UInt64 = 42) -> [[UInt8]] {
        var state = seed
        func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state >> 33
        }
        return (0..<count).map { index in
            let size = 40 + Int(next() % 600)
            if index % 3 == 0 {
                return Array(String(repeating: "event \(index) repeats; ", count: size / 20 + 1).utf8.prefix(size))
            }
            return (0..<size).map { _ in UInt8(truncatingIfNeeded: next()) }
        }
    }

    /// Writes `payloads` into a new store with small segments and closes it.
    static func writeStore(
        _ payloads: [[UInt8]], segmentByteCountMax: UInt64 = 4096,
        durability: Durability = .none
    ) throws -> WrittenStore {
        let directory = temporaryDirectory()
        var options = LogOptions()
        options.segmentByteCountMax = segmentByteCountMax
        options.durability = durability
        options.durableEndMarkDelay = nil  // a mark at close only, so the offsets are the appends'
        options.dictionaryByteCountMax = 0  // and no segment dictionary or early roll (DictionaryTests)
        let log = try Log.open(directory: directory, options: options)
        let positions = try payloads.map { try log.append($0) }
        let bases = log.segmentBaseOffsets
        try log.close()
        return WrittenStore(directory: directory, payloads: payloads, positions: positions, segmentBaseOffsets: bases)
    }

    static func flipByte(in path: String, at position: UInt64) throws {
        let handle = try PosixFileSystem().openFile(path, mode: .readWrite)
        defer { handle.close() }
        let byte = try handle.read(byteCount: 1, at: position)
        try handle.write([byte[0] ^ 0x5A], at: position)
    }

    static func write(_ bytes: [UInt8], to path: String, at position: UInt64) throws {
        let handle = try PosixFileSystem().openFile(path, mode: .readWrite)
        defer { handle.close() }
        try handle.write(bytes, at: position)
    }

    static func remove(_ directory: String) {
        try? FileManager.default.removeItem(atPath: directory)
    }

    // MARK: Clean stores

    @Test func verifyIsCleanOnAFreshStoreWithRecords() throws {
        let store = try Self.writeStore(Self.payloads(count: 300))
        defer { Self.remove(store.directory) }
        #expect(store.segmentBaseOffsets.count > 5)

        let report = try Log.verify(directory: store.directory)
        #expect(report.problems == [])
        #expect(report.isClean)
        #expect(!report.hasCorruption)
        #expect(report.recordCount == 300)
        #expect(report.recordByteCount == store.recordByteCount)
        #expect(report.segmentCount == store.segmentBaseOffsets.count)
        #expect(report.indexFileCount == store.segmentBaseOffsets.count - 1)
    }

    @Test func verifyIsCleanOnANewEmptyStore() throws {
        let directory = Self.temporaryDirectory()
        defer { Self.remove(directory) }
        try Log.open(directory: directory).close()
        let report = try Log.verify(directory: directory)
        #expect(report.isClean)
        #expect(report.recordCount == 0)
        #expect(report.segmentCount == 1)
    }

    @Test func inspectCountsRecordsAndBytesAsAppended() throws {
        let store = try Self.writeStore(Self.payloads(count: 300))
        defer { Self.remove(store.directory) }

        let inspection = try Log.inspect(directory: store.directory)
        #expect(inspection.segments.map(\.baseOffset) == store.segmentBaseOffsets)
        #expect(inspection.recordCount == 300)
        #expect(inspection.rawByteCount == UInt64(store.payloads.reduce(0) { $0 + $1.count }))
        let header = UInt64(FormatConstants.recordHeaderByteCount)
        #expect(inspection.storedByteCount == store.recordByteCount - 300 * header)
        #expect(inspection.compressedRecordCount > 0)
        #expect(inspection.storedByteCount < inspection.rawByteCount)
        #expect(inspection.startOffset == 0)
        // Closing appended a durable-end mark (FORMAT.md §6.6): the log ends 32 bytes later.
        let mark = UInt64(FormatConstants.recordHeaderByteCount)
        #expect(inspection.endOffset == store.positions.last!.endOffset + mark)
        #expect(inspection.segments.map(\.markCount) == Array(repeating: 0, count: inspection.segments.count - 1) + [1])
        #expect(inspection.indexFiles.count == store.segmentBaseOffsets.count - 1)
        #expect(inspection.unknownFiles == [] && inspection.temporaryFiles == [] && inspection.checkpointFiles == [])
        // Per segment: the records whose offsets fall in it, ending where the next one starts.
        for (number, segment) in inspection.segments.enumerated() {
            let inSegment = store.positions.filter { store.segmentBase(of: $0.offset) == segment.baseOffset }
            #expect(segment.recordCount == UInt64(inSegment.count))
            #expect(segment.endOffset == inSegment.last!.endOffset + (segment.markCount * mark))
            if number + 1 < inspection.segments.count {
                #expect(segment.endOffset == inspection.segments[number + 1].baseOffset)
            }
            #expect(segment.fileName == LogFileNames.segment(segment.baseOffset))
            #expect(segment.fileByteCount >= segment.endOffset - segment.baseOffset + 64)
        }
    }

    @Test func inspectListsUnknownAndTemporaryFiles() throws {
        let store = try Self.writeStore(Self.payloads(count: 20))
        defer { Self.remove(store.directory) }
        try Data("notes".utf8).write(to: URL(fileURLWithPath: store.directory + "/notes.txt"))
        try Data().write(to: URL(fileURLWithPath: store.directory + "/store.meta.tmp"))

        let inspection = try Log.inspect(directory: store.directory)
        #expect(inspection.unknownFiles == ["notes.txt"])
        #expect(inspection.temporaryFiles == ["store.meta.tmp"])
        let report = try Log.verify(directory: store.directory)
        #expect(report.unknownFiles == ["notes.txt"])
        #expect(report.warnings.map(\.file) == ["store.meta.tmp"])
        #expect(!report.hasCorruption)
    }

    // MARK: Damage in sealed segments

    @Test func flippedPayloadByteInSealedSegmentIsReportedAndVerificationResyncs() throws {
        let store = try Self.writeStore(Self.payloads(count: 300))
        defer { Self.remove(store.directory) }
        // A record in the middle of the third segment (sealed): neither its first nor its last.
        let base = store.segmentBaseOffsets[2]
        let inSegment = store.positions.filter { store.segmentBase(of: $0.offset) == base }
        let damaged = inSegment[inSegment.count / 2]
        let position = store.filePosition(of: damaged.offset)
        try Self.flipByte(in: store.segmentPath(base), at: position + 32 + 5)

        let report = try Log.verify(directory: store.directory)
        #expect(report.problems.count == 1)
        let problem = try #require(report.problems.first)
        #expect(problem.severity == .corruption)
        #expect(problem.file == LogFileNames.segment(base))
        #expect(problem.offset == damaged.offset)
        #expect(problem.filePosition == position)
        #expect(problem.byteCount == damaged.endOffset - damaged.offset)
        #expect(problem.message.contains("payload checksum mismatch"))
        #expect(problem.message.contains("resumed at the record at offset \(damaged.endOffset)"))
        // Every other record, in this segment and after it, was still checked.
        #expect(report.recordCount == 299)
        #expect(report.recordByteCount == store.recordByteCount - (damaged.endOffset - damaged.offset))
        #expect(report.segmentCount == store.segmentBaseOffsets.count)
    }

    @Test func flippedHeaderBytesInTwoSegmentsAreBothReported() throws {
        let store = try Self.writeStore(Self.payloads(count: 300))
        defer { Self.remove(store.directory) }
        var damaged: [LogPosition] = []
        for base in [store.segmentBaseOffsets[1], store.segmentBaseOffsets[4]] {
            let inSegment = store.positions.filter { store.segmentBase(of: $0.offset) == base }
            let record = inSegment[1]
            damaged.append(record)
            // Byte 16: the stored length. The header CRC fails, so the length cannot be trusted:
            // only the byte-by-byte search finds where the next record starts.
            try Self.flipByte(in: store.segmentPath(base), at: store.filePosition(of: record.offset) + 16)
        }

        let report = try Log.verify(directory: store.directory)
        #expect(report.problems.count == 2)
        for (problem, record) in zip(report.problems, damaged) {
            #expect(problem.severity == .corruption)
            #expect(problem.file == LogFileNames.segment(store.segmentBase(of: record.offset)))
            #expect(problem.offset == record.offset)
            #expect(problem.byteCount == record.endOffset - record.offset)
            #expect(problem.message.contains("header checksum mismatch"))
        }
        #expect(report.recordCount == 298)
    }

    @Test func damagedLastRecordOfSealedSegmentIsCorruptionNamingTheNextBase() throws {
        let store = try Self.writeStore(Self.payloads(count: 100))
        defer { Self.remove(store.directory) }
        let base = store.segmentBaseOffsets[0]
        let nextBase = store.segmentBaseOffsets[1]
        let last = store.positions.last { $0.endOffset == nextBase }!
        try Self.flipByte(in: store.segmentPath(base), at: store.filePosition(of: last.offset) + 40)

        let report = try Log.verify(directory: store.directory)
        #expect(report.problems.count == 1)
        #expect(report.problems.first?.offset == last.offset)
        #expect(report.problems.first?.severity == .corruption)
        #expect(report.problems.first?.message.contains("should run to offset \(nextBase)") == true)
        #expect(report.recordCount == 99)
    }

    @Test func truncatedSealedSegmentIsCorruption() throws {
        let store = try Self.writeStore(Self.payloads(count: 100))
        defer { Self.remove(store.directory) }
        let nextBase = store.segmentBaseOffsets[2]
        let last = store.positions.last { $0.endOffset == nextBase }!
        let path = store.segmentPath(store.segmentBaseOffsets[1])
        let handle = try PosixFileSystem().openFile(path, mode: .readWrite)
        try handle.truncate(toByteCount: store.filePosition(of: last.offset))
        handle.close()

        let report = try Log.verify(directory: store.directory)
        let problem = try #require(
            report.corruptions.first { $0.file == LogFileNames.segment(store.segmentBaseOffsets[1]) })
        #expect(problem.offset == last.offset)
        #expect(problem.message.contains("records are missing"))
        // The index still describes the record that is gone; that is the segment's damage, not reported twice.
        #expect(report.recordCount == 99)
    }

    @Test func segmentHeaderDamageIsReportedAndItsRecordsAreStillChecked() throws {
        let store = try Self.writeStore(Self.payloads(count: 100))
        defer { Self.remove(store.directory) }
        let base = store.segmentBaseOffsets[1]
        try Self.flipByte(in: store.segmentPath(base), at: 20)  // inside the store UUID

        let report = try Log.verify(directory: store.directory)
        #expect(report.problems.count == 1)
        #expect(report.problems.first?.file == LogFileNames.segment(base))
        #expect(report.problems.first?.filePosition == 0)
        #expect(report.problems.first?.message.contains("segment header checksum mismatch") == true)
        #expect(report.recordCount == 100)
    }

    @Test func damagedStoreMetaIsReportedAndSegmentsAreStillChecked() throws {
        let store = try Self.writeStore(Self.payloads(count: 50))
        defer { Self.remove(store.directory) }
        let storeID = try Log.inspect(directory: store.directory).storeID
        try Self.flipByte(in: store.directory + "/store.meta", at: 40)

        let report = try Log.verify(directory: store.directory)
        #expect(report.problems.count == 1)
        #expect(report.problems.first?.file == "store.meta")
        #expect(report.storeID == storeID)  // taken from the segment headers
        #expect(report.recordCount == 50)
    }

    @Test func invalidIndexFileIsAWarning() throws {
        let store = try Self.writeStore(Self.payloads(count: 100))
        defer { Self.remove(store.directory) }
        let index = store.directory + "/" + LogFileNames.index(store.segmentBaseOffsets[0])
        try Self.flipByte(in: index, at: 60)

        let report = try Log.verify(directory: store.directory)
        #expect(report.problems.count == 1)
        #expect(report.problems.first?.severity == .warning)
        #expect(report.problems.first?.file == LogFileNames.index(store.segmentBaseOffsets[0]))
        #expect(!report.hasCorruption)
    }

    // MARK: The last segment

    @Test func tornTailInLastSegmentIsAWarning() throws {
        let store = try Self.writeStore(Self.payloads(count: 100))
        defer { Self.remove(store.directory) }
        let end = store.positions.last!.endOffset
        // Half a record header where the next record would start: a writer died mid-append.
        try Self.write(
            Array(repeating: 0xAB, count: 17), to: store.segmentPath(store.segmentBaseOffsets.last!),
            at: store.filePosition(of: end))

        let report = try Log.verify(directory: store.directory)
        #expect(!report.hasCorruption)
        #expect(report.warnings.count == 1)
        let warning = try #require(report.warnings.first)
        #expect(warning.offset == end)
        #expect(warning.file == LogFileNames.segment(store.segmentBaseOffsets.last!))
        #expect(warning.message.contains("torn tail"))
        #expect(report.recordCount == 100)
    }

    @Test func damagedRecordFollowedByMoreThanTheUnsyncedWindowIsCorruption() throws {
        // 5 MiB of incompressible records after the damaged one: it must have been synced.
        var state: UInt64 = 7
        let payloads = (0..<90).map { _ in
            (0..<(60 * 1024)).map { _ in
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                return UInt8(truncatingIfNeeded: state >> 56)
            }
        }
        let store = try Self.writeStore(payloads, segmentByteCountMax: 64 * 1024 * 1024)
        defer { Self.remove(store.directory) }
        #expect(store.segmentBaseOffsets.count == 1)
        let damaged = store.positions[2]
        try Self.flipByte(in: store.segmentPath(0), at: store.filePosition(of: damaged.offset) + 1000)

        let report = try Log.verify(directory: store.directory)
        #expect(report.corruptions.count == 1)
        #expect(report.corruptions.first?.offset == damaged.offset)
        #expect(report.corruptions.first?.message.contains("had been synced") == true)
        #expect(report.recordCount == 89)
        // Opening agrees: it refuses the store.
        #expect(throws: LogError.self) { try Log.open(directory: store.directory) }
    }

    // MARK: Errors

    @Test func verifyAndInspectOfAMissingDirectoryThrowNotAStore() throws {
        let directory = Self.temporaryDirectory()
        #expect { try Log.verify(directory: directory) } throws: { ($0 as? LogError)?.code == .notAStore }
        #expect { try Log.inspect(directory: directory) } throws: { ($0 as? LogError)?.code == .notAStore }
    }

    @Test func verifyOfADirectoryWithoutAStoreThrowsNotAStore() throws {
        let directory = Self.temporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { Self.remove(directory) }
        try Data("x".utf8).write(to: URL(fileURLWithPath: directory + "/other.txt"))
        #expect { try Log.verify(directory: directory) } throws: { ($0 as? LogError)?.code == .notAStore }
        #expect { try Log.inspect(directory: directory) } throws: { ($0 as? LogError)?.code == .notAStore }
    }

    @Test func verifyOfANewerFormatVersionThrows() throws {
        let store = try Self.writeStore(Self.payloads(count: 10))
        defer { Self.remove(store.directory) }
        let path = store.directory + "/" + LogFileNames.segment(0)
        let handle = try PosixFileSystem().openFile(path, mode: .readWrite)
        var header = try handle.read(byteCount: 64, at: 0)
        let decoded = try SegmentHeader.decode(header).get()
        header = SegmentHeader(
            formatVersion: FormatConstants.formatVersion + 1, storeID: decoded.storeID,
            baseOffset: decoded.baseOffset
        ).encoded()
        try handle.write(header, at: 0)
        handle.close()
        #expect { try Log.verify(directory: store.directory) } throws: {
            ($0 as? LogError)?.code == .newerFormatVersion
        }
    }
}
