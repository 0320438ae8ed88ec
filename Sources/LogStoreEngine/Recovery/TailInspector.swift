/// Looks at the bytes after the first bad record of a segment: where the last non-zero byte is,
/// whether a valid record lies beyond (the proof that the bad record had been synced), and what
/// a cut drops. Positions are file positions.
struct TailInspector {
    static let chunkByteCount = 1024 * 1024
    let handle: any FileHandle
    let path: String

    /// The position of the last non-zero byte at or after `from`, or `nil` when only zeros follow.
    /// Reads backward in bounded chunks from the end of the file.
    func lastNonZeroPosition(from: UInt64) throws(LogError) -> UInt64? {
        let size: UInt64
        do { size = try handle.size() } catch { throw LogError.io(error, "Reading the size of \(path)") }
        var chunkEnd = size
        var buffer = [UInt8](repeating: 0, count: Self.chunkByteCount)
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

    /// The logical offset of a record that starts in `(from, through]`, checks out completely, and
    /// ends past file position `limit`; `nil` when there is none.
    func validRecord(endingBeyond limit: UInt64, from: UInt64, through: UInt64, baseOffset: UInt64) throws(LogError)
        -> UInt64?
    {
        let headerByteCount = UInt64(FormatConstants.recordHeaderByteCount)
        // A record starting at q ends at most q + header + 16 MiB; skip the search when that cannot pass `limit`.
        guard through + headerByteCount + UInt64(FormatConstants.recordByteCountMax) > limit else { return nil }
        var buffer = [UInt8](repeating: 0, count: Self.chunkByteCount + Int(headerByteCount))
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
                    var scanner = SegmentScanner(handle: handle, baseOffset: baseOffset, position: position)
                    if case .record(let record) = try scanner.next(decodesPayload: false),
                        position + record.recordByteCount > limit
                    {
                        return record.offset
                    }
                }
                index += 1
            }
            chunkStart += UInt64(Self.chunkByteCount)
        }
        return nil
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
                ? header.withUnsafeBytes { RecordHeader.decode($0, expectedOffset: offset) } : .invalid("short header")
            if case .valid(let recordHeader) = decoded, position + recordHeader.recordByteCount <= through + 1 {
                dropped.append(
                    .init(offset: offset, byteCount: recordHeader.recordByteCount, reason: reason, file: path))
                position += recordHeader.recordByteCount
                reason = "follows a dropped record"
            } else {
                dropped.append(.init(offset: offset, byteCount: through + 1 - position, reason: reason, file: path))
                break
            }
        }
        return dropped
    }

    private func read(into buffer: inout [UInt8], count: Int, at position: UInt64) throws(LogError) -> Int {
        do {
            return try handle.read(into: &buffer, range: 0..<count, at: position)
        } catch {
            throw LogError.io(error, "Reading \(path)")
        }
    }
}
