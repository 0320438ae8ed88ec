import Foundation
import LogStoreTestSupport
import Synchronization
import Testing

@testable import LogStoreEngine

@Suite struct LogRoundTripTests {
    @Test(arguments: [true, false])
    func randomPayloadsRoundTripAcrossRollsAndReopen(compresses: Bool) throws {
        let fileSystem = SimulatedFileSystem()
        let options = simulatedOptions(
            fileSystem, durability: .none, segmentByteCountMax: 256 * 1024, compresses: compresses)
        var generator = SeededGenerator(seed: compresses ? 1 : 2)
        var expected: [(LogPosition, [UInt8])] = []
        let log = try Log.open(directory: storePath, options: options)
        for number in 0..<400 {
            let byteCount = [0, 1, 31, 32, 33, 200, 4096, 70_000].randomElement(using: &generator)!
            let bytes =
                byteCount == 0
                ? []
                : payload(
                    number: number, byteCount: byteCount,
                    compressible: Bool.random(using: &generator), generator: &generator)
            expected.append((try log.append(bytes), bytes))
        }
        try log.sync()
        #expect(log.segmentBaseOffsets.count > 10)
        let beforeClose = try readAll(log)
        try log.close()

        let reopened = try Log.open(directory: storePath, options: options)
        let records = try readAll(reopened)
        #expect(records == beforeClose)
        #expect(records.map(\.offset) == expected.map(\.0.offset))
        #expect(records.map(\.payload) == expected.map(\.1))
        #expect(records.map(\.payloadCRC) == expected.map(\.0.payloadCRC))
        #expect(records.contains(where: \.isCompressed) == compresses)
        #expect(!reopened.recoveryReport.droppedAnything)
        try Self.expectReadingInPlaceMatches(reopened)
        try reopened.close()
    }

    /// An iterator from a record's start reads from that record (none of the records between
    /// the sparse index's entry before it and it, which it read and skipped before); from inside
    /// a record, from the next one, as before; from the end, nothing.
    @Test func anIteratorFromARecordStartReadsNothingBeforeIt() throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(
            directory: storePath, options: simulatedOptions(fileSystem, durability: .none, compresses: false))
        defer { try? log.close() }
        // 100-byte payloads: about 30 records per 4 KiB index interval.
        let positions = try (0..<200).map { number in
            try log.append([UInt8](repeating: UInt8(number), count: 100))
        }
        for index in 0..<200 {
            var records = try log.records(from: positions[index].offset)
            let first = try #require(try records.next())
            #expect(first.offset == positions[index].offset)
            #expect(records.recordsRead == 1, "record \(index): \(records.recordsRead) records read for the first")
            var count = 1
            while try records.next() != nil { count += 1 }
            #expect(count == 200 - index)
            // One byte in: the next record, read past what lies before it.
            var inside = try log.records(from: positions[index].offset + 1)
            let next = try inside.next()
            #expect(next?.offset == (index + 1 < 200 ? positions[index + 1].offset : nil))
        }
        var atEnd = try log.records(from: log.visibleEnd)
        #expect(try atEnd.next() == nil)
        #expect(atEnd.recordsRead == 0)
    }

    /// From any offset — every record start, one byte into every record, the last bytes of each
    /// segment — an iterator hands out exactly the records a read from the start hands out at or
    /// after that offset, across rolled segments, compressed records, dictionaries and marks.
    @Test(arguments: [false, true])
    func anIteratorFromAnyOffsetReadsWhatAFullReadReadsFromThere(includingMarks: Bool) throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(
            directory: storePath, options: simulatedOptions(fileSystem, durability: .none, segmentByteCountMax: 16 * 1024))
        defer { try? log.close() }
        var generator = SeededGenerator(seed: 12)
        for number in 0..<300 {
            let byteCount = [20, 100, 300, 1_500].randomElement(using: &generator)!
            try log.append(
                payload(number: number, byteCount: byteCount, compressible: number % 3 != 0, generator: &generator))
            if number % 50 == 49 { try log.sync() }
        }
        try log.sync()
        #expect(log.segmentBaseOffsets.count > 3)
        let all = try readAll(log, includingMarks: includingMarks)
        let starts = try readAll(log, includingMarks: true).map(\.offset)
        var offsets = Set(starts)
        for start in starts { offsets.insert(start + 1) }
        for base in log.segmentBaseOffsets.dropFirst() { offsets.insert(base - 1) }
        offsets.insert(log.visibleEnd)
        for offset in offsets.sorted() where offset >= log.startOffset && offset <= log.visibleEnd {
            var records = try log.records(from: offset, includingMarks: includingMarks)
            var read: [LogRecord] = []
            while let record = try records.next() { read.append(record) }
            #expect(read == all.filter { $0.offset >= offset }, "from \(offset)")
        }
    }

    /// A payload holding bytes that look like a record naming their own offset — a checked
    /// header, a payload under its CRC — is never read as one: an iterator asked to start there
    /// (a token anyone can make) starts at the next record, reached header by header.
    @Test func bytesInsideAPayloadAreNeverTakenForARecord() throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(
            directory: storePath, options: simulatedOptions(fileSystem, durability: .none, compresses: false))
        defer { try? log.close() }
        for number in 0..<50 { try log.append([UInt8](repeating: UInt8(number), count: 100)) }
        // The record about to be written starts at the written end; the forged one 32 + 10 bytes on.
        let recordOffset = log.writtenEnd
        let forgedOffset = recordOffset + 32 + 10
        let forgedPayload = Array("forged transaction".utf8)
        let forgedHeader = RecordHeader(
            payloadCRC: CRC32C.checksum(forgedPayload), offset: forgedOffset,
            storedByteCount: UInt32(forgedPayload.count), uncompressedByteCount: UInt32(forgedPayload.count),
            type: .data, flags: 0)
        var writer = ByteWriter()
        forgedHeader.encode(into: &writer)
        let payload = [UInt8](repeating: 0xAB, count: 10) + writer.bytes + forgedPayload + [UInt8](repeating: 0xCD, count: 10)
        let position = try log.append(payload)
        #expect(position.offset == recordOffset)
        // The forgery is a well-formed record where it lies (stored raw: compression is off).
        let stored = try #require(fileSystem.bytes(at: storePath + "/" + LogFileNames.segment(0)))
        let filePosition = Int(forgedOffset) + FormatConstants.segmentHeaderByteCount
        let decoded = stored[filePosition..<(filePosition + 32)].withUnsafeBytes {
            RecordHeader.decode($0, expectedOffset: forgedOffset)
        }
        #expect(decoded == .valid(forgedHeader))
        let next = try log.append([1, 2, 3])
        var records = try log.records(from: forgedOffset)
        let first = try #require(try records.next())
        #expect(first.offset == next.offset, "the iterator started at \(first.offset), inside a payload")
        #expect(first.payload == [1, 2, 3])
        #expect(try log.firstRecord(atOrAfter: forgedOffset)?.offset == next.offset)
    }

    /// Replay's way of reading (`next(inPlace:)`: the payload not copied out) gives exactly what
    /// `next()` gives — records, payloads (decompressed too), counts — from the start and from
    /// offsets inside records, with and without marks.
    static func expectReadingInPlaceMatches(_ log: Log) throws {
        var generator = SeededGenerator(seed: 9)
        let starts =
            [log.startOffset, log.visibleEnd]
            + (0..<20).map { _ in UInt64.random(in: log.startOffset..<log.visibleEnd, using: &generator) }
        var compared = 0
        for start in starts {
            for marks in [false, true] {
                var copied = try log.records(from: start, includingMarks: marks)
                var inPlace = try log.records(from: start, includingMarks: marks)
                while true {
                    let record = try copied.next()
                    var viewed: LogRecord?
                    let found = try inPlace.next(inPlace: { viewed = LogRecord($0) })
                    #expect(record == viewed)
                    #expect(found == (record != nil))
                    #expect(copied.recordsRead == inPlace.recordsRead)
                    guard record != nil else { break }
                    compared += 1
                }
            }
        }
        #expect(compared > 400)
    }

    /// A record file read in place (what a checkpoint's open does) hands each record's payload
    /// as `next()` copies it — stored as written, or decompressed into the reader's reused buffer
    /// — records of growing and shrinking sizes, compressed and not.
    @Test(arguments: [true, false])
    func aRecordFileReadInPlaceHandsTheSamePayloads(compresses: Bool) throws {
        let fileSystem = SimulatedFileSystem()
        try fileSystem.createDirectory(storePath)
        let storeID = UUID()
        let header = RecordFileHeader(magic: FormatConstants.checkpointMagic, storeID: storeID, value: 7)
        let writer = try RecordFileWriter(
            directory: storePath, name: "in-place", header: header, compresses: compresses, fileSystem: fileSystem)
        var random = SeededGenerator(seed: compresses ? 1 : 2)
        let payloads = [90, 70_000, 300, 200_000, 5, 120_000].map { count in
            // A compressible first half (runs of one byte), a random second half.
            (0..<count).map { $0 < count / 2 ? UInt8(truncatingIfNeeded: $0 / 64) : UInt8.random(in: 0...255, using: &random) }
        }
        for payload in payloads { try writer.append(payload, type: .checkpointChunk) }
        try writer.commit()
        let path = storePath + "/in-place"
        var copying = try RecordFileReader(path: path, magic: FormatConstants.checkpointMagic, fileSystem: fileSystem)
        var inPlace = try RecordFileReader(path: path, magic: FormatConstants.checkpointMagic, fileSystem: fileSystem)
        var read: [[UInt8]] = []
        var compressed = 0
        while let record = try copying.next() {
            let seen = try inPlace.nextInPlace { (Array($0.payload), $0.isCompressed, $0.type) }
            let same = seen?.0 == record.payload && seen?.2 == record.type  // (not expanded: 200 KB)
            #expect(same, "record \(read.count) read in place differs")
            read.append(record.payload)
            if seen?.1 == true { compressed += 1 }
        }
        #expect(compresses ? compressed >= 3 : compressed == 0, "\(compressed) records compressed")
        #expect(try inPlace.nextInPlace { _ in 0 } == nil)
        let sameAsWritten = read == payloads
        #expect(sameAsWritten, "the payloads read are not those written")
    }

    @Test func largestRecordRoundTripsAndOneByteMoreIsRefused() throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem, preallocates: false))
        var generator = SeededGenerator(seed: 3)
        let maximum = FormatConstants.recordByteCountMax
        let incompressible = payload(number: 1, byteCount: maximum, compressible: false, generator: &generator)
        let compressible = payload(number: 2, byteCount: maximum, compressible: true, generator: &generator)
        try log.append(incompressible)
        try log.append(compressible)
        let tooLarge = logError { try log.append([UInt8](repeating: 7, count: maximum + 1)) }
        #expect(tooLarge?.code == .recordTooLarge)
        try log.close()
        let reopened = try Log.open(directory: storePath, options: simulatedOptions(fileSystem, preallocates: false))
        let records = try readAll(reopened)
        #expect(records.count == 2)
        #expect(records[0].payload == incompressible && !records[0].isCompressed)
        #expect(records[1].payload == compressible && records[1].isCompressed)
        try reopened.close()
    }

    @Test func readingFromInsideARecordStartsAtTheNextOne() throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(
            directory: storePath, options: simulatedOptions(fileSystem, segmentByteCountMax: 64 * 1024))
        var positions: [LogPosition] = []
        for number in 0..<600 {
            positions.append(try log.write(Array(repeating: UInt8(number % 251), count: 100 + number % 50)))
        }
        try log.sync()
        var generator = SeededGenerator(seed: 4)
        for _ in 0..<300 {
            let target = UInt64.random(in: 0..<log.visibleEnd, using: &generator)
            let expected = positions.first { $0.offset >= target }
            #expect(try log.firstRecord(atOrAfter: target)?.offset == expected?.offset)
        }
        #expect(try log.firstRecord(atOrAfter: log.visibleEnd) == nil)
        #expect(logError { _ = try log.records(from: log.visibleEnd + 1) }?.code == .offsetOutOfRange)
        try log.close()
    }

    @Test func asyncAppendsAreDurableWhenTheyReturn() async throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        try await withThrowingTaskGroup(of: LogPosition.self) { group in
            for number in 0..<50 {
                group.addTask { try await log.append(Array("record \(number)".utf8)) }
            }
            for try await position in group {
                #expect(log.durableEnd >= position.endOffset)
            }
        }
        #expect(try readAll(log).count == 50)
        try log.close()
    }

    /// `whenDurable` runs its body once the record is durable — at once when it is already, else
    /// from the sync that covers it — and with the error once the log is closed before that.
    @Test func whenDurableRunsOnceTheRecordIsDurableOrTheLogCloses() throws {
        let fileSystem = SimulatedFileSystem()
        var options = simulatedOptions(fileSystem)
        options.durability = .synchronous
        let log = try Log.open(directory: storePath, options: options)
        let first = try log.write(Array("first".utf8))
        try log.waitUntilDurable(first)
        let calls = Mutex<[String]>([])
        log.whenDurable(first) { outcome in calls.withLock { $0.append("first \((try? outcome.get()) != nil)") } }
        #expect(calls.withLock { $0 } == ["first true"])
        let second = try log.write(Array("second".utf8))
        let done = DispatchSemaphore(value: 0)
        log.whenDurable(second) { outcome in
            // Run by the sync that covers the record (with the log's lock held: no call to it).
            calls.withLock { $0.append("second \((try? outcome.get()) != nil)") }
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(log.durableEnd >= second.endOffset)
        #expect(calls.withLock { $0 } == ["first true", "second true"])
        try log.close()
        let closed = Mutex<Bool?>(nil)
        log.whenDurable(LogPosition(offset: second.endOffset, endOffset: second.endOffset + 64, payloadCRC: 0)) {
            outcome in closed.withLock { $0 = (try? outcome.get()) == nil }
        }
        #expect(closed.withLock { $0 } == true)
    }

    @Test func aStoreOnDiskRoundTripsThroughThePosixFileSystem() throws {
        let temporary = TemporaryDirectory("test")
        let directory = temporary.path
        defer { temporary.remove() }
        var options = LogOptions()
        options.segmentByteCountMax = 8 * 1024
        let log = try Log.open(directory: directory, options: options)
        #expect(log.recoveryReport.createdStore)
        for number in 0..<500 {
            try log.append(Array("event \(number) ".utf8) + Array(repeating: 65, count: number % 300))
        }
        try log.close()
        let reopened = try Log.open(directory: directory, options: options)
        let records = try readAll(reopened)
        #expect(records.count == 500)
        #expect(records.last?.payload.starts(with: Array("event 499 ".utf8)) == true)
        #expect(reopened.segmentBaseOffsets.count > 1)
        try reopened.close()
    }
}
