import Foundation
import LogStoreTestSupport
import Testing

@testable import LogStoreEngine

@Suite struct TornTailTests {
    /// A store of five durable records, and where its last record lies in the segment file.
    struct Fixture {
        var files: [String: [UInt8]]
        var records: [LogRecord]
        var lastRecordPosition: Int
        var lastRecordEnd: Int
        var segment: String { segmentPath(0) }

        static func make() throws -> Fixture {
            let fileSystem = SimulatedFileSystem()
            let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem, preallocates: false))
            var generator = SeededGenerator(seed: 11)
            for number in 0..<5 {
                try log.append(payload(number: number, byteCount: 60, compressible: false, generator: &generator))
            }
            let records = try readAll(log)
            try log.close()
            var files: [String: [UInt8]] = [:]
            for name in fileSystem.fileNames(in: storePath) {
                files[storePath + "/" + name] = fileSystem.durableBytes(at: storePath + "/" + name)
            }
            let header = FormatConstants.segmentHeaderByteCount
            return Fixture(
                files: files, records: records, lastRecordPosition: Int(records[4].offset) + header,
                lastRecordEnd: Int(records[4].endOffset) + header)
        }

        func fileSystem(segment bytes: [UInt8]) throws -> SimulatedFileSystem {
            let fileSystem = SimulatedFileSystem()
            for (path, content) in files { try fileSystem.setBytes(path == segment ? bytes : content, at: path) }
            return fileSystem
        }
    }

    enum Damage: CaseIterable { case cutShort, zerosFollow, randomBytesFollow }

    @Test(arguments: Damage.allCases)
    func tornTailAtEveryBytePositionIsTruncatedOnOpen(damage: Damage) throws {
        let fixture = try Fixture.make()
        let original = fixture.files[fixture.segment]!
        var generator = SeededGenerator(seed: 12)
        for position in fixture.lastRecordPosition..<fixture.lastRecordEnd {
            var bytes = Array(original[..<position])
            switch damage {
            case .cutShort: break
            case .zerosFollow: bytes += [UInt8](repeating: 0, count: fixture.lastRecordEnd - position + 100)
            case .randomBytesFollow:
                bytes += (0..<(fixture.lastRecordEnd - position + 100)).map { _ in
                    UInt8.random(in: 0...255, using: &generator)
                }
            }
            let fileSystem = try fixture.fileSystem(segment: bytes)
            let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
            let records = try readAll(log)
            #expect(records == Array(fixture.records.prefix(4)), "damage at \(position)")
            let report = log.recoveryReport
            let hasGarbage = bytes[fixture.lastRecordPosition...].contains { $0 != 0 }
            #expect(report.truncatedAt == (hasGarbage ? fixture.records[4].offset : nil), "damage at \(position)")
            #expect(report.droppedRecords.first?.offset == (hasGarbage ? fixture.records[4].offset : nil))
            // The cut is durable and zero-filled, and appends after it read back right.
            let durable = fileSystem.durableBytes(at: fixture.segment)!
            #expect(durable[fixture.lastRecordPosition...].allSatisfy { $0 == 0 })
            let next = try log.append(Array("next".utf8))
            #expect(next.offset == fixture.records[4].offset)
            try log.close()
            let reopened = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
            #expect(
                try readAll(reopened).map(\.payload) == fixture.records.prefix(4).map(\.payload) + [Array("next".utf8)])
            #expect(!reopened.recoveryReport.droppedAnything)
            try reopened.close()
        }
    }

    @Test func aBadRecordFollowedByAValidOneBeyondTheUnsyncedBoundIsCorruption() throws {
        let fileSystem = SimulatedFileSystem()
        var options = simulatedOptions(fileSystem, durability: .none, preallocates: false)
        options.dictionaryByteCountMax = 0  // one segment: no early roll to start a dictionary
        let log = try Log.open(directory: storePath, options: options)
        var generator = SeededGenerator(seed: 13)
        let first = try log.append(payload(number: 0, byteCount: 100, compressible: false, generator: &generator))
        try log.append(payload(number: 1, byteCount: 5 * 1024 * 1024, compressible: false, generator: &generator))
        let last = try log.append(payload(number: 2, byteCount: 100, compressible: false, generator: &generator))
        try log.close()
        // Damage the first record: the 5 MiB record was written only once nothing was unsynced, so
        // it states the log durable past the first record (D12; in version 1 it ended more than
        // 4 MiB past it, which proved the same).
        try fileSystem.corruptByte(at: Int(first.offset) + 64 + 40, in: segmentPath(0))
        let before = fileSystem.durableBytes(at: segmentPath(0))
        let error = logError { _ = try Log.open(directory: storePath, options: options) }
        #expect(error?.code == .corruption)
        #expect(error?.file == segmentPath(0))
        #expect(error?.offset == first.offset)
        #expect(error?.message.contains("states that the log was durable through offset") == true)
        #expect(fileSystem.durableBytes(at: segmentPath(0)) == before, "a refused open changes nothing")

        var repairing = options
        repairing.repairs = true
        let repaired = try Log.open(directory: storePath, options: repairing)
        #expect(try readAll(repaired).isEmpty)
        #expect(repaired.recoveryReport.truncatedAt == first.offset)
        // The durable-end mark written at close is dropped with the rest.
        #expect(
            repaired.recoveryReport.droppedRecords.map(\.offset) == [0, first.endOffset, last.offset, last.endOffset])
        try repaired.close()
    }

    @Test func aLengthFieldBeyondTheMaximumIsDroppedWithoutAllocatingIt() throws {
        let fixture = try Fixture.make()
        var bytes = fixture.files[fixture.segment]!
        // Rewrite the last record's header with a 4 GiB length and a correct header CRC.
        var header = RecordHeader(
            payloadCRC: 0, offset: fixture.records[4].offset, storedByteCount: UInt32.max - 1,
            uncompressedByteCount: UInt32.max - 1, type: .data, flags: 0)
        var writer = ByteWriter()
        header.encode(into: &writer)
        bytes.replaceSubrange(fixture.lastRecordPosition..<(fixture.lastRecordPosition + 32), with: writer.bytes)
        // A torn write is the newest thing in the log: no durable-end mark (written at close) after it.
        bytes.removeSubrange(fixture.lastRecordEnd...)
        header.storedByteCount = 0
        let fileSystem = try fixture.fileSystem(segment: bytes)
        let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        #expect(try readAll(log) == Array(fixture.records.prefix(4)))
        #expect(log.recoveryReport.droppedRecords.first?.reason.contains("exceeds") == true)
        try log.close()
    }
}
