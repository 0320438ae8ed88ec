import CLZ4
import Foundation
import LogStoreTestSupport
import Testing

@testable import LogStoreEngine

/// Segment dictionaries (FORMAT.md §6.8): a segment may begin with a dictionary record, and its
/// records with flag bit 1 are LZ4 blocks compressed against it.
@Suite struct DictionaryTests {
    /// A payload like a model save: a sequence number, 16 random bytes (a primary key), and text
    /// that repeats across records but not within one.
    static func savePayload(_ number: Int, generator: inout SeededGenerator) -> [UInt8] {
        let destinations = ["Lisbon, Portugal", "Kyoto, Japan", "Oaxaca, Mexico", "Hobart, Australia"]
        var bytes = withUnsafeBytes(of: UInt64(number).littleEndian) { Array($0) }
        for _ in 0..<16 { bytes.append(UInt8.random(in: 0...255, using: &generator)) }
        bytes += Array("12345@worker-7 3F2504E0-4F89-11D3-9A0C-0305E82C3301".utf8)
        bytes += Array("name=Trip \(1_000_000 + number);destination=\(destinations[number % 4]);".utf8)
        bytes += withUnsafeBytes(of: (1_767_225_600.0 + Double(number % 1_000) * 3_600).bitPattern) { Array($0) }
        return bytes
    }

    /// A log on a new simulated disk, durability `.none`, with dictionaries of the given size.
    static func onSimulatedDisk(dictionaryByteCountMax: Int) throws -> (Log, SimulatedFileSystem, LogOptions) {
        let fileSystem = SimulatedFileSystem()
        var options = simulatedOptions(fileSystem, durability: .none)
        options.dictionaryByteCountMax = dictionaryByteCountMax
        return (try Log.open(directory: storePath, options: options), fileSystem, options)
    }

    /// A log in a new temporary directory on the real disk, durability `.none`, options as `configure` sets.
    static func onDisk(_ configure: (inout LogOptions) -> Void) throws -> (Log, String, LogOptions) {
        let directory = StoreVerificationTests.temporaryDirectory()
        var options = LogOptions()
        options.durability = .none
        configure(&options)
        return (try Log.open(directory: directory, options: options), directory, options)
    }

    /// The header of the record at `offset`, read from its segment file.
    static func header(
        at offset: UInt64, in log: Log, fileSystem: any FileSystem, directory: String = storePath
    ) throws -> RecordHeader {
        let base = log.segmentBaseOffsets.last { $0 <= offset }!
        let handle = try fileSystem.openFile(
            LogFileNames.join(directory, LogFileNames.segment(base)), mode: .readOnly)
        defer { handle.close() }
        let bytes = try handle.read(
            byteCount: FormatConstants.recordHeaderByteCount,
            at: SegmentScanner.filePosition(logicalOffset: offset, baseOffset: base))
        let decoded = bytes.withUnsafeBytes { RecordHeader.decode($0, expectedOffset: offset, baseOffset: base) }
        guard case .valid(let header) = decoded else {
            Issue.record("no valid header at \(offset): \(decoded)")
            throw LogError(.corruption, "no header")
        }
        return header
    }

    @Test func aNewStoreRollsEarlyOnceAndThenCompressesAgainstItsDictionary() throws {
        var generator = SeededGenerator(seed: 11)
        let (log, fileSystem, options) = try Self.onSimulatedDisk(dictionaryByteCountMax: 4096)
        let payloads = (0..<300).map { Self.savePayload($0, generator: &generator) }
        let positions = try payloads.map { try log.write($0) }
        try log.sync()

        // The first segment took payloads until the writer had 4 KiB of them and the segment 4 KiB
        // of records; the second begins with the newest 4 KiB of what was appended before it.
        let bases = log.segmentBaseOffsets
        #expect(bases.count == 2)
        let dictionary = try #require(try log.firstRecord(atOrAfter: bases[1], includingMarks: true))
        #expect(dictionary.type == .dictionary)
        #expect(dictionary.offset == bases[1])
        let before = payloads.indices.filter { positions[$0].offset < bases[1] }
        #expect(dictionary.payload == Array(before.flatMap { payloads[$0] }.suffix(4096)))
        #expect(positions[before.count].offset == dictionary.endOffset)

        // Every record after it is compressed against it, to under 60 % of its payload (the
        // records before the roll are raw or plain LZ4, which gains little on them).
        var stored = 0
        var raw = 0
        for index in before.count..<payloads.count {
            let header = try Self.header(at: positions[index].offset, in: log, fileSystem: fileSystem)
            #expect(header.flags == FormatConstants.flagCompressedLZ4 | FormatConstants.flagDictionary)
            #expect(header.dictionaryID == FormatConstants.segmentDictionaryID)
            stored += Int(header.storedByteCount)
            raw += payloads[index].count
        }
        #expect(Double(stored) < 0.6 * Double(raw), "\(stored) of \(raw) bytes")
        for index in before {
            let flags = try Self.header(at: positions[index].offset, in: log, fileSystem: fileSystem).flags
            #expect(flags & FormatConstants.flagDictionary == 0)
        }
        // Readers see the payloads, not the dictionary.
        #expect(try readAll(log).map(\.payload) == payloads)
        try log.close()

        // A fresh open reads them again, also starting in the middle of the second segment (the
        // dictionary is looked up from the segment's first record).
        let reopened = try Log.open(directory: storePath, options: options)
        let middle = payloads.count - 17
        #expect(try reopened.firstRecord(atOrAfter: positions[middle].offset)?.payload == payloads[middle])
        #expect(try readAll(reopened).map(\.payload) == payloads)
        #expect(reopened.segmentBaseOffsets == bases)
        try reopened.close()
    }

    /// FORMAT.md §6.8: readers find a segment's dictionary with one read per segment. A scan from
    /// the segment's start reads the dictionary record itself and keeps it: the first record
    /// compressed against it must not send a lookup to read the same record again.
    @Test func aScanFromTheSegmentsStartReadsItsDictionaryRecordOnce() throws {
        var generator = SeededGenerator(seed: 21)
        let (log, fileSystem, _) = try Self.onSimulatedDisk(dictionaryByteCountMax: 4096)
        for number in 0..<300 { _ = try log.write(Self.savePayload(number, generator: &generator)) }
        try log.sync()
        let bases = log.segmentBaseOffsets
        try log.close()
        #expect(bases.count == 2)
        let handle = CountingHandle(
            try fileSystem.openFile(LogFileNames.join(storePath, LogFileNames.segment(bases[1])), mode: .readOnly))
        defer { handle.base.close() }
        var scanner = SegmentScanner(
            handle: handle, baseOffset: bases[1], formatVersion: FormatConstants.formatVersion,
            dictionary: SegmentDictionary())
        var usingDictionary = 0
        // Bounded by the segment: each step reads a record or ends.
        scan: while true {
            switch try scanner.next() {
            case .record(let record): if record.usesDictionary { usingDictionary += 1 }
            case .end: break scan
            case .bad(let reason, _), .unsupported(let reason):
                Issue.record("a bad record: \(reason)")
                break scan
            }
        }
        #expect(usingDictionary > 100)
        #expect(handle.readsAtDictionaryPosition == 1)
    }

    /// A file handle counting the reads that start at a segment's first record.
    final class CountingHandle: LogStoreEngine.FileHandle, @unchecked Sendable {
        let base: any LogStoreEngine.FileHandle
        private(set) var readsAtDictionaryPosition = 0
        init(_ base: any LogStoreEngine.FileHandle) { self.base = base }
        var path: String { base.path }
        func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(FileSystemError) -> Int {
            if offset == UInt64(FormatConstants.segmentHeaderByteCount) { readsAtDictionaryPosition += 1 }
            return try base.read(into: buffer, at: offset)
        }
        func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(FileSystemError) {
            try base.write(bytes, at: offset)
        }
        func syncData() throws(FileSystemError) { try base.syncData() }
        func sync() throws(FileSystemError) { try base.sync() }
        func size() throws(FileSystemError) -> UInt64 { try base.size() }
        func truncate(toByteCount byteCount: UInt64) throws(FileSystemError) { try base.truncate(toByteCount: byteCount) }
        func tryLockExclusive() throws(FileSystemError) -> Bool { try base.tryLockExclusive() }
        func tryLockShared() throws(FileSystemError) -> Bool { try base.tryLockShared() }
        func unlock() throws(FileSystemError) { try base.unlock() }
        func mapShared(byteCount: Int) throws(FileSystemError) -> SharedMapping? { try base.mapShared(byteCount: byteCount) }
        func close() { base.close() }
    }

    @Test func everySegmentARollStartsBeginsWithADictionaryAndVerifies() throws {
        var generator = SeededGenerator(seed: 12)
        let (log, directory, options) = try Self.onDisk { $0.segmentByteCountMax = 64 * 1024 }  // 8 KiB dictionaries
        defer { StoreVerificationTests.remove(directory) }
        let payloads = (0..<3_000).map { Self.savePayload($0, generator: &generator) }
        for payload in payloads { try log.write(payload) }
        try log.sync()
        let bases = log.segmentBaseOffsets
        #expect(bases.count > 3)
        for base in bases.dropFirst() {
            let first = try #require(try log.firstRecord(atOrAfter: base, includingMarks: true))
            #expect(first.offset == base && first.type == .dictionary && first.payload.count == 8 * 1024)
        }
        // No dictionary record anywhere but first in its segment.
        let dictionaries = try readAll(log, includingMarks: true).filter { $0.type == .dictionary }.map(\.offset)
        #expect(dictionaries == Array(bases.dropFirst()))
        try log.close()

        let report = try Log.verify(directory: directory)
        #expect(!report.hasCorruption && report.warnings.isEmpty, "\(report)")
        let reopened = try Log.open(directory: directory, options: options)
        #expect(try readAll(reopened).map(\.payload) == payloads)
        try reopened.close()
    }

    /// A log on the real disk with 200 saves' payloads and 2 KiB dictionaries: its second segment
    /// begins with a dictionary and its records are compressed against it.
    static func twoSegmentsOfSaves(seed: UInt64) throws
        -> (log: Log, directory: String, options: LogOptions, positions: [LogPosition], bases: [UInt64])
    {
        var generator = SeededGenerator(seed: seed)
        let (log, directory, options) = try onDisk { $0.dictionaryByteCountMax = 2048 }
        let positions = try (0..<200).map { try log.write(savePayload($0, generator: &generator)) }
        let bases = log.segmentBaseOffsets
        if bases.count != 2 { StoreVerificationTests.remove(directory) }
        try #require(bases.count == 2)
        return (log, directory, options, positions, bases)
    }

    @Test func aRecordWhoseSegmentDoesNotBeginWithADictionaryIsBad() throws {
        let (log, directory, options, positions, bases) = try Self.twoSegmentsOfSaves(seed: 13)
        defer { StoreVerificationTests.remove(directory) }
        let firstCompressed = try #require(positions.first { $0.offset > bases[1] })
        try log.close()

        // The dictionary record turned into a data record, its header checksum made good again:
        // a writer bug (or damage the checksums cannot see), which the bit-1 records expose.
        let path = LogFileNames.join(directory, LogFileNames.segment(bases[1]))
        let handle = try PosixFileSystem().openFile(path, mode: .readWrite)
        var header = try handle.read(byteCount: 32, at: 64)
        header[24] = RecordType.data.rawValue
        let crc = header.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[4..<32])) }
        header.replaceSubrange(0..<4, with: withUnsafeBytes(of: crc.littleEndian) { Array($0) })
        try handle.write(header, at: 64)
        handle.close()

        let report = try Log.verify(directory: directory)
        #expect(report.corruptions.first?.offset == firstCompressed.offset, "\(report)")
        #expect(report.corruptions.first?.message.contains("is not a dictionary") == true)
        let error = logError { _ = try Log.open(directory: directory, options: options) }
        #expect(error?.code == .corruption, "\(String(describing: error))")
    }

    /// A compressed record whose payload passes its CRC but does not decompress (a writer bug, or
    /// damage made to look whole) is corruption, named as such, wherever it is read: the scanner
    /// decompresses a record and hands it on in one access to its buffer.
    @Test func aCompressedPayloadThatDoesNotDecompressIsCorruption() throws {
        let (log, directory, options, positions, bases) = try Self.twoSegmentsOfSaves(seed: 17)
        defer { StoreVerificationTests.remove(directory) }
        let damaged = try #require(positions.filter { $0.offset > bases[1] }.dropFirst(5).first)
        let header = try Self.header(at: damaged.offset, in: log, fileSystem: PosixFileSystem(), directory: directory)
        try #require(header.isCompressed)
        try log.close()

        // Its stored bytes made a block LZ4 cannot decode (a literal run longer than the block),
        // with the payload CRC and the header CRC made good again.
        let path = LogFileNames.join(directory, LogFileNames.segment(bases[1]))
        let handle = try PosixFileSystem().openFile(path, mode: .readWrite)
        let position = SegmentScanner.filePosition(logicalOffset: damaged.offset, baseOffset: bases[1])
        let garbage = [UInt8](repeating: 0xFF, count: Int(header.storedByteCount))
        var headerBytes = try handle.read(byteCount: 32, at: position)
        let payloadCRC = garbage.withUnsafeBytes { CRC32C.checksum($0) }
        headerBytes.replaceSubrange(4..<8, with: withUnsafeBytes(of: payloadCRC.littleEndian) { Array($0) })
        let crc = headerBytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[4..<32])) }
        headerBytes.replaceSubrange(0..<4, with: withUnsafeBytes(of: crc.littleEndian) { Array($0) })
        try handle.write(headerBytes + garbage, at: position)
        handle.close()

        let report = try Log.verify(directory: directory)
        #expect(report.corruptions.first?.offset == damaged.offset, "\(report)")
        #expect(report.corruptions.first?.message.contains("does not decompress") == true, "\(report)")
        let error = logError { _ = try Log.open(directory: directory, options: options) }
        #expect(error?.code == .corruption, "\(String(describing: error))")
    }

    /// Review finding: a record that fits an empty segment but not one holding a dictionary came
    /// right after a roll and trapped in the writer. Now the roll leaves the dictionary out.
    @Test func aRecordThatDoesNotFitAfterADictionaryGetsTheSegmentAlone() throws {
        var generator = SeededGenerator(seed: 15)
        let fileSystem = SimulatedFileSystem()
        let options = simulatedOptions(fileSystem, durability: .none, segmentByteCountMax: 64 * 1024)
        let log = try Log.open(directory: storePath, options: options)
        for number in 0..<600 { try log.write(Self.savePayload(number, generator: &generator)) }
        let large = payload(number: 600, byteCount: 63 * 1024, compressible: false, generator: &generator)
        let position = try log.write(large)
        let smallPayload = Self.savePayload(601, generator: &generator)
        let small = try log.write(smallPayload)
        try log.sync()
        // The large record begins its segment; the next record rolled on to one with a dictionary.
        #expect(log.segmentBaseOffsets.contains(position.offset))
        #expect(try log.firstRecord(atOrAfter: position.endOffset, includingMarks: true)?.type == .dictionary)
        #expect(try log.firstRecord(atOrAfter: small.offset)?.payload == smallPayload)
        #expect(try log.firstRecord(atOrAfter: small.offset)?.usesDictionary == true)
        #expect(try log.firstRecord(atOrAfter: position.offset)?.payload == large)
        try log.close()
        let report = try Log.verify(directory: storePath, fileSystem: fileSystem)
        #expect(!report.hasCorruption && report.warnings.isEmpty, "\(report)")
    }

    /// Review finding: appending a record of the dictionary type (public API) trapped once the
    /// writer had a dictionary. It is written as given, never compressed against one; iterators
    /// skip it like the log's own, and `verify` warns that it is not first in its segment.
    @Test func aRecordOfTheDictionaryTypeAppendedByAUserIsWrittenAsGiven() throws {
        var generator = SeededGenerator(seed: 16)
        let (log, fileSystem, _) = try Self.onSimulatedDisk(dictionaryByteCountMax: 2048)
        for number in 0..<100 { try log.write(Self.savePayload(number, generator: &generator)) }
        #expect(log.segmentBaseOffsets.count == 2)
        let bytes = Self.savePayload(100, generator: &generator)
        let position = try log.write(bytes, type: .dictionary)
        try log.sync()
        let record = try #require(try log.firstRecord(atOrAfter: position.offset, includingMarks: true))
        #expect(record.type == .dictionary && record.payload == bytes && !record.usesDictionary)
        #expect(try log.firstRecord(atOrAfter: position.offset) == nil)
        try log.close()
        let report = try Log.verify(directory: storePath, fileSystem: fileSystem)
        #expect(!report.hasCorruption)
        #expect(report.warnings.map(\.offset) == [position.offset], "\(report)")
    }

    @Test func turnedOffThereAreNoDictionariesAndNoEarlyRoll() throws {
        var generator = SeededGenerator(seed: 14)
        let (log, fileSystem, _) = try Self.onSimulatedDisk(dictionaryByteCountMax: 0)
        let positions = try (0..<400).map { try log.write(Self.savePayload($0, generator: &generator)) }
        try log.sync()
        #expect(log.segmentBaseOffsets.count == 1)
        #expect(try readAll(log, includingMarks: true).allSatisfy { $0.type == .data })
        for position in positions {
            let flags = try Self.header(at: position.offset, in: log, fileSystem: fileSystem).flags
            #expect(flags & FormatConstants.flagDictionary == 0)
        }
        try log.close()
    }

    @Test func headersNamingAnotherDictionaryOrVersionAreRefusedAsUnsupported() {
        func decode(flags: UInt8, dictionaryID: UInt32, type: RecordType = .data, version: UInt32 = 3)
            -> RecordHeader.Decoded
        {
            var writer = ByteWriter(capacity: 32)
            RecordHeader(
                payloadCRC: 0, offset: 100, storedByteCount: 10, uncompressedByteCount: 20, type: type,
                flags: flags, dictionaryID: dictionaryID
            ).encode(into: &writer, formatVersion: version)
            return writer.bytes.withUnsafeBytes {
                RecordHeader.decode($0, expectedOffset: 100, formatVersion: version, baseOffset: 0)
            }
        }
        guard case .valid(let header) = decode(flags: 3, dictionaryID: 1) else {
            Issue.record("LZ4 against dictionary 1 in a version-3 segment is valid")
            return
        }
        #expect(header.dictionaryID == 1)
        for (flags, id, type, version) in [
            (UInt8(2), UInt32(1), RecordType.data, UInt32(3)),  // bit 1 without bit 0
            (3, 2, .data, 3),  // another dictionary
            (3, 1, .dictionary, 3),  // a dictionary compressed with one
            (3, 1, .data, 2),  // a version-2 segment (dictionaries came with version 3)
            (3, 1, .data, 1),  // a version-1 segment
        ] {
            guard case .unsupported(let reason) = decode(flags: flags, dictionaryID: id, type: type, version: version)
            else {
                Issue.record("flags \(flags), dictionary \(id), \(type), version \(version): not refused")
                continue
            }
            #expect(reason.contains("dictionary"))
        }
    }

    /// Compression against a dictionary runs in reused working states that refer to the
    /// dictionary's hashed table (liblz4's attach, written out): every block, small or over 4 KiB
    /// (LZ4 copies the table then), from several threads at once, decompresses to its input
    /// with the dictionary alone — and small ones shrink as much as against a fresh state.
    @Test func blocksCompressedAgainstADictionaryDecompressWithItAloneFromManyThreads() async {
        // Debian's liblz4 (1.9.4) is one whose layout the attach writes: this test covers it.
        #expect(RecordDictionary.attaches, "liblz4 \(LZ4_versionNumber()): compressions copy the dictionary's state")
        var generator = SeededGenerator(seed: 17)
        let samples = (0..<200).flatMap { Self.savePayload($0, generator: &generator) }
        let dictionary = RecordDictionary(samples.suffix(16 * 1024), recordByteCount: 0)
        let inputs: [[UInt8]] =
            (200..<600).map { Self.savePayload($0, generator: &generator) }
            + (0..<8).map { number in (0..<(6_000 + number)).map { UInt8(truncatingIfNeeded: $0 / 7 + number) } }
        // Four tasks at once, each compressing every fourth input (twice: the working states are reused).
        let blocks = await withTaskGroup(of: [(Int, [UInt8]?)].self) { group in
            for worker in 0..<4 {
                group.addTask {
                    var out: [(Int, [UInt8]?)] = []
                    for _ in 0..<2 {
                        for index in stride(from: worker, to: inputs.count, by: 4) {
                            out.append((index, inputs[index].withUnsafeBytes { dictionary.compressIfSmaller($0) }))
                        }
                    }
                    return out
                }
            }
            return await group.reduce(into: []) { $0 += $1 }
        }
        #expect(blocks.count == 2 * inputs.count)
        var compressedBytes = 0
        var rawBytes = 0
        for (index, block) in blocks {
            let input = inputs[index]
            guard let block else {
                Issue.record("input \(index) (\(input.count) bytes) did not compress")
                continue
            }
            let back = block.withUnsafeBytes {
                LZ4.decompress($0, decompressedByteCount: input.count, dictionary: dictionary)
            }
            #expect(back == input, "input \(index)")
            if input.count < 1_000 {
                compressedBytes += block.count
                rawBytes += input.count
            }
        }
        #expect(Double(compressedBytes) < 0.5 * Double(rawBytes), "\(compressedBytes) of \(rawBytes)")
    }

    /// Review finding: repair and verify read a segment whose damaged header's version is a guess
    /// as that guess; a version-3 segment with dictionary-compressed records read as version 2
    /// (its neighbour's) had every such record refused, and repair cut there.
    @Test func aGuessedVersionOfTwoOrLaterReadsAsTheCurrentOne() {
        #expect(FormatConstants.readableVersion(guessed: 1) == 1)
        #expect(FormatConstants.readableVersion(guessed: 2) == FormatConstants.formatVersion)
        #expect(FormatConstants.readableVersion(guessed: 3) == FormatConstants.formatVersion)
        // Read as version 3, a version-2 segment's records read exactly as before: only bit 1 differs.
        var writer = ByteWriter(capacity: 32)
        RecordHeader(payloadCRC: 7, offset: 100, storedByteCount: 10, uncompressedByteCount: 20, type: .data, flags: 1)
            .encode(into: &writer, formatVersion: 2)
        let asTwo = writer.bytes.withUnsafeBytes { RecordHeader.decode($0, expectedOffset: 100, formatVersion: 2) }
        let asThree = writer.bytes.withUnsafeBytes { RecordHeader.decode($0, expectedOffset: 100, formatVersion: 3) }
        #expect(asTwo == asThree)
    }

    /// Power cuts while dictionaries are being written: the recovered log is still an
    /// acknowledged prefix (as `PowerCutTests`), over segments of 16 KiB with 2 KiB dictionaries.
    @Test(arguments: 0..<60)
    func aPowerCutAroundADictionaryLeavesAnAcknowledgedPrefix(seed: Int) throws {
        var generator = SeededGenerator(seed: UInt64(seed) &* 104_729)
        let fileSystem = SimulatedFileSystem()
        let durability = PowerCutTests.durabilities[seed % 3]
        let options = simulatedOptions(fileSystem, durability: durability, segmentByteCountMax: 16 * 1024)
        let log = try Log.open(directory: storePath, options: options)
        var acknowledged = 0
        var written: [[UInt8]] = []
        for _ in 0..<Int.random(in: 60...220, using: &generator) {
            let payload = Self.savePayload(written.count, generator: &generator)
            switch Int.random(in: 0..<10, using: &generator) {
            case 0..<4:
                try log.append(payload)
                written.append(payload)
                if durability == .synchronous { acknowledged = written.count }
            case 4..<9:
                try log.write(payload)
                written.append(payload)
            default:
                try log.sync()
                acknowledged = written.count
            }
        }
        #expect(try readAll(log, includingMarks: true).contains { $0.type == .dictionary }, "seed \(seed): no dictionary written")
        let cut = fileSystem.powerCut(seed: UInt64(seed))
        try log.close()

        let recovered = try Log.open(directory: storePath, options: simulatedOptions(cut, durability: durability))
        let records = try readAll(recovered).map(\.payload)
        #expect(records.count >= acknowledged, "seed \(seed): lost an acknowledged append")
        #expect(records == Array(written.prefix(records.count)), "seed \(seed): not a prefix")
        try recovered.append(Self.savePayload(written.count, generator: &generator))
        try recovered.close()
        let again = try Log.open(directory: storePath, options: simulatedOptions(cut, durability: durability))
        #expect(try readAll(again).count == records.count + 1)
        try again.close()
    }
}
