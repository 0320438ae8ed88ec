/// Looks at the bytes after the first bad record of a segment: where the last non-zero byte is,
/// what the valid records beyond say (the proofs that the bad record had been synced), and what
/// a cut drops. Positions are file positions.
struct TailInspector {
    static let chunkByteCount = 1024 * 1024
    let handle: any FileHandle
    let path: String
    /// The segment's format version: how its record headers read.
    let formatVersion: UInt32

    init(handle: any FileHandle, path: String, formatVersion: UInt32) {
        self.handle = handle
        self.path = path
        self.formatVersion = formatVersion
    }

    init(segment: SegmentFile) {
        self.init(handle: segment.handle, path: segment.path, formatVersion: segment.formatVersion)
    }

    /// What the records that check out after a bad one prove about it.
    struct Evidence {
        /// The highest durable end a record after the bad one states (format version 2), and that
        /// record's offset.
        var highestStatement: (durableEnd: UInt64, recordOffset: UInt64)?
        /// The record after the bad one that ends farthest, its offset and end file position.
        var farthestRecord: (offset: UInt64, endPosition: UInt64)?
    }

    /// The position of the last non-zero byte at or after `from`, or `nil` when only zeros follow.
    /// Reads backward in bounded chunks from the end of the file.
    func lastNonZeroPosition(from: UInt64) throws(LogError) -> UInt64? {
        let size: UInt64
        do { size = try handle.size() } catch { throw LogError.io(error, "Reading the size of \(path)") }
        var chunkEnd = size
        // No bigger than what is there to read: a small segment costs no 1 MiB buffer.
        var buffer = [UInt8](repeating: 0, count: size > from ? Int(min(UInt64(Self.chunkByteCount), size - from)) : 0)
        while chunkEnd > from {
            let chunkStart = max(
                from, chunkEnd > UInt64(Self.chunkByteCount) ? chunkEnd - UInt64(Self.chunkByteCount) : 0)
            let count = Int(chunkEnd - chunkStart)
            let got = try read(into: &buffer, count: count, at: chunkStart)
            if let last = buffer[0..<got].lastIndex(where: { $0 != 0 }) {
                return chunkStart + UInt64(last)
            }
            chunkEnd = chunkStart
        }
        return nil
    }

    /// Every record that starts in `(from, through]` and checks out completely (header and payload
    /// CRC, valid for its position): the highest durable end they state and the one that ends
    /// farthest. Looks at every byte position, so a record is found whatever precedes it.
    func evidence(after from: UInt64, through: UInt64, baseOffset: UInt64) throws(LogError) -> Evidence {
        var evidence = Evidence()
        try forEachValidRecord(after: from, through: through, baseOffset: baseOffset) { position, record in
            let endPosition = position + record.recordByteCount
            if endPosition > evidence.farthestRecord?.endPosition ?? 0 {
                evidence.farthestRecord = (record.offset, endPosition)
            }
            if let stated = record.statedDurableEnd, stated > evidence.highestStatement?.durableEnd ?? 0 {
                evidence.highestStatement = (stated, record.offset)
            }
            return true
        }
        return evidence
    }

    /// Calls `body` with every record that starts in `(from, through]` and checks out, in file
    /// order, until it returns false.
    private func forEachValidRecord(
        after from: UInt64, through: UInt64, baseOffset: UInt64, _ body: (UInt64, LogRecord) -> Bool
    ) throws(LogError) {
        let headerByteCount = UInt64(FormatConstants.recordHeaderByteCount)
        guard through > from else { return }
        // No bigger than the range (plus one header): a short range costs no 1 MiB buffer.
        var buffer = [UInt8](
            repeating: 0, count: Int(min(UInt64(Self.chunkByteCount), through - from)) + Int(headerByteCount))
        var chunkStart = from + 1
        while chunkStart <= through {
            let count = Int(min(UInt64(Self.chunkByteCount), through + 1 - chunkStart)) + Int(headerByteCount)
            let got = try read(into: &buffer, count: count, at: chunkStart)
            var index = 0
            // Every record carries its own offset at header byte 8: a cheap filter before CRCs.
            while index + Int(headerByteCount) <= got && chunkStart + UInt64(index) <= through {
                let position = chunkStart + UInt64(index)
                let expected = SegmentScanner.logicalOffset(filePosition: position, baseOffset: baseOffset)
                let claimed = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: index + 8, as: UInt64.self) }
                if UInt64(littleEndian: claimed) == expected {
                    var scanner = SegmentScanner(
                        handle: handle, baseOffset: baseOffset, formatVersion: formatVersion, position: position)
                    if case .record(let record) = try scanner.next(decodesPayload: false),
                        !body(position, record)
                    {
                        return
                    }
                }
                index += 1
            }
            chunkStart += UInt64(Self.chunkByteCount)
        }
    }

    /// The records (or unreadable byte runs) in `[from, through]`, for the recovery report.
    func describeDropped(from: UInt64, through: UInt64, baseOffset: UInt64, firstReason: String) throws(LogError)
        -> [RecoveryReport.DroppedRecord]
    {
        var dropped: [RecoveryReport.DroppedRecord] = []
        var position = from
        var reason = firstReason
        // Bounded: each step moves past at least one header, and the loop stops at `through`.
        while position <= through {
            var header = [UInt8](repeating: 0, count: FormatConstants.recordHeaderByteCount)
            let got = try read(into: &header, count: header.count, at: position)
            let offset = SegmentScanner.logicalOffset(filePosition: position, baseOffset: baseOffset)
            let decoded: RecordHeader.Decoded =
                got == header.count
                ? header.withUnsafeBytes {
                    RecordHeader.decode(
                        $0, expectedOffset: offset, formatVersion: formatVersion, baseOffset: baseOffset)
                } : .invalid("short header")
            if case .valid(let recordHeader) = decoded, position + recordHeader.recordByteCount <= through + 1 {
                dropped.append(
                    .init(offset: offset, byteCount: recordHeader.recordByteCount, reason: reason, file: path))
                position += recordHeader.recordByteCount
                reason = "follows a dropped record"
            } else if let next = try nextValidRecordPosition(after: position, through: through, baseOffset: baseOffset) {
                // An unreadable run, then records that check out again: list each of them too.
                dropped.append(.init(offset: offset, byteCount: next - position, reason: reason, file: path))
                position = next
                reason = "follows a dropped record"
            } else {
                dropped.append(.init(offset: offset, byteCount: through + 1 - position, reason: reason, file: path))
                break
            }
        }
        return dropped
    }

    /// The first file position in `(after, through]` where a record starts that checks out
    /// (header valid for its position, payload CRC); `nil` when there is none.
    func nextValidRecordPosition(after: UInt64, through: UInt64, baseOffset: UInt64) throws(LogError) -> UInt64? {
        var found: UInt64?
        try forEachValidRecord(after: after, through: through, baseOffset: baseOffset) { position, _ in
            found = position
            return false
        }
        return found
    }

    private func read(into buffer: inout [UInt8], count: Int, at position: UInt64) throws(LogError) -> Int {
        do {
            return try handle.read(into: &buffer, range: 0..<count, at: position)
        } catch {
            throw LogError.io(error, "Reading \(path)")
        }
    }
}
