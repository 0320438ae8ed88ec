/// Reads records forward from an offset up to the visible end as of its creation.
///
/// Records are checked as they are read (header CRC, own offset, payload CRC, decompression);
/// a bad record below the visible end is corruption and throws, naming file and offset.
/// Durable-end marks (the log's own bookkeeping, FORMAT.md §6.6) are skipped unless asked for.
public struct LogIterator: Sendable {
    private let segments: [SegmentFile]
    /// The visible end when the iterator was made: it stops there.
    public let endOffset: UInt64
    private var segmentIndex: Int
    private var scanner: SegmentScanner
    /// Records before this offset are skipped (the start fell inside a record).
    private let startOffset: UInt64
    private let includesMarks: Bool

    init(segments: [SegmentFile], from offset: UInt64, endOffset: UInt64, includesMarks: Bool = false)
        throws(LogError)
    {
        self.segments = segments
        self.endOffset = endOffset
        self.startOffset = offset
        self.includesMarks = includesMarks
        // Binary search: the last segment whose base offset is at or before `offset`.
        var low = 0
        var high = segments.count
        while low < high {
            let middle = (low + high) / 2
            if segments[middle].baseOffset <= offset { low = middle + 1 } else { high = middle }
        }
        segmentIndex = max(low - 1, 0)
        let segment = segments[segmentIndex]
        scanner = SegmentScanner(segment: segment, position: segment.filePosition(nearestBefore: offset))
        // An index entry is a cache: check it names a record start, else scan from the segment's start.
        if scanner.position > UInt64(FormatConstants.segmentHeaderByteCount) {
            var probe = scanner
            if case .record = try probe.next(decodesPayload: false) {
            } else {
                scanner.seek(toFilePosition: UInt64(FormatConstants.segmentHeaderByteCount))
            }
        }
    }

    /// Records read so far, including those skipped because they start before the requested
    /// offset (the seek cost: bounded by the sparse index's spacing, not by the log's length).
    public private(set) var recordsRead = 0

    /// The logical offset the next record would start at.
    public var offset: UInt64 { scanner.offset }

    /// The next record, or `nil` at the end.
    public mutating func next() throws(LogError) -> LogRecord? {
        try next { LogRecord($0) }
    }

    /// What `body` makes of the next record, read in place (its payload not copied out: the
    /// view is valid only during the call), or `nil` at the end.
    public mutating func next<Record>(inPlace body: (LogRecordView) -> Record) throws(LogError) -> Record? {
        // Bounded: each pass returns, throws, skips one record, or moves to the next segment.
        while true {
            if scanner.offset >= endOffset { return nil }
            let segment = segments[segmentIndex]
            let isLast = segmentIndex == segments.count - 1
            // A sealed segment ends exactly where the next begins (checked on open).
            if !isLast && scanner.offset == segments[segmentIndex + 1].baseOffset {
                segmentIndex += 1
                let next = segments[segmentIndex]
                scanner = SegmentScanner(segment: next)
                continue
            }
            let startOffset = startOffset
            let includesMarks = includesMarks
            let found = try scanner.next(decodesPayload: true) { view -> Record? in
                if view.offset < startOffset { return nil }
                if view.type == .durableEndMark && !includesMarks { return nil }
                return body(view)
            }
            switch found {
            case .record(let record):
                recordsRead += 1
                guard let record else { continue }
                return record
            case .end:
                throw LogError.corruption(
                    segment.path, offset: scanner.offset,
                    "no record at offset \(scanner.offset), "
                        + "below the end of the log at \(isLast ? endOffset : segments[segmentIndex + 1].baseOffset)")
            case .bad(let reason, _), .unsupported(let reason):
                throw LogError.corruption(segment.path, offset: scanner.offset, reason)
            }
        }
    }
}

extension LogCore {
    func iterator(from offset: UInt64, includesMarks: Bool = false) throws(LogError) -> LogIterator {
        let (segments, end) = conditionLock.withLock { (state.segments, visibleEndLocked) }
        let start = segments.first!.baseOffset
        guard offset >= start, offset <= end else {
            throw LogError(
                .offsetOutOfRange,
                "Offset \(offset) is outside the log, which holds offsets \(start) "
                    + "to \(end).", file: directory, offset: offset)
        }
        return try LogIterator(segments: segments, from: offset, endOffset: end, includesMarks: includesMarks)
    }

    /// A writer of a shared store: the records from `offset` to the written end (past the
    /// visible end: catch-up folds what other processes wrote before it is durable).
    func iteratorThroughWrittenEnd(from offset: UInt64) throws(LogError) -> LogIterator {
        let (segments, end) = conditionLock.withLock { (state.segments, state.writtenEnd) }
        guard offset >= segments.first!.baseOffset, offset <= end else {
            throw LogError(
                .offsetOutOfRange, "Offset \(offset) is outside the written log (to \(end)).", file: directory,
                offset: offset)
        }
        return try LogIterator(segments: segments, from: offset, endOffset: end)
    }
}
