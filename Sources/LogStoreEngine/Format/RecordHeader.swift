/// The 32-byte header in front of every record's payload (see `docs/FORMAT.md`, "Record").
///
/// ```
/// 0  u32 headerCRC        CRC32C of bytes 4..<32
/// 4  u32 payloadCRC       CRC32C of the stored payload bytes
/// 8  u64 offset           the record's own logical offset
/// 16 u32 storedByteCount  payload bytes that follow the header
/// 20 u32 uncompressedByteCount
/// 24 u8  type             0 is never a record
/// 25 u8  flags            bit 0: LZ4 block; bit 1: with the segment's dictionary (§6.8)
/// 26 u16 dictionaryID     zero unless flag bit 1
/// 28 u32 durableEndDelta  offset − D, D the durable end the writer knew (format version 2)
/// ```
///
/// Format version 1 had a reserved `u16` (zero) at 26 and a `u32` dictionary id at 28, and no
/// durable-end statement; ``decode(_:expectedOffset:formatVersion:baseOffset:)`` reads either,
/// as the file's header says.
public struct RecordHeader: Sendable, Equatable {
    public var payloadCRC: UInt32
    public var offset: UInt64
    public var storedByteCount: UInt32
    public var uncompressedByteCount: UInt32
    public var type: RecordType
    public var flags: UInt8
    public var dictionaryID: UInt32
    /// `offset − D` (format version 2), D being the log's durable end its writer knew when it
    /// wrote the record. Zero in version 1 and in checkpoint files.
    public var durableEndDelta: UInt32

    public init(
        payloadCRC: UInt32, offset: UInt64, storedByteCount: UInt32, uncompressedByteCount: UInt32,
        type: RecordType, flags: UInt8, dictionaryID: UInt32 = 0, durableEndDelta: UInt32 = 0
    ) {
        self.payloadCRC = payloadCRC
        self.offset = offset
        self.storedByteCount = storedByteCount
        self.uncompressedByteCount = uncompressedByteCount
        self.type = type
        self.flags = flags
        self.dictionaryID = dictionaryID
        self.durableEndDelta = durableEndDelta
    }

    /// D, the durable end this record states (format version 2): every byte of the log before it
    /// had been covered by a completed `fdatasync` when the record was written.
    public var statedDurableEnd: UInt64 { offset - UInt64(durableEndDelta) }

    public var isCompressed: Bool { flags & FormatConstants.flagCompressedLZ4 != 0 }

    /// Header plus stored payload: how far the next record starts after this one.
    public var recordByteCount: UInt64 { UInt64(FormatConstants.recordHeaderByteCount) + UInt64(storedByteCount) }

    /// The logical offset just past this record.
    public var endOffset: UInt64 { offset + recordByteCount }

    /// Appends the 32 header bytes, header CRC included, to `writer`, in the layout of
    /// `formatVersion` (the current one unless a test builds an older file).
    public func encode(into writer: inout ByteWriter, formatVersion: UInt32 = FormatConstants.formatVersion) {
        var bytes = (UInt64(0), UInt64(0), UInt64(0), UInt64(0))
        withUnsafeMutableBytes(of: &bytes) { encode(to: $0, formatVersion: formatVersion) }
        withUnsafeBytes(of: &bytes) { writer.write(bytes: $0) }
    }

    /// Writes the 32 header bytes, header CRC included, over the first 32 bytes of `target` (a
    /// record's own buffer: no array made per record), in the layout of `formatVersion`.
    public func encode(to target: UnsafeMutableRawBufferPointer, formatVersion: UInt32 = FormatConstants.formatVersion) {
        precondition(target.count >= FormatConstants.recordHeaderByteCount, "a record header takes 32 bytes")
        func put<T: FixedWidthInteger>(_ value: T, at offset: Int) {
            target.storeBytes(of: value.littleEndian, toByteOffset: offset, as: T.self)
        }
        put(payloadCRC, at: 4)
        put(offset, at: 8)
        put(storedByteCount, at: 16)
        put(uncompressedByteCount, at: 20)
        put(type.rawValue, at: 24)
        put(flags, at: 25)
        if formatVersion >= FormatConstants.durableEndStatementVersion {
            precondition(dictionaryID <= UInt32(UInt16.max), "a dictionary id takes 16 bits in version 2")
            precondition(UInt64(durableEndDelta) <= offset, "a durable end before the start of the log")
            put(UInt16(dictionaryID), at: 26)
            put(durableEndDelta, at: 28)
        } else {
            precondition(durableEndDelta == 0, "version 1 states no durable end")
            put(UInt16(0), at: 26)
            put(dictionaryID, at: 28)
        }
        put(CRC32C.checksum(UnsafeRawBufferPointer(rebasing: target[4..<32])), at: 0)
    }

    /// What 32 bytes at a record position hold.
    public enum Decoded: Sendable, Equatable {
        /// All zeros: the end of the log in this segment.
        case zeros
        /// A header whose checksum and fields are consistent.
        case valid(RecordHeader)
        /// Damaged or not a header at all (checksum mismatch, impossible lengths, wrong offset).
        case invalid(String)
        /// A checksummed header this version refuses (unknown type or flags): a newer writer.
        case unsupported(String)
    }

    /// Decodes and checks the header in `bytes` (exactly 32 bytes) of a record that must start at
    /// logical offset `expectedOffset`, in a file of `formatVersion` whose records start at
    /// `baseOffset` (a segment's base offset; 0 in checkpoint files). Lengths are checked against
    /// ``FormatConstants/recordByteCountMax`` here, before anyone allocates a payload buffer.
    public static func decode(
        _ bytes: UnsafeRawBufferPointer, expectedOffset: UInt64,
        formatVersion: UInt32 = FormatConstants.formatVersion, baseOffset: UInt64 = 0
    ) -> Decoded {
        precondition(formatVersion >= 1 && formatVersion <= FormatConstants.formatVersion)
        precondition(bytes.count == FormatConstants.recordHeaderByteCount)
        if bytes.allSatisfy({ $0 == 0 }) { return .zeros }
        // Fixed positions in exactly 32 bytes (checked above): nothing here can run short.
        func field<T: FixedWidthInteger>(_ type: T.Type, at position: Int) -> T {
            T(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: T.self))
        }
        let storedHeaderCRC = field(UInt32.self, at: 0)
        let computed = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[4..<32]))
        guard storedHeaderCRC == computed else {
            return .invalid("header checksum mismatch (stored \(hex(storedHeaderCRC)), computed \(hex(computed)))")
        }
        let statesDurableEnd = formatVersion >= FormatConstants.durableEndStatementVersion
        let header = RecordHeader(
            payloadCRC: field(UInt32.self, at: 4), offset: field(UInt64.self, at: 8),
            storedByteCount: field(UInt32.self, at: 16), uncompressedByteCount: field(UInt32.self, at: 20),
            type: RecordType(rawValue: bytes[24]), flags: bytes[25],
            dictionaryID: statesDurableEnd ? UInt32(field(UInt16.self, at: 26)) : field(UInt32.self, at: 28),
            durableEndDelta: statesDurableEnd ? field(UInt32.self, at: 28) : 0)
        let reserved = statesDurableEnd ? 0 : field(UInt16.self, at: 26)
        guard header.offset == expectedOffset else {
            return .invalid("record claims offset \(header.offset), expected \(expectedOffset)")
        }
        // The stated durable end lies in [base, offset]: a roll makes the old segment durable before
        // the new one takes a record.
        guard expectedOffset >= baseOffset, UInt64(header.durableEndDelta) <= expectedOffset - baseOffset else {
            return .invalid(
                "record states durable end \(Int64(bitPattern: expectedOffset &- UInt64(header.durableEndDelta))), "
                    + "before its segment's base offset \(baseOffset)")
        }
        let maximum = UInt32(FormatConstants.recordByteCountMax)
        guard header.storedByteCount <= maximum, header.uncompressedByteCount <= maximum else {
            return .invalid(
                "record length \(header.storedByteCount) stored / \(header.uncompressedByteCount) "
                    + "uncompressed exceeds the \(maximum)-byte maximum")
        }
        guard header.type.rawValue != 0 else { return .invalid("record type 0") }
        guard header.flags & ~FormatConstants.knownFlags == 0, reserved == 0 else {
            return .unsupported(
                "record flags 0x\(String(header.flags, radix: 16)) or reserved bits are "
                    + "not understood by format version \(FormatConstants.formatVersion)")
        }
        if header.flags & FormatConstants.flagDictionary == 0 && header.dictionaryID != 0 {
            return .unsupported(
                "record carries dictionary id \(header.dictionaryID) without the dictionary flag; "
                    + "format version \(FormatConstants.formatVersion) writes zero there")
        }
        if header.flags & FormatConstants.flagDictionary != 0 {
            // Version 3 (FORMAT.md §6.8): LZ4 against the segment's dictionary, in version-3
            // files only. Other ids or bit 1 without bit 0 are left for later versions.
            guard formatVersion >= FormatConstants.dictionaryVersion, header.isCompressed, header.dictionaryID == FormatConstants.segmentDictionaryID,
                header.type != .dictionary
            else {
                return .unsupported(
                    "record compressed with dictionary \(header.dictionaryID) (flags 0x\(String(header.flags, radix: 16))); "
                        + "this version reads only dictionary \(FormatConstants.segmentDictionaryID) with LZ4 "
                        + "in a segment of version \(FormatConstants.dictionaryVersion) or later")
            }
        }
        if !header.isCompressed && header.storedByteCount != header.uncompressedByteCount {
            return .invalid(
                "uncompressed record with stored length \(header.storedByteCount) "
                    + "!= length \(header.uncompressedByteCount)")
        }
        if header.isCompressed && (header.storedByteCount == 0 || header.uncompressedByteCount == 0) {
            return .invalid("compressed record with an empty payload")
        }
        if !header.type.isKnown && !header.type.isSkippable {
            return .unsupported(
                "unknown record type \(header.type.rawValue) (not skippable); "
                    + "written by a newer version?")
        }
        return .valid(header)
    }
}

func hex(_ value: UInt32) -> String {
    let digits = String(value, radix: 16, uppercase: true)
    return "0x" + String(repeating: "0", count: max(0, 8 - digits.count)) + digits
}
