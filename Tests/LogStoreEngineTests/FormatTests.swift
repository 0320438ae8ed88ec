import Foundation
import LogStoreTestSupport
import Testing

@testable import LogStoreEngine

/// The Format layer against `docs/FORMAT.md`: checksums, compression, integer codecs, the fixed
/// headers and the sparse index. Byte-exact vectors come from the worked example in that document.
@Suite("Format")
struct FormatTests {
    // MARK: Helpers

    /// The store of the worked example in `docs/FORMAT.md`.
    static let exampleStoreID = UUID(uuidString: "B82609B4-9282-443B-9ED3-4006AFCEFD80")!
    static let exampleCreationTime: Int64 = 1_795_433_807_258_750
    /// The 300-byte payload of the example's second record, and its stored LZ4 block.
    static let examplePayload = Array(Array(repeating: Array("LogStore ".utf8), count: 34).joined().prefix(300))
    static let exampleBlock: [UInt8] =
        [0x9F] + Array("LogStore ".utf8) + [0x09, 0x00, 0xFF, 0x0C, 0x50]
        + Array("e Log".utf8)

    func decodeHeader(_ bytes: [UInt8], expectedOffset: UInt64) -> RecordHeader.Decoded {
        bytes.withUnsafeBytes { RecordHeader.decode($0, expectedOffset: expectedOffset) }
    }

    func encodeHeader(_ header: RecordHeader) -> [UInt8] {
        var writer = ByteWriter()
        header.encode(into: &writer)
        return writer.bytes
    }

    /// Recomputes a record header's CRC (bytes 4..<32, stored at 0) after a patch.
    func resealRecordHeader(_ bytes: [UInt8]) -> [UInt8] {
        var result = bytes
        let crc = CRC32C.checksum(result[4..<32])
        withUnsafeBytes(of: crc.littleEndian) { for (index, byte) in $0.enumerated() { result[index] = byte } }
        return result
    }

    /// Recomputes a segment header's or store.meta's CRC (bytes 0..<60, stored at 60).
    func resealFixedHeader(_ bytes: [UInt8]) -> [UInt8] {
        var result = bytes
        let crc = CRC32C.checksum(result[0..<60])
        withUnsafeBytes(of: crc.littleEndian) { for (index, byte) in $0.enumerated() { result[60 + index] = byte } }
        return result
    }

    func patch<T: FixedWidthInteger>(_ bytes: [UInt8], _ value: T, at position: Int) -> [UInt8] {
        var result = bytes
        withUnsafeBytes(of: value.littleEndian) {
            for (index, byte) in $0.enumerated() { result[position + index] = byte }
        }
        return result
    }

    func isInvalid(_ decoded: RecordHeader.Decoded) -> Bool {
        if case .invalid = decoded { return true }
        return false
    }

    func isUnsupported(_ decoded: RecordHeader.Decoded) -> Bool {
        if case .unsupported = decoded { return true }
        return false
    }

    func isDamaged<T>(_ result: Result<T, HeaderProblem>) -> Bool {
        if case .failure(.damaged) = result { return true }
        return false
    }

    /// Runs `body` on a reader over `bytes` and returns its value or its error.
    func reading<T>(_ bytes: [UInt8], _ body: (inout ByteReader) throws(ByteReaderError) -> T) -> Result<
        T, ByteReaderError
    > {
        bytes.withUnsafeBytes { buffer in
            var reader = ByteReader(buffer)
            do throws(ByteReaderError) { return .success(try body(&reader)) } catch { return .failure(error) }
        }
    }

    func isTruncated<T>(_ result: Result<T, ByteReaderError>) -> Bool {
        if case .failure(.truncated) = result { return true }
        return false
    }

    /// A sample header: every field distinct and non-zero where the format allows.
    func sampleHeader(offset: UInt64 = 0x0102_0304_0506_0708) -> RecordHeader {
        RecordHeader(
            payloadCRC: 0xDEAD_BEEF, offset: offset, storedByteCount: 1234, uncompressedByteCount: 5678,
            type: .transaction, flags: FormatConstants.flagCompressedLZ4)
    }

    // MARK: Constants

    @Test func formatConstantsMatchSpec() {
        #expect(FormatConstants.formatVersion == 3)
        #expect(FormatConstants.durableEndStatementVersion == 2)
        #expect(FormatConstants.dictionaryVersion == 3)
        #expect(FormatConstants.indexFormatVersion == 1)
        #expect(FormatConstants.recordByteCountMax == 16 * 1024 * 1024)
        #expect(FormatConstants.unsyncedByteCountMax == 4 * 1024 * 1024)
        #expect(FormatConstants.recordHeaderByteCount == 32)
        #expect(FormatConstants.segmentHeaderByteCount == 64)
        #expect(FormatConstants.storeMetaByteCount == 64)
        #expect(FormatConstants.indexHeaderByteCount == 56)
        #expect(FormatConstants.indexIntervalByteCount == 4096)
        #expect(FormatConstants.segmentMagic == Array("LOGSTSEG".utf8))
        #expect(FormatConstants.storeMetaMagic == Array("LOGSTMET".utf8))
        #expect(FormatConstants.indexMagic == Array("LOGSTIDX".utf8))
        #expect(FormatConstants.flagCompressedLZ4 == 0x01)
        #expect(FormatConstants.flagDictionary == 0x02)
        #expect(FormatConstants.knownFlags == 0x03)
        #expect(LogOptions().segmentByteCountMax == 64 * 1024 * 1024)
    }

    @Test func recordTypesMatchSpecAndHighBitMeansSkippable() {
        let expected: [(RecordType, UInt8, Bool)] = [
            (.data, 0x01, false), (.transaction, 0x02, false), (.schema, 0x03, false),
            (.checkpointHeader, 0x10, false), (.checkpointChunk, 0x11, false), (.checkpointTrailer, 0x12, false),
            (.dictionary, 0x81, true), (.bookmark, 0x82, true), (.durableEndMark, 0x83, true),
            (.checkpointRowCounts, 0x84, true),
        ]
        for (type, raw, skippable) in expected {
            #expect(type.rawValue == raw)
            #expect(type.isSkippable == skippable)
        }
        #expect(RecordType.known == Set(expected.map(\.0)))
        #expect(!RecordType.known.contains(RecordType(rawValue: 0)))
        for raw in UInt8.min...UInt8.max {
            #expect(RecordType(rawValue: raw).isSkippable == (raw >= 0x80))
            #expect(RecordType(rawValue: raw).isKnown == RecordType.known.contains(RecordType(rawValue: raw)))
        }
    }

    // MARK: CRC32C

    @Test func crcKnownAnswerMatchesSpec() {
        let bytes = Array("123456789".utf8)
        #expect(CRC32C.checksum(bytes) == 0xE306_9283)
        #expect(CRC32C.portableChecksum(bytes) == 0xE306_9283)
        #expect(bytes.withUnsafeBytes { CRC32C.checksum($0) } == 0xE306_9283)
        #expect(CRC32C.checksum("123456789".utf8) == 0xE306_9283)
    }

    @Test func crcOfEmptyInputIsZeroAndOfZerosIsNot() {
        #expect(CRC32C.checksum([UInt8]()) == 0)
        #expect(CRC32C.portableChecksum([]) == 0)
        // 32 zero bytes do not checksum to zero, so a zeroed header never passes its own CRC.
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.portableChecksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
    }

    @Test func hardwareAndPortableAgreeOnRandomBuffersAtRandomAlignments() {
        var random = SeededGenerator(seed: 0xC4C3_2C00)
        for _ in 0..<400 {
            let length = Int.random(in: 0...5000, using: &random)
            let shift = Int.random(in: 0..<16, using: &random)
            let storage = random.bytes(length + 16)
            let slice = Array(storage[shift..<(shift + length)])
            let portable = CRC32C.portableChecksum(slice)
            let atAlignment = storage.withUnsafeBytes {
                CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[shift..<(shift + length)]))
            }
            #expect(atAlignment == portable, "length \(length), shift \(shift)")
            #expect(CRC32C.checksum(slice) == portable)
        }
    }

    @Test func crcExtendInPiecesEqualsWhole() {
        var random = SeededGenerator(seed: 0xE7E9D)
        for _ in 0..<200 {
            let bytes = random.bytes(Int.random(in: 0...3000, using: &random))
            let whole = CRC32C.checksum(bytes)
            var cuts = (0..<Int.random(in: 0...6, using: &random)).map { _ in
                Int.random(in: 0...bytes.count, using: &random)
            }
            cuts = ([0] + cuts + [bytes.count]).sorted()
            var crc: UInt32 = 0
            bytes.withUnsafeBytes { buffer in
                for index in 0..<(cuts.count - 1) {
                    crc = CRC32C.extend(crc, UnsafeRawBufferPointer(rebasing: buffer[cuts[index]..<cuts[index + 1]]))
                }
            }
            #expect(crc == whole, "cuts \(cuts)")
        }
    }

    @Test func crcDetectsEverySingleBitFlip() {
        var random = SeededGenerator(seed: 17)
        let bytes = random.bytes(64)
        let original = CRC32C.checksum(bytes)
        for bit in 0..<(bytes.count * 8) {
            var flipped = bytes
            flipped[bit / 8] ^= 1 << UInt8(bit % 8)
            #expect(CRC32C.checksum(flipped) != original)
        }
    }

    // MARK: LZ4

    @Test func lz4RoundTripsCompressibleData() {
        var random = SeededGenerator(seed: 0x1A4)
        let words = ["alpha ", "beta ", "gamma ", "delta ", "\u{1F600} ", "0123456789"].map { Array($0.utf8) }
        for _ in 0..<50 {
            let wordCount = Int.random(in: 20...3000, using: &random)
            let source = (0..<wordCount).flatMap { _ in words[Int.random(in: 0..<words.count, using: &random)] }
            let compressed = source.withUnsafeBytes { LZ4.compressIfSmaller($0) }
            guard let compressed else {
                Issue.record("\(source.count) bytes of repeated words did not compress")
                continue
            }
            #expect(compressed.count < source.count)
            let decompressed = compressed.withUnsafeBytes { LZ4.decompress($0, decompressedByteCount: source.count) }
            #expect(decompressed == source)
        }
    }

    @Test func lz4ReturnsNilForIncompressibleTinyAndEmptyInput() {
        var random = SeededGenerator(seed: 0x1A5)
        for length in [1, 2, 5, 16, 100, 1000, 65_536] {
            let noise = random.bytes(length)
            #expect(noise.withUnsafeBytes { LZ4.compressIfSmaller($0) } == nil, "\(length) random bytes")
        }
        #expect([UInt8]().withUnsafeBytes { LZ4.compressIfSmaller($0) } == nil)
        #expect(Array("hello".utf8).withUnsafeBytes { LZ4.compressIfSmaller($0) } == nil)
        #expect([UInt8](repeating: 7, count: 1).withUnsafeBytes { LZ4.compressIfSmaller($0) } == nil)
    }

    @Test func lz4DecodesTheWorkedExampleBlock() {
        #expect(Self.examplePayload.count == 300)
        let decoded = Self.exampleBlock.withUnsafeBytes { LZ4.decompress($0, decompressedByteCount: 300) }
        #expect(decoded == Self.examplePayload)
        #expect(CRC32C.checksum(Self.exampleBlock) == 0x04E0_E4FA)
    }

    @Test func lz4DecompressReturnsNilOnEveryTruncation() {
        var random = SeededGenerator(seed: 0x1A6)
        let source = (0..<400).flatMap { _ in Array("record \(Int.random(in: 0..<20, using: &random)); ".utf8) }
        let block = source.withUnsafeBytes { LZ4.compressIfSmaller($0) }!
        for cut in 0..<block.count {
            let truncated = Array(block[0..<cut])
            #expect(
                truncated.withUnsafeBytes { LZ4.decompress($0, decompressedByteCount: source.count) } == nil,
                "block cut to \(cut) of \(block.count) bytes")
        }
    }

    @Test func lz4DecompressReturnsNilOnWrongExpectedLength() {
        let block = Self.exampleBlock
        for length in [0, 1, 299, 301, 600, FormatConstants.recordByteCountMax + 1] {
            #expect(
                block.withUnsafeBytes { LZ4.decompress($0, decompressedByteCount: length) } == nil, "length \(length)")
        }
        #expect([UInt8]().withUnsafeBytes { LZ4.decompress($0, decompressedByteCount: 300) } == nil)
    }

    @Test func lz4DecompressReturnsNilOnCorruptedBlocks() {
        var block = Self.exampleBlock
        // Match offset 255 reaches before the start of the output.
        block[10] = 0xFF
        #expect(block.withUnsafeBytes { LZ4.decompress($0, decompressedByteCount: 300) } == nil)
        // Match one byte longer: the output would exceed 300 bytes.
        block = Self.exampleBlock
        block[13] = 0x0D
        #expect(block.withUnsafeBytes { LZ4.decompress($0, decompressedByteCount: 300) } == nil)
        // Last literal run claims 6 bytes where 5 remain.
        block = Self.exampleBlock
        block[14] = 0x60
        #expect(block.withUnsafeBytes { LZ4.decompress($0, decompressedByteCount: 300) } == nil)
        // A literal run longer than the whole block.
        let runaway: [UInt8] = [0xF0, 0xFF, 0xFF, 0x01, 0x41, 0x42]
        #expect(runaway.withUnsafeBytes { LZ4.decompress($0, decompressedByteCount: 526) } == nil)
    }

    @Test func lz4DecompressOfAnySingleByteCorruptionIsNilOrExactLength() {
        var random = SeededGenerator(seed: 0x1A7)
        let source = (0..<300).flatMap { _ in Array("k\(Int.random(in: 0..<50, using: &random))=v; ".utf8) }
        let block = source.withUnsafeBytes { LZ4.compressIfSmaller($0) }!
        for position in 0..<block.count {
            for _ in 0..<4 {
                var corrupted = block
                corrupted[position] ^= UInt8.random(in: 1...255, using: &random)
                let decoded = corrupted.withUnsafeBytes { LZ4.decompress($0, decompressedByteCount: source.count) }
                if let decoded { #expect(decoded.count == source.count) }
            }
        }
    }

    // MARK: ByteWriter / ByteReader

    @Test func integersRoundTripLittleEndian() {
        var writer = ByteWriter()
        writer.write(UInt8(0xAB))
        writer.write(UInt16(0x1234))
        writer.write(UInt32(0xDEAD_BEEF))
        writer.write(UInt64(0x0102_0304_0506_0708))
        writer.write(Int32(-2))
        writer.write(Int64.min)
        #expect(
            writer.bytes == [
                0xAB, 0x34, 0x12, 0xEF, 0xBE, 0xAD, 0xDE, 8, 7, 6, 5, 4, 3, 2, 1,
                0xFE, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0, 0, 0x80,
            ])
        let result = reading(writer.bytes) { (reader) throws(ByteReaderError) in
            (
                try reader.readByte(), try reader.read(UInt16.self), try reader.read(UInt32.self),
                try reader.read(UInt64.self),
                try reader.read(Int32.self), try reader.read(Int64.self), reader.isAtEnd
            )
        }
        guard case .success(let values) = result else {
            Issue.record("\(result)")
            return
        }
        #expect(values.0 == 0xAB && values.1 == 0x1234 && values.2 == 0xDEAD_BEEF && values.3 == 0x0102_0304_0506_0708)
        #expect(values.4 == -2 && values.5 == Int64.min && values.6)
    }

    @Test func patchOverwritesInPlace() {
        var writer = ByteWriter()
        writer.writeZeros(8)
        writer.patch(UInt32(0x0A0B_0C0D), at: 2)
        #expect(writer.bytes == [0, 0, 0x0D, 0x0C, 0x0B, 0x0A, 0, 0])
    }

    @Test func varintsRoundTripWithLEB128Encoding() {
        let vectors: [(UInt64, [UInt8])] = [
            (0, [0x00]), (1, [0x01]), (127, [0x7F]), (128, [0x80, 0x01]), (300, [0xAC, 0x02]),
            (16_383, [0xFF, 0x7F]), (16_384, [0x80, 0x80, 0x01]),
            (UInt64.max, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]),
        ]
        for (value, expected) in vectors {
            var writer = ByteWriter()
            writer.writeVarint(value)
            #expect(writer.bytes == expected, "\(value)")
            #expect(
                reading(expected) { (reader) throws(ByteReaderError) in try reader.readVarint() } == .success(value))
        }
        var random = SeededGenerator(seed: 0x7A21)
        var writer = ByteWriter()
        let values = (0..<1000).map { _ in random.next() >> UInt64.random(in: 0...63, using: &random) }
        for value in values { writer.writeVarint(value) }
        let decoded = reading(writer.bytes) { (reader) throws(ByteReaderError) in
            var result: [UInt64] = []
            while !reader.isAtEnd { result.append(try reader.readVarint()) }
            return result
        }
        #expect(decoded == .success(values))
    }

    @Test func signedVarintsRoundTripWithZigZag() {
        let vectors: [(Int64, [UInt8])] = [(0, [0]), (-1, [1]), (1, [2]), (-64, [0x7F]), (64, [0x80, 0x01])]
        for (value, expected) in vectors {
            var writer = ByteWriter()
            writer.writeSignedVarint(value)
            #expect(writer.bytes == expected, "\(value)")
        }
        var random = SeededGenerator(seed: 0x5167)
        var values: [Int64] = [0, 1, -1, 127, -128, Int64.max, Int64.min, Int64.max - 1, Int64.min + 1]
        values += (0..<500).map { _ in Int64(bitPattern: random.next()) >> Int64.random(in: 0...63, using: &random) }
        var writer = ByteWriter()
        for value in values { writer.writeSignedVarint(value) }
        let decoded = reading(writer.bytes) { (reader) throws(ByteReaderError) in
            var result: [Int64] = []
            while !reader.isAtEnd { result.append(try reader.readSignedVarint()) }
            return result
        }
        #expect(decoded == .success(values))
    }

    @Test func lengthPrefixedBytesRoundTrip() {
        var random = SeededGenerator(seed: 0x1E9)
        let chunks: [[UInt8]] = [[], [0x42], random.bytes(127), random.bytes(128), random.bytes(5000)]
        var writer = ByteWriter()
        for chunk in chunks { writer.writeLengthPrefixed(chunk) }
        #expect(writer.count == chunks.reduce(0) { $0 + $1.count } + 1 + 1 + 1 + 2 + 2)
        let decoded = reading(writer.bytes) { (reader) throws(ByteReaderError) in
            var result: [[UInt8]] = []
            while !reader.isAtEnd { result.append(try reader.readLengthPrefixed()) }
            return result
        }
        #expect(decoded == .success(chunks))
    }

    @Test func readerThrowsTruncatedOnShortInput() {
        #expect(
            reading([1, 2, 3]) { (reader) throws(ByteReaderError) in try reader.read(UInt32.self) }
                == .failure(.truncated(needed: 4, available: 3)))
        #expect(
            reading([]) { (reader) throws(ByteReaderError) in try reader.readByte() }
                == .failure(.truncated(needed: 1, available: 0)))
        #expect(
            reading([1, 2]) { (reader) throws(ByteReaderError) in try reader.readBytes(3) }
                == .failure(.truncated(needed: 3, available: 2)))
        #expect(isTruncated(reading([1, 2]) { (reader) throws(ByteReaderError) in try reader.readBytes(-1) }))
        #expect(isTruncated(reading([1, 2]) { (reader) throws(ByteReaderError) in try reader.skip(5) }))
        #expect(isTruncated(reading([0x80, 0x80]) { (reader) throws(ByteReaderError) in try reader.readVarint() }))
        #expect(isTruncated(reading([]) { (reader) throws(ByteReaderError) in try reader.readSignedVarint() }))
        // A failed fixed-width read leaves the position where it was.
        let position = reading([9, 1, 2]) { (reader) throws(ByteReaderError) in
            _ = try? reader.read(UInt64.self)
            return reader.position
        }
        #expect(position == .success(0))
    }

    @Test func readerThrowsTruncatedWhenLengthPrefixExceedsWhatIsLeft() {
        // 200 announced, 3 present.
        #expect(
            reading([0xC8, 0x01, 1, 2, 3]) { (reader) throws(ByteReaderError) in try reader.readLengthPrefixed() }
                == .failure(.truncated(needed: 200, available: 3)))
        // UInt64.max announced: must not allocate or trap.
        var writer = ByteWriter()
        writer.writeVarint(UInt64.max)
        writer.write(bytes: [1, 2, 3])
        #expect(
            reading(writer.bytes) { (reader) throws(ByteReaderError) in try reader.readLengthPrefixed() }
                == .failure(.truncated(needed: Int.max, available: 3)))
    }

    @Test func readerNeverCrashesOnAnyPrefixOfValidInput() {
        var random = SeededGenerator(seed: 0x9EF)
        var writer = ByteWriter()
        writer.write(UInt32(7))
        writer.writeVarint(UInt64.max)
        writer.writeSignedVarint(-123_456)
        writer.writeLengthPrefixed(random.bytes(40))
        writer.write(UInt64(9))
        let full = writer.bytes
        for cut in 0..<full.count {
            let result = reading(Array(full[0..<cut])) { (reader) throws(ByteReaderError) in
                _ = try reader.read(UInt32.self)
                _ = try reader.readVarint()
                _ = try reader.readSignedVarint()
                _ = try reader.readLengthPrefixed()
                _ = try reader.read(UInt64.self)
            }
            #expect(isTruncated(result), "cut at \(cut)")
        }
    }

    @Test func readerRejectsOverlongAndOverflowingVarints() {
        let overlong = [UInt8](repeating: 0x80, count: 10) + [0x00]
        #expect(
            reading(overlong) { (reader) throws(ByteReaderError) in try reader.readVarint() }
                == .failure(.malformed("varint longer than 10 bytes")))
        let overflowing = [UInt8](repeating: 0xFF, count: 9) + [0x02]
        #expect(
            reading(overflowing) { (reader) throws(ByteReaderError) in try reader.readVarint() }
                == .failure(.malformed("varint overflows 64 bits")))
    }

    // MARK: Record header

    @Test func recordHeaderRoundTrips() {
        var random = SeededGenerator(seed: 0x4EAD)
        let types: [RecordType] = Array(RecordType.known) + [RecordType(rawValue: 0xF0)]
        for _ in 0..<500 {
            let compressed = Bool.random(using: &random)
            let uncompressed = UInt32.random(in: 1...UInt32(FormatConstants.recordByteCountMax), using: &random)
            let header = RecordHeader(
                payloadCRC: UInt32.random(in: 0...UInt32.max, using: &random),
                offset: UInt64.random(in: 0...(UInt64.max / 2), using: &random),
                storedByteCount: compressed ? UInt32.random(in: 1...uncompressed, using: &random) : uncompressed,
                uncompressedByteCount: uncompressed,
                type: types[Int.random(in: 0..<types.count, using: &random)],
                flags: compressed ? FormatConstants.flagCompressedLZ4 : 0)
            let bytes = encodeHeader(header)
            #expect(bytes.count == FormatConstants.recordHeaderByteCount)
            #expect(decodeHeader(bytes, expectedOffset: header.offset) == .valid(header))
        }
        let empty = RecordHeader(
            payloadCRC: 0, offset: 64, storedByteCount: 0, uncompressedByteCount: 0, type: .data, flags: 0)
        #expect(decodeHeader(encodeHeader(empty), expectedOffset: 64) == .valid(empty))
        #expect(empty.recordByteCount == 32 && empty.endOffset == 96)
    }

    @Test func recordHeaderMatchesWorkedExampleBytes() {
        #expect(CRC32C.checksum("hello".utf8) == 0x9A71_BB4C)
        let hello = RecordHeader(
            payloadCRC: 0x9A71_BB4C, offset: 0, storedByteCount: 5, uncompressedByteCount: 5,
            type: .data, flags: 0)
        #expect(
            encodeHeader(hello) == [
                0xB2, 0x65, 0xB1, 0xFF, 0x4C, 0xBB, 0x71, 0x9A, 0, 0, 0, 0, 0, 0, 0, 0,
                0x05, 0, 0, 0, 0x05, 0, 0, 0, 0x01, 0, 0, 0, 0, 0, 0, 0,
            ])
        let compressed = RecordHeader(
            payloadCRC: 0x04E0_E4FA, offset: 37, storedByteCount: 20, uncompressedByteCount: 300,
            type: .data, flags: FormatConstants.flagCompressedLZ4)
        #expect(
            encodeHeader(compressed) == [
                0x43, 0x02, 0xD3, 0xCC, 0xFA, 0xE4, 0xE0, 0x04, 0x25, 0, 0, 0, 0, 0, 0, 0,
                0x14, 0, 0, 0, 0x2C, 0x01, 0, 0, 0x01, 0x01, 0, 0, 0, 0, 0, 0,
            ])
        #expect(compressed.endOffset == 89)
    }

    /// Version 2 (FORMAT.md §6.1): the dictionary id at 26 (16 bits) and the durable-end delta at
    /// 28. Expected bytes computed independently (Python, from the document).
    @Test func versionTwoRecordHeaderStatesTheDurableEnd() {
        let hello = RecordHeader(
            payloadCRC: 0x9A71_BB4C, offset: 89, storedByteCount: 5, uncompressedByteCount: 5,
            type: .data, flags: 0, durableEndDelta: 52)
        #expect(hello.statedDurableEnd == 37)
        let expected: [UInt8] = [
            0x49, 0x72, 0x61, 0x58, 0x4C, 0xBB, 0x71, 0x9A, 0x59, 0, 0, 0, 0, 0, 0, 0,
            0x05, 0, 0, 0, 0x05, 0, 0, 0, 0x01, 0, 0, 0, 0x34, 0, 0, 0,
        ]
        #expect(encodeHeader(hello) == expected)
        #expect(decodeHeader(expected, expectedOffset: 89) == .valid(hello))
        // The same bytes in a version-1 file: a dictionary id without the dictionary flag.
        let asVersionOne = expected.withUnsafeBytes { RecordHeader.decode($0, expectedOffset: 89, formatVersion: 1) }
        #expect(isUnsupported(asVersionOne))
        // A durable-end mark at 126 stating everything before it durable.
        let mark = RecordHeader(
            payloadCRC: 0, offset: 126, storedByteCount: 0, uncompressedByteCount: 0, type: .durableEndMark, flags: 0)
        #expect(
            encodeHeader(mark) == [
                0x64, 0xFD, 0x5E, 0xDD, 0, 0, 0, 0, 0x7E, 0, 0, 0, 0, 0, 0, 0,
                0, 0, 0, 0, 0, 0, 0, 0, 0x83, 0, 0, 0, 0, 0, 0, 0,
            ])
    }

    /// A stated durable end lies in [segment base, own offset]: below the base is bad.
    @Test func aDurableEndBelowTheSegmentBaseIsBad() {
        let header = RecordHeader(
            payloadCRC: 1, offset: 1000, storedByteCount: 4, uncompressedByteCount: 4, type: .data, flags: 0,
            durableEndDelta: 100)
        let bytes = encodeHeader(header)
        func decode(base: UInt64) -> RecordHeader.Decoded {
            bytes.withUnsafeBytes { RecordHeader.decode($0, expectedOffset: 1000, baseOffset: base) }
        }
        #expect(decode(base: 900) == .valid(header))
        #expect(decode(base: 0) == .valid(header))
        #expect(isInvalid(decode(base: 901)))
    }

    /// Version 1 headers still read: a reserved u16 at 26 and the dictionary id at 28.
    @Test func versionOneRecordHeadersStillRead() {
        let header = RecordHeader(
            payloadCRC: 0x9A71_BB4C, offset: 0, storedByteCount: 5, uncompressedByteCount: 5, type: .data, flags: 0)
        var writer = ByteWriter()
        header.encode(into: &writer, formatVersion: 1)
        let decoded = writer.bytes.withUnsafeBytes { RecordHeader.decode($0, expectedOffset: 0, formatVersion: 1) }
        #expect(decoded == .valid(header))
        let reserved = resealRecordHeader(patch(writer.bytes, UInt16(1), at: 26))
        #expect(
            isUnsupported(reserved.withUnsafeBytes { RecordHeader.decode($0, expectedOffset: 0, formatVersion: 1) }))
    }

    @Test func recordHeaderDecodesZerosAsEndOfLog() {
        let zeros = [UInt8](repeating: 0, count: 32)
        #expect(decodeHeader(zeros, expectedOffset: 0) == .zeros)
        #expect(decodeHeader(zeros, expectedOffset: 12_345) == .zeros)
    }

    @Test func recordHeaderRejectsEverySingleBitFlip() {
        let header = sampleHeader()
        let bytes = encodeHeader(header)
        for bit in 0..<256 {
            var flipped = bytes
            flipped[bit / 8] ^= 1 << UInt8(bit % 8)
            let decoded = decodeHeader(flipped, expectedOffset: header.offset)
            #expect(isInvalid(decoded), "bit \(bit): \(decoded)")
        }
    }

    @Test func recordHeaderRejectsAnOffsetOtherThanExpected() {
        var random = SeededGenerator(seed: 0x0FF5)
        let header = sampleHeader(offset: 4096)
        let bytes = encodeHeader(header)
        for expected: UInt64 in [0, 4095, 4097, 4096 + 32, UInt64.max] {
            #expect(isInvalid(decodeHeader(bytes, expectedOffset: expected)), "expected \(expected)")
        }
        for _ in 0..<100 {
            let expected = random.next()
            if expected != 4096 { #expect(isInvalid(decodeHeader(bytes, expectedOffset: expected))) }
        }
    }

    @Test func recordHeaderRejectsLengthsAboveSixteenMiBEvenWithAValidChecksum() {
        let maximum = UInt32(FormatConstants.recordByteCountMax)
        let raw = encodeHeader(
            RecordHeader(
                payloadCRC: 1, offset: 0, storedByteCount: 10, uncompressedByteCount: 10,
                type: .data, flags: 0))
        // Uncompressed, both lengths one past the maximum.
        var bytes = resealRecordHeader(patch(patch(raw, maximum + 1, at: 16), maximum + 1, at: 20))
        #expect(isInvalid(decodeHeader(bytes, expectedOffset: 0)))
        bytes = resealRecordHeader(patch(patch(raw, UInt32.max, at: 16), UInt32.max, at: 20))
        #expect(isInvalid(decodeHeader(bytes, expectedOffset: 0)))
        // Compressed: a small block claiming a too-large uncompressed length.
        let compressed = patch(raw, FormatConstants.flagCompressedLZ4, at: 25)
        bytes = resealRecordHeader(patch(compressed, maximum + 1, at: 20))
        #expect(isInvalid(decodeHeader(bytes, expectedOffset: 0)))
        // Exactly the maximum is allowed.
        bytes = resealRecordHeader(patch(patch(raw, maximum, at: 16), maximum, at: 20))
        guard case .valid(let header) = decodeHeader(bytes, expectedOffset: 0) else {
            Issue.record("a 16 MiB record must decode")
            return
        }
        #expect(header.storedByteCount == maximum)
    }

    @Test func recordHeaderRejectsInconsistentLengthsAndTypeZero() {
        // Uncompressed with stored != uncompressed.
        let uncompressed = RecordHeader(
            payloadCRC: 1, offset: 0, storedByteCount: 10, uncompressedByteCount: 11,
            type: .data, flags: 0)
        #expect(isInvalid(decodeHeader(encodeHeader(uncompressed), expectedOffset: 0)))
        // Compressed with an empty side.
        for (stored, raw) in [(UInt32(0), UInt32(10)), (10, 0), (0, 0)] {
            let header = RecordHeader(
                payloadCRC: 1, offset: 0, storedByteCount: stored, uncompressedByteCount: raw,
                type: .data, flags: FormatConstants.flagCompressedLZ4)
            #expect(isInvalid(decodeHeader(encodeHeader(header), expectedOffset: 0)), "\(stored)/\(raw)")
        }
        let typeZero = RecordHeader(
            payloadCRC: 1, offset: 0, storedByteCount: 1, uncompressedByteCount: 1,
            type: RecordType(rawValue: 0), flags: 0)
        #expect(isInvalid(decodeHeader(encodeHeader(typeZero), expectedOffset: 0)))
    }

    @Test func recordHeaderRefusesUnknownFlagsDictionaryAndReservedBits() {
        for flags: UInt8 in [0x04, 0x08, 0x10, 0x80, 0xFC, 0xFF, 0x05] {
            let header = RecordHeader(
                payloadCRC: 1, offset: 0, storedByteCount: 4, uncompressedByteCount: 8,
                type: .data, flags: flags)
            #expect(isUnsupported(decodeHeader(encodeHeader(header), expectedOffset: 0)), "flags \(flags)")
        }
        for flags in [
            FormatConstants.flagDictionary, FormatConstants.flagDictionary | FormatConstants.flagCompressedLZ4,
        ] {
            let header = RecordHeader(
                payloadCRC: 1, offset: 0, storedByteCount: 4, uncompressedByteCount: 4,
                type: .data, flags: flags, dictionaryID: 7)
            #expect(isUnsupported(decodeHeader(encodeHeader(header), expectedOffset: 0)), "flags \(flags)")
        }
        let plain = encodeHeader(
            RecordHeader(
                payloadCRC: 1, offset: 0, storedByteCount: 4, uncompressedByteCount: 4,
                type: .data, flags: 0))
        for reserved: UInt16 in [1, 0x100, 0xFFFF] {
            #expect(isUnsupported(decodeHeader(resealRecordHeader(patch(plain, reserved, at: 26)), expectedOffset: 0)))
        }
    }

    @Test func recordHeaderRefusesUnknownNonSkippableTypes() {
        for raw: UInt8 in [0x04, 0x0F, 0x13, 0x20, 0x7F] {
            let header = RecordHeader(
                payloadCRC: 1, offset: 0, storedByteCount: 4, uncompressedByteCount: 4,
                type: RecordType(rawValue: raw), flags: 0)
            #expect(isUnsupported(decodeHeader(encodeHeader(header), expectedOffset: 0)), "type \(raw)")
        }
    }

    @Test func recordHeaderAcceptsUnknownSkippableTypes() {
        for raw: UInt8 in [0xF0, 0x80, 0x83, 0xFF] {
            let header = RecordHeader(
                payloadCRC: 1, offset: 96, storedByteCount: 4, uncompressedByteCount: 4,
                type: RecordType(rawValue: raw), flags: 0)
            #expect(decodeHeader(encodeHeader(header), expectedOffset: 96) == .valid(header), "type \(raw)")
        }
    }

    // MARK: Segment header and store.meta

    @Test func segmentHeaderRoundTrips() {
        var random = SeededGenerator(seed: 0x5E6)
        for _ in 0..<100 {
            var idBytes = random.bytes(16)
            idBytes[6] = idBytes[6] & 0x0F | 0x40
            idBytes[8] = idBytes[8] & 0x3F | 0x80
            let header = SegmentHeader(storeID: UUID(bytes: idBytes), baseOffset: random.next())
            let bytes = header.encoded()
            #expect(bytes.count == 64)
            #expect(SegmentHeader.decode(bytes) == .success(header))
            // A longer read (header plus records) decodes from its first 64 bytes.
            #expect(SegmentHeader.decode(bytes + random.bytes(40)) == .success(header))
        }
    }

    /// The version-1 worked example of FORMAT.md revision 2 (version-1 headers are still read).
    @Test func segmentHeaderMatchesWorkedExampleBytes() {
        let header = SegmentHeader(formatVersion: 1, storeID: Self.exampleStoreID, baseOffset: 37)
        let expected: [UInt8] =
            Array("LOGSTSEG".utf8) + [1, 0, 0, 0, 0x40, 0, 0, 0]
            + [0xB8, 0x26, 0x09, 0xB4, 0x92, 0x82, 0x44, 0x3B, 0x9E, 0xD3, 0x40, 0x06, 0xAF, 0xCE, 0xFD, 0x80]
            + [0x25, 0, 0, 0, 0, 0, 0, 0] + [UInt8](repeating: 0, count: 20) + [0x82, 0xE9, 0x40, 0xAC]
        #expect(header.encoded() == expected)
        #expect(
            SegmentHeader(formatVersion: 1, storeID: Self.exampleStoreID, baseOffset: 0).encoded().suffix(4) == [
                0xD0, 0x71, 0x1C, 0x86,
            ])
        #expect(SegmentHeader.decode(expected) == .success(header))
    }

    @Test func segmentHeaderOfANewerVersionIsReportedAsNewer() {
        for version: UInt32 in [4, 5, UInt32.max] {
            let bytes = SegmentHeader(formatVersion: version, storeID: Self.exampleStoreID, baseOffset: 0).encoded()
            #expect(SegmentHeader.decode(bytes) == .failure(.newerVersion(version)))
        }
    }

    @Test func segmentHeaderRejectsEveryBitFlipShortInputAndWrongSize() {
        let bytes = SegmentHeader(storeID: Self.exampleStoreID, baseOffset: 4096).encoded()
        for bit in 0..<(64 * 8) {
            var flipped = bytes
            flipped[bit / 8] ^= 1 << UInt8(bit % 8)
            #expect(isDamaged(SegmentHeader.decode(flipped)), "bit \(bit)")
        }
        for length in [0, 8, 32, 63] {
            #expect(isDamaged(SegmentHeader.decode(Array(bytes[0..<length]))), "length \(length)")
        }
        #expect(isDamaged(SegmentHeader.decode([UInt8](repeating: 0, count: 64))))
        #expect(isDamaged(SegmentHeader.decode(resealFixedHeader(patch(bytes, UInt32(128), at: 12)))))
        // store.meta bytes are not a segment header.
        let meta = StoreMeta(storeID: Self.exampleStoreID, creationTimeMicroseconds: 0).encoded()
        #expect(isDamaged(SegmentHeader.decode(meta)))
    }

    @Test func storeMetaRoundTrips() {
        var random = SeededGenerator(seed: 0x3E7A)
        for _ in 0..<100 {
            let meta = StoreMeta(
                storeID: UUID(bytes: random.bytes(16)),
                creationTimeMicroseconds: Int64(bitPattern: random.next()))
            let bytes = meta.encoded()
            #expect(bytes.count == 64)
            #expect(StoreMeta.decode(bytes) == .success(meta))
        }
    }

    @Test func storeMetaMatchesWorkedExampleBytes() {
        let meta = StoreMeta(
            formatVersion: 1, storeID: Self.exampleStoreID, creationTimeMicroseconds: Self.exampleCreationTime)
        let expected: [UInt8] =
            Array("LOGSTMET".utf8) + [1, 0, 0, 0, 0x40, 0, 0, 0]
            + [0xB8, 0x26, 0x09, 0xB4, 0x92, 0x82, 0x44, 0x3B, 0x9E, 0xD3, 0x40, 0x06, 0xAF, 0xCE, 0xFD, 0x80]
            + [0x7E, 0xA4, 0x4C, 0x02, 0xF0, 0x60, 0x06, 0x00] + [UInt8](repeating: 0, count: 20)
            + [0x6F, 0x39, 0x98, 0x1D]
        #expect(meta.encoded() == expected)
        #expect(meta.creationDate == Date(timeIntervalSince1970: 1_795_433_807.258_750))
    }

    @Test func storeMetaOfANewerVersionIsReportedAsNewer() {
        let bytes = StoreMeta(formatVersion: 4, storeID: Self.exampleStoreID, creationTimeMicroseconds: 1).encoded()
        #expect(StoreMeta.decode(bytes) == .failure(.newerVersion(4)))
    }

    @Test func storeMetaRejectsEveryBitFlipAndWrongLength() {
        let bytes = StoreMeta(storeID: Self.exampleStoreID, creationTimeMicroseconds: Self.exampleCreationTime)
            .encoded()
        for bit in 0..<(64 * 8) {
            var flipped = bytes
            flipped[bit / 8] ^= 1 << UInt8(bit % 8)
            #expect(isDamaged(StoreMeta.decode(flipped)), "bit \(bit)")
        }
        #expect(isDamaged(StoreMeta.decode(Array(bytes[0..<63]))))
        #expect(isDamaged(StoreMeta.decode(bytes + [0])))
        #expect(isDamaged(StoreMeta.decode([])))
        #expect(isDamaged(StoreMeta.decode(resealFixedHeader(patch(bytes, UInt32(65), at: 12)))))
        let segment = SegmentHeader(storeID: Self.exampleStoreID, baseOffset: 0).encoded()
        #expect(isDamaged(StoreMeta.decode(segment)))
    }

    @Test func uuidBytesAreInRFC4122Order() {
        #expect(
            Self.exampleStoreID.bytes == [
                0xB8, 0x26, 0x09, 0xB4, 0x92, 0x82, 0x44, 0x3B,
                0x9E, 0xD3, 0x40, 0x06, 0xAF, 0xCE, 0xFD, 0x80,
            ])
        var random = SeededGenerator(seed: 0x0D)
        for _ in 0..<20 {
            let bytes = random.bytes(16)
            #expect(UUID(bytes: bytes).bytes == bytes)
        }
    }

    // MARK: Sparse index

    /// Notes `count` records of random sizes (many small, some spanning several intervals).
    func randomIndex(_ random: inout SeededGenerator, count: Int) -> (SparseIndex, starts: [UInt64], end: UInt64) {
        var index = SparseIndex()
        var starts: [UInt64] = []
        var position: UInt64 = 0
        for _ in 0..<count {
            let size: UInt64 =
                Int.random(in: 0..<10, using: &random) < 8
                ? UInt64.random(in: 32...400, using: &random)
                : UInt64.random(in: 401...20_000, using: &random)
            index.note(relativeOffset: position, recordByteCount: size)
            starts.append(position)
            position += size
        }
        return (index, starts, position)
    }

    @Test func sparseIndexKeepsTheFirstRecordAtOrAfterEachInterval() {
        var random = SeededGenerator(seed: 0x1D3)
        for count in [1, 2, 10, 500, 3000] {
            let (index, starts, end) = randomIndex(&random, count: count)
            let interval = FormatConstants.indexIntervalByteCount
            let multiples = stride(from: UInt64(0), to: end, by: Int(interval))
            let reference = Set(multiples.compactMap { multiple in starts.first { $0 >= multiple } }).sorted()
            #expect(index.entries.map(UInt64.init) == reference, "\(count) records")
            #expect(index.endOffset == end)
            #expect(index.lastRecordOffset == starts.last)
        }
        #expect(SparseIndex().entries.isEmpty && SparseIndex().lastRecordOffset == nil)
    }

    @Test func sparseIndexEntryAtOrBeforeMatchesBruteForce() {
        var random = SeededGenerator(seed: 0x1D4)
        for count in [0, 1, 3, 100, 2000] {
            let (index, starts, end) = randomIndex(&random, count: count)
            let entries = index.entries.map(UInt64.init)
            var queries: [UInt64] = [0, 1, end, end + 1, UInt64.max]
            queries += starts
            queries += (0..<2000).map { _ in UInt64.random(in: 0...(end + 5000), using: &random) }
            for query in queries {
                let expected = entries.last { $0 <= query } ?? 0
                #expect(index.entry(atOrBefore: query) == expected, "query \(query)")
            }
            // What the index is for: from any record start, the entry is a record start at most
            // one interval back.
            for start in starts {
                let entry = index.entry(atOrBefore: start)
                #expect(entry <= start && start - entry < FormatConstants.indexIntervalByteCount)
                #expect(starts.contains(entry))
            }
        }
    }

    @Test func sparseIndexEncodeDecodeRoundTrips() {
        var random = SeededGenerator(seed: 0x1D5)
        let storeID = UUID(bytes: random.bytes(16))
        for count in [0, 1, 7, 1500] {
            let (index, _, _) = randomIndex(&random, count: count)
            let base = random.next() >> 2
            let bytes = index.encoded(storeID: storeID, baseOffset: base)
            #expect(bytes.count == FormatConstants.indexHeaderByteCount + 4 * index.entries.count + 4)
            #expect(SparseIndex.decode(bytes, storeID: storeID, baseOffset: base) == index, "\(count) records")
        }
    }

    @Test func sparseIndexMatchesWorkedExampleBytes() {
        var index = SparseIndex()
        index.note(relativeOffset: 0, recordByteCount: 37)
        let expected: [UInt8] =
            Array("LOGSTIDX".utf8) + [1, 0, 0, 0, 1, 0, 0, 0]
            + [0xB8, 0x26, 0x09, 0xB4, 0x92, 0x82, 0x44, 0x3B, 0x9E, 0xD3, 0x40, 0x06, 0xAF, 0xCE, 0xFD, 0x80]
            + [0, 0, 0, 0, 0, 0, 0, 0] + [0x25, 0, 0, 0, 0, 0, 0, 0] + [0, 0, 0, 0, 0, 0, 0, 0]
            + [0, 0, 0, 0] + [0xF9, 0x8F, 0x4B, 0xFC]
        #expect(index.encoded(storeID: Self.exampleStoreID, baseOffset: 0) == expected)
        // An empty segment's index has lastRecordOffset all ones.
        let empty = SparseIndex().encoded(storeID: Self.exampleStoreID, baseOffset: 37)
        #expect(Array(empty[48..<56]) == [UInt8](repeating: 0xFF, count: 8))
        #expect(SparseIndex.decode(empty, storeID: Self.exampleStoreID, baseOffset: 37) == SparseIndex())
    }

    @Test func sparseIndexDecodeRejectsAnySingleFlippedByte() {
        var random = SeededGenerator(seed: 0x1D6)
        let storeID = UUID(bytes: random.bytes(16))
        let (index, _, _) = randomIndex(&random, count: 300)
        let bytes = index.encoded(storeID: storeID, baseOffset: 8192)
        for position in 0..<bytes.count {
            var damaged = bytes
            damaged[position] ^= UInt8.random(in: 1...255, using: &random)
            #expect(SparseIndex.decode(damaged, storeID: storeID, baseOffset: 8192) == nil, "byte \(position)")
        }
    }

    @Test func sparseIndexDecodeRejectsWrongStoreBaseOffsetAndLength() {
        var random = SeededGenerator(seed: 0x1D7)
        let storeID = UUID(bytes: random.bytes(16))
        let (index, _, _) = randomIndex(&random, count: 100)
        let bytes = index.encoded(storeID: storeID, baseOffset: 4096)
        #expect(SparseIndex.decode(bytes, storeID: storeID, baseOffset: 4096) == index)
        #expect(SparseIndex.decode(bytes, storeID: UUID(bytes: random.bytes(16)), baseOffset: 4096) == nil)
        #expect(SparseIndex.decode(bytes, storeID: storeID, baseOffset: 4097) == nil)
        #expect(SparseIndex.decode(bytes, storeID: storeID, baseOffset: 0) == nil)
        for length in [0, 8, 59, bytes.count - 4, bytes.count - 1] {
            #expect(SparseIndex.decode(Array(bytes[0..<length]), storeID: storeID, baseOffset: 4096) == nil)
        }
        #expect(SparseIndex.decode(bytes + [0, 0, 0, 0], storeID: storeID, baseOffset: 4096) == nil)
    }

    /// Builds an index file by hand (valid CRC) to reach the checks behind the CRC.
    func handMadeIndex(
        storeID: UUID, version: UInt32 = 1, entries: [UInt32], end: UInt64, last: UInt64,
        count: UInt32? = nil
    ) -> [UInt8] {
        var writer = ByteWriter()
        writer.write(bytes: FormatConstants.indexMagic)
        writer.write(version)
        writer.write(count ?? UInt32(entries.count))
        writer.write(bytes: storeID.bytes)
        writer.write(UInt64(0))
        writer.write(end)
        writer.write(last)
        for entry in entries { writer.write(entry) }
        writer.write(CRC32C.checksum(writer.bytes))
        return writer.bytes
    }

    @Test func sparseIndexDecodeRejectsInconsistentContentUnderAValidChecksum() {
        let id = Self.exampleStoreID
        #expect(
            SparseIndex.decode(
                handMadeIndex(storeID: id, entries: [0, 5000], end: 6000, last: 5000),
                storeID: id, baseOffset: 0) != nil)
        // Entries not ascending, an entry at or past the end, last record past the end.
        #expect(
            SparseIndex.decode(
                handMadeIndex(storeID: id, entries: [0, 5000, 4000], end: 6000, last: 5000),
                storeID: id, baseOffset: 0) == nil)
        #expect(
            SparseIndex.decode(
                handMadeIndex(storeID: id, entries: [0, 0], end: 6000, last: 0),
                storeID: id, baseOffset: 0) == nil)
        #expect(
            SparseIndex.decode(
                handMadeIndex(storeID: id, entries: [0, 6000], end: 6000, last: 5000),
                storeID: id, baseOffset: 0) == nil)
        #expect(
            SparseIndex.decode(
                handMadeIndex(storeID: id, entries: [0], end: 6000, last: 6000),
                storeID: id, baseOffset: 0) == nil)
        // Entry count disagreeing with the file length; another format version.
        #expect(
            SparseIndex.decode(
                handMadeIndex(storeID: id, entries: [0, 5000], end: 6000, last: 5000, count: 3),
                storeID: id, baseOffset: 0) == nil)
        #expect(
            SparseIndex.decode(
                handMadeIndex(storeID: id, version: 2, entries: [0], end: 6000, last: 0),
                storeID: id, baseOffset: 0) == nil)
    }

    // MARK: Records encoded in one buffer (0aec71b)

    /// What a prepared record's bytes were before its buffer was made once: the header encoded
    /// by a writer, then LZ4's block as an array of its own, or the payload.
    static func composedRecord(
        _ payload: [UInt8], compresses: Bool, dictionary: RecordDictionary?, offset: UInt64, durableEnd: UInt64
    ) -> [UInt8] {
        let block: [UInt8]? =
            !compresses
            ? nil
            : payload.withUnsafeBytes { bytes in
                dictionary.map { $0.compressIfSmaller(bytes) } ?? LZ4.compressIfSmaller(bytes)
            }
        let stored = block ?? payload
        let usesDictionary = block != nil && dictionary != nil
        let header = RecordHeader(
            payloadCRC: CRC32C.checksum(stored), offset: offset, storedByteCount: UInt32(stored.count),
            uncompressedByteCount: UInt32(payload.count), type: .data,
            flags: block == nil ? 0 : FormatConstants.flagCompressedLZ4 | (usesDictionary ? FormatConstants.flagDictionary : 0),
            dictionaryID: usesDictionary ? FormatConstants.segmentDictionaryID : 0,
            durableEndDelta: UInt32(offset - durableEnd))
        var writer = ByteWriter()
        header.encode(into: &writer)
        return writer.bytes + stored
    }

    @Test("a record made in one buffer has the bytes the header writer and LZ4's own array made, and reads back")
    func preparedRecordBytesAreTheComposedOnes() throws {
        let dictionary = RecordDictionary(Array(Self.examplePayload.prefix(200)), recordByteCount: 0)
        var random = SystemRandomNumberGenerator()
        let noise = (0..<300).map { _ in UInt8.random(in: 0...255, using: &random) }
        let payloads: [[UInt8]] = [
            [], [7], [7, 7], [7, 7, 7], Array(repeating: 0, count: 64), Self.examplePayload, noise,
            // Compresses to exactly one byte less than itself, or not at all: the bound of the block.
            Array(Self.examplePayload.prefix(20)) + noise.prefix(40),
        ]
        for payload in payloads {
            for compresses in [false, true] {
                for usedDictionary in [nil, dictionary] {
                    var record = try payload.withUnsafeBytes {
                        try PreparedRecord(payload: $0, type: .data, compresses: compresses, dictionary: usedDictionary)
                    }
                    record.assign(offset: 4_096, durableEnd: 1_024)
                    let expected = Self.composedRecord(
                        payload, compresses: compresses, dictionary: usedDictionary, offset: 4_096, durableEnd: 1_024)
                    #expect(record.bytes == expected, "\(payload.count) bytes, compresses \(compresses)")
                    // Read back: the header checks out and the payload is the one written.
                    let header = try #require(
                        {
                            if case .valid(let header) = record.bytes.withUnsafeBytes({
                                RecordHeader.decode(
                                    UnsafeRawBufferPointer(rebasing: $0[0..<32]), expectedOffset: 4_096,
                                    formatVersion: FormatConstants.formatVersion, baseOffset: 0)
                            }) { return header }
                            return nil
                        }())
                    let stored = Array(record.bytes[32...])
                    #expect(CRC32C.checksum(stored) == header.payloadCRC)
                    let read =
                        header.isCompressed
                        ? stored.withUnsafeBytes {
                            LZ4.decompress(
                                $0, decompressedByteCount: payload.count,
                                dictionary: header.flags & FormatConstants.flagDictionary != 0 ? usedDictionary : nil)
                        } : stored
                    #expect(read == payload)
                }
            }
        }
        // The worked example's payload is stored as its worked-example block.
        var example = try Self.examplePayload.withUnsafeBytes {
            try PreparedRecord(payload: $0, type: .data, compresses: true)
        }
        example.assign(offset: 0, durableEnd: 0)
        #expect(Array(example.bytes[32...]) == Self.exampleBlock)
        #expect(example.header.flags == FormatConstants.flagCompressedLZ4)
    }

    @Test("a header written in place has the writer's bytes in both format versions")
    func headerWrittenInPlaceMatchesTheWriter() {
        let header = RecordHeader(
            payloadCRC: 0xDEAD_BEEF, offset: 0x0102_0304_0506_0708, storedByteCount: 300, uncompressedByteCount: 500,
            type: .data, flags: 3, dictionaryID: 1, durableEndDelta: 77)
        let versionOne = RecordHeader(
            payloadCRC: 0xDEAD_BEEF, offset: 4_096, storedByteCount: 300, uncompressedByteCount: 500, type: .data,
            flags: 3, dictionaryID: 0x0A0B_0C0D)
        for (header, version) in [(header, FormatConstants.formatVersion), (versionOne, UInt32(1))] {
            var writer = ByteWriter()
            header.encode(into: &writer, formatVersion: version)
            var inPlace = [UInt8](repeating: 0xFF, count: 40)
            inPlace.withUnsafeMutableBytes { header.encode(to: $0, formatVersion: version) }
            #expect(writer.bytes.count == 32)
            #expect(Array(inPlace[0..<32]) == writer.bytes, "format version \(version)")
            #expect(inPlace[32...].allSatisfy { $0 == 0xFF }, "nothing written past the header")
        }
        // Version 1 keeps a u32 dictionary id at 28, and a zero u16 at 26.
        var writer = ByteWriter()
        versionOne.encode(into: &writer, formatVersion: 1)
        #expect(Array(writer.bytes[26..<32]) == [0, 0, 0x0D, 0x0C, 0x0B, 0x0A])
    }

    @Test("LZ4's array forms answer nil for 0, 1 and 2 bytes, with and without a dictionary")
    func compressionOfTinyInputsIsNil() {
        let dictionary = RecordDictionary(Array(Self.examplePayload.prefix(64)), recordByteCount: 0)
        for bytes in [[], [1], [1, 1]] as [[UInt8]] {
            #expect(bytes.withUnsafeBytes { LZ4.compressIfSmaller($0) } == nil)
            #expect(bytes.withUnsafeBytes { dictionary.compressIfSmaller($0) } == nil)
        }
    }

    @Test("a writer's reset keeps its buffer up to the bound and lets a larger one go")
    func byteWriterResetKeepsOnlyBoundedCapacity() {
        var writer = ByteWriter(capacity: 16)
        writer.write(bytes: [UInt8](repeating: 1, count: 1_000))
        let kept = writer.capacity
        writer.reset(keepingCapacityUpTo: 4_096)
        #expect(writer.count == 0)
        #expect(writer.capacity == kept)
        writer.write(bytes: [UInt8](repeating: 1, count: 10_000))
        writer.reset(keepingCapacityUpTo: 4_096)
        #expect(writer.count == 0)
        #expect(writer.capacity < 4_096)
    }
}
