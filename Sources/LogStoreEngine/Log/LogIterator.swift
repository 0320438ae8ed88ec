/// Reads records forward from an offset up to the visible end as of its creation.
///
/// Records are checked as they are read (header CRC, own offset, payload CRC, decompression);
/// a bad record below the visible end is corruption and throws, naming file and offset. The
/// records between the sparse index entry a start is found from and the start are passed over by
/// their headers alone (each header checked, the payloads not read: damage there is `verify`'s to
/// find, not a reader's that does not use them).
/// Durable-end marks and segment dictionaries (the log's own bookkeeping, FORMAT.md §6.6 and
/// §6.8) are skipped unless asked for.
public struct LogIterator: Sendable {
    private let segments: [SegmentFile]
    /// The visible end when the iterator was made: it stops there.
    public let endOffset: UInt64
    private var segmentIndex: Int
    private var scanner: SegmentScanner
    /// Records before this offset are skipped (the start fell inside a record).
    private let startOffset: UInt64
    private let includesMarks: Bool

    /// `firstReadByteCount`: the first chunk read (doubling after), smaller for a reader that
    /// expects a few records (a catch-up of what other processes wrote since its last turn).
    init(
        segments: [SegmentFile], from offset: UInt64, endOffset: UInt64, includesMarks: Bool = false,
        firstReadByteCount: Int = 16 * 1024
    ) throws(LogError) {
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
        let recordsStart = UInt64(FormatConstants.segmentHeaderByteCount)
        scanner = SegmentScanner(
            segment: segment, position: segment.filePosition(nearestBefore: offset), firstReadByteCount: firstReadByteCount)
        // An index entry is a cache: check it names a record start, else scan from the segment's start.
        if scanner.position > recordsStart, !(try Self.probe(&scanner)) {
            scanner.seek(toFilePosition: recordsStart)
        }
        // From there to the first record at or after `offset` by headers alone (the records
        // before it were read whole, checked and decompressed, then skipped: up to 4 KiB of
        // records, most of a catch-up of one or two). Each start is reached from a known one, so
        // bytes inside a payload are never taken for a record, whatever they hold.
        if offset <= endOffset { try scanner.hopHeaders(before: offset) }
    }

    /// Whether a record starts where `scanner` is; if so, the scanner stays there with the bytes
    /// the probe read (a probe on a copy read the same chunk again for the scan).
    private static func probe(_ scanner: inout SegmentScanner) throws(LogError) -> Bool {
        let position = scanner.position
        var probe = scanner
        guard case .record = try probe.next(decodesPayload: false) else { return false }
        probe.seek(toFilePosition: position)
        scanner = probe
        return true
    }

    /// Records read so far: handed out, or read and passed over (marks and dictionaries unless
    /// asked for). The records between the index entry the start was found from and the start,
    /// passed over by their headers alone, are not counted.
    public private(set) var recordsRead = 0

    /// The logical offset the next record would start at.
    public var offset: UInt64 { scanner.offset }

    /// The next record, or `nil` at the end.
    public mutating func next() throws(LogError) -> LogRecord? {
        while atRecord() {
            let found = try scanner.next(decodesPayload: true)
            guard case .record(let record) = found else { throw failure(found) }
            recordsRead += 1
            if Self.wanted(record.offset, record.type, from: startOffset, includesMarks: includesMarks) {
                return record
            }
        }
        return nil
    }

    /// Hands the next record to `body` read in place (its payload not copied out: the view is
    /// valid only during the call); `false` at the end. Not generic: a generic method called from
    /// another module runs unspecialised (metadata looked up per record), which made a history
    /// fetch 1.7 times slower in a first version.
    package mutating func next(inPlace body: (LogRecordView) -> Void) throws(LogError) -> Bool {
        let startOffset = startOffset
        let includesMarks = includesMarks
        while atRecord() {
            let found = try scanner.next(decodesPayload: true) { view -> Bool in
                guard Self.wanted(view.offset, view.type, from: startOffset, includesMarks: includesMarks) else {
                    return false
                }
                body(view)
                return true
            }
            guard case .record(let handed) = found else { throw failure(found) }
            recordsRead += 1
            if handed { return true }
        }
        return false
    }

    /// The next record that `accepts` takes, copied out; the others are read past in place, never
    /// copied (a history author filter passes over nine records in ten: each was decompressed
    /// and copied into an array first, a fifth of the fetch once records compressed against
    /// their segment's dictionary). `nil` at the end. The view is valid only during the call.
    package mutating func next(where accepts: (LogRecordView) -> Bool) throws(LogError) -> LogRecord? {
        var found: LogRecord?
        while found == nil, try next(inPlace: { view in if accepts(view) { found = LogRecord(view) } }) {}
        return found
    }

    /// Moves forward to `offset` without reading the records before it: for a caller that knows
    /// `offset` is a record start because this log handed it that record before (an index of its
    /// own, such as the history's author index). The record there is checked when it is read, as
    /// every record is — a header that does not name `offset` is corruption, so an offset inside
    /// a record throws rather than reads garbage — but a mark or dictionary there is passed over
    /// like any other: the caller compares the offset of the record it is handed with `offset`.
    /// Going back is a programming error (the caller checks first). `offset` at or past the end
    /// leaves nothing to read.
    package mutating func skip(to offset: UInt64) {
        precondition(offset >= scanner.offset, "skip(to: \(offset)) goes back from \(scanner.offset)")
        if offset == scanner.offset { return }
        guard offset < endOffset else {
            // Nothing is read past the end: park the scanner there (atRecord stops).
            segmentIndex = segments.count - 1
            let last = segments[segmentIndex]
            scanner = SegmentScanner(
                segment: last,
                position: SegmentScanner.filePosition(logicalOffset: max(endOffset, last.baseOffset), baseOffset: last.baseOffset))
            return
        }
        var index = segmentIndex
        while index + 1 < segments.count && segments[index + 1].baseOffset <= offset { index += 1 }
        let position = SegmentScanner.filePosition(logicalOffset: offset, baseOffset: segments[index].baseOffset)
        if index == segmentIndex {
            // The scanner keeps its buffer: a skip within it reads nothing.
            scanner.seek(toFilePosition: position)
        } else {
            segmentIndex = index
            scanner = SegmentScanner(segment: segments[index], position: position)
        }
    }

    /// Whether the scanner is at a record below the end, moving it to the next segment at the
    /// end of a sealed one (a sealed segment ends exactly where the next begins: checked on open).
    private mutating func atRecord() -> Bool {
        while scanner.offset < endOffset {
            guard segmentIndex < segments.count - 1, scanner.offset == segments[segmentIndex + 1].baseOffset else {
                return true
            }
            segmentIndex += 1
            scanner = SegmentScanner(segment: segments[segmentIndex])
        }
        return false
    }

    /// Records before the start (it fell inside a record), and the log's own bookkeeping —
    /// durable-end marks and segment dictionaries — unless asked for, are read past.
    private static func wanted(_ offset: UInt64, _ type: RecordType, from start: UInt64, includesMarks: Bool) -> Bool {
        offset >= start && (includesMarks || (type != .durableEndMark && type != .dictionary))
    }

    /// Below the end, anything but a record is corruption.
    private func failure<Record>(_ found: SegmentScanner.Found<Record>) -> LogError {
        let segment = segments[segmentIndex]
        switch found {
        case .record: preconditionFailure("a record is not a failure")
        case .end:
            let isLast = segmentIndex == segments.count - 1
            return LogError.corruption(
                segment.path, offset: scanner.offset,
                "no record at offset \(scanner.offset), "
                    + "below the end of the log at \(isLast ? endOffset : segments[segmentIndex + 1].baseOffset)")
        case .bad(let reason, _), .unsupported(let reason):
            return LogError.corruption(segment.path, offset: scanner.offset, reason)
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
        return try LogIterator(segments: segments, from: offset, endOffset: end, firstReadByteCount: 4096)
    }
}
