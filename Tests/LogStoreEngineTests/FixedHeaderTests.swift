import Foundation
import Testing

@testable import LogStoreEngine

/// Segment headers, `store.meta` and checkpoint file headers are one 64-byte layout, encoded and
/// checked by one codec; the bytes are those docs/FORMAT.md §5 describes.
@Suite struct FixedHeaderTests {
    static let storeID = UUID(uuidString: "00112233-4455-6677-8899-AABBCCDDEEFF")!

    /// The layout written out by hand: magic, u32 version, u32 64, UUID, u64 value, 20 zeros, CRC.
    static func expected(magic: String, value: UInt64) -> [UInt8] {
        var bytes = Array(magic.utf8)
        bytes += withUnsafeBytes(of: FormatConstants.formatVersion.littleEndian) { Array($0) }
        bytes += withUnsafeBytes(of: UInt32(64).littleEndian) { Array($0) }
        bytes += [0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0xFF]
        bytes += withUnsafeBytes(of: value.littleEndian) { Array($0) }
        bytes += [UInt8](repeating: 0, count: 20)
        bytes += withUnsafeBytes(of: CRC32C.checksum(bytes).littleEndian) { Array($0) }
        return bytes
    }

    @Test func theThreeHeadersEncodeTheDocumentedBytes() {
        #expect(
            SegmentHeader(storeID: Self.storeID, baseOffset: 4096).encoded()
                == Self.expected(magic: "LOGSTSEG", value: 4096))
        #expect(
            StoreMeta(storeID: Self.storeID, creationTimeMicroseconds: 1_750_000_000_000_000).encoded()
                == Self.expected(magic: "LOGSTMET", value: 1_750_000_000_000_000))
        #expect(
            RecordFileHeader(magic: FormatConstants.checkpointMagic, storeID: Self.storeID, value: 77).encoded()
                == Self.expected(magic: "LOGSTCKP", value: 77))
    }

    @Test func aNegativeCreationTimeRoundTrips() throws {
        let meta = StoreMeta(storeID: Self.storeID, creationTimeMicroseconds: -5)
        #expect(try StoreMeta.decode(meta.encoded()).get() == meta)
    }

    @Test func everyFlippedBitIsRefusedWithTheKindsName() {
        let bytes = SegmentHeader(storeID: Self.storeID, baseOffset: 4096).encoded()
        for bit in 0..<(64 * 8) {
            var damaged = bytes
            damaged[bit / 8] ^= UInt8(1 << (bit % 8))
            switch SegmentHeader.decode(damaged) {
            case .success: Issue.record("bit \(bit) flipped was accepted")
            case .failure(.damaged(let reason)):
                #expect(reason.contains("segment"), "bit \(bit): \(reason)")
            case .failure(.newerVersion(let version)):
                Issue.record("bit \(bit): read as version \(version) although the CRC cannot match")
            }
        }
    }

    @Test func aValidNewerHeaderIsNamedAsNewer() {
        var header = FixedHeader(magic: FormatConstants.checkpointMagic, storeID: Self.storeID, value: 1)
        header.formatVersion = FormatConstants.formatVersion + 1
        let kind = FixedHeader.Kind(
            name: "file header", missingMagic: "no magic", sizeFieldName: "size",
            shortName: "file header")
        #expect(
            FixedHeader.decode(header.encoded(), magic: FormatConstants.checkpointMagic, kind: kind)
                == .failure(.newerVersion(FormatConstants.formatVersion + 1)))
    }
}
