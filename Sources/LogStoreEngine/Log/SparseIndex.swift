import Foundation

/// Record starts of one segment, one entry per ``FormatConstants/indexIntervalByteCount`` bytes:
/// the first record starting at or after each multiple, relative to the segment's base offset.
///
/// A cache, never trusted blindly: every entry is checked when used (the record there must carry
/// exactly that offset under a valid header CRC), and the file form carries its own CRC.
struct SparseIndex: Sendable, Equatable {
    /// Offsets relative to the segment's base offset, ascending.
    private(set) var entries: [UInt32] = []
    /// Relative offset of the last record noted, and the relative end of the records.
    private(set) var lastRecordOffset: UInt64?
    private(set) var endOffset: UInt64 = 0

    /// Notes a record; keeps it when it is the first at or past the next interval boundary.
    mutating func note(relativeOffset: UInt64, recordByteCount: UInt64) {
        precondition(relativeOffset >= endOffset, "records are noted in order")
        let interval = FormatConstants.indexIntervalByteCount
        if entries.isEmpty || relativeOffset / interval > UInt64(entries.last!) / interval {
            entries.append(UInt32(relativeOffset))
        }
        lastRecordOffset = relativeOffset
        endOffset = relativeOffset + recordByteCount
    }

    /// The greatest entry at or before `relativeOffset` (0 when none).
    func entry(atOrBefore relativeOffset: UInt64) -> UInt64 {
        var low = 0
        var high = entries.count
        while low < high {
            let middle = (low + high) / 2
            if UInt64(entries[middle]) <= relativeOffset { low = middle + 1 } else { high = middle }
        }
        return low == 0 ? 0 : UInt64(entries[low - 1])
    }

    // MARK: File form

    /// ```
    /// 0  [8]  magic "LOGSTIDX"
    /// 8  u32  formatVersion
    /// 12 u32  entryCount
    /// 16 [16] store UUID
    /// 32 u64  baseOffset
    /// 40 u64  endOffset (relative)
    /// 48 u64  lastRecordOffset (relative; all ones when the segment is empty)
    /// 56 u32 × entryCount
    /// .. u32  CRC32C of everything before
    /// ```
    func encoded(storeID: UUID, baseOffset: UInt64) -> [UInt8] {
        var writer = ByteWriter(capacity: FormatConstants.indexHeaderByteCount + entries.count * 4 + 4)
        writer.write(bytes: FormatConstants.indexMagic)
        writer.write(FormatConstants.indexFormatVersion)
        writer.write(UInt32(entries.count))
        writer.write(bytes: storeID.bytes)
        writer.write(baseOffset)
        writer.write(endOffset)
        writer.write(lastRecordOffset ?? UInt64.max)
        for entry in entries { writer.write(entry) }
        writer.write(CRC32C.checksum(writer.bytes))
        return writer.bytes
    }

    /// Decodes an index file; `nil` when it is not a consistent index of this segment.
    static func decode(_ bytes: [UInt8], storeID: UUID, baseOffset: UInt64) -> SparseIndex? {
        let headerByteCount = FormatConstants.indexHeaderByteCount
        guard bytes.count >= headerByteCount + 4, Array(bytes[0..<8]) == FormatConstants.indexMagic else { return nil }
        return bytes.withUnsafeBytes { buffer -> SparseIndex? in
            let crcPosition = bytes.count - 4
            let storedCRC = UInt32(littleEndian: buffer.loadUnaligned(fromByteOffset: crcPosition, as: UInt32.self))
            guard CRC32C.checksum(UnsafeRawBufferPointer(rebasing: buffer[0..<crcPosition])) == storedCRC else {
                return nil
            }
            var reader = ByteReader(UnsafeRawBufferPointer(rebasing: buffer[0..<crcPosition]), position: 8)
            guard let version: UInt32 = try? reader.read(), version == FormatConstants.indexFormatVersion,
                let count: UInt32 = try? reader.read(),
                let id = try? reader.readBytes(16), UUID(bytes: id) == storeID,
                let base: UInt64 = try? reader.read(), base == baseOffset,
                let end: UInt64 = try? reader.read(),
                let last: UInt64 = try? reader.read(),
                reader.remainingByteCount == Int(count) * 4
            else { return nil }
            var index = SparseIndex()
            index.entries.reserveCapacity(Int(count))
            for _ in 0..<count {
                guard let entry: UInt32 = try? reader.read() else { return nil }
                guard index.entries.last.map({ $0 < entry }) ?? true, UInt64(entry) < end else { return nil }
                index.entries.append(entry)
            }
            index.endOffset = end
            index.lastRecordOffset = last == UInt64.max ? nil : last
            if let lastRecord = index.lastRecordOffset, lastRecord >= end { return nil }
            return index
        }
    }
}
