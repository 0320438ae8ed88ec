import Foundation

/// Opens the segments of a store and recovers the log as DECISIONS.md D3 says.
///
/// - Sealed segments (all but the last): the header must be valid and the records must end
///   exactly where the next segment begins. Checked through the segment's index file when it is
///   valid (its last record must check out and end there), else by reading the whole segment.
/// - The last segment is read to its first bad record p. Bytes from p on are a torn tail, unless
///   something proves p had been synced, which makes it corruption (the open refuses and changes
///   nothing): a valid record after p stating a durable end beyond p (format version 2, D12), a
///   checkpoint beyond p, or a valid record ending more than
///   ``FormatConstants/unsyncedByteCountMax`` past p. Only once it is decided that the bytes from p
///   on are a torn tail are they zero-filled.
/// - With ``LogOptions/repairs``, every segment is read and the log is cut at the first bad record.
struct Recovery {
    let directory: String
    let meta: StoreMeta
    let options: LogOptions
    /// False for a read-only open: nothing on disk changes and a bad tail is simply the end.
    let writable: Bool
    /// The offsets of the checkpoint files in the directory (their names): a checkpoint at X was
    /// written after an `fdatasync` through X, so X is a durable end the store states.
    let checkpointOffsets: [UInt64]
    /// A read-only open: the visible end the last writer published before the directory was
    /// listed (FORMAT.md §10.1). Every record before it is in the files, so a second look with a
    /// fresh buffer goes on until the scan reaches it.
    var publishedEnd: UInt64? = nil
    var report: RecoveryReport

    struct Result {
        var segments: [SegmentFile]
        var end: UInt64
        var report: RecoveryReport
        var indexesToWrite: [SegmentFile]
        /// The type of the last segment's last record; `nil` when it has none or repair ran.
        var lastRecordType: RecordType? = nil
    }

    /// The type of the last record read from the last segment.
    private(set) var lastRecordType: RecordType?

    private var fileSystem: any FileSystem { options.fileSystem }

    init(
        directory: String, meta: StoreMeta, options: LogOptions, writable: Bool, checkpointOffsets: [UInt64] = [],
        report: RecoveryReport
    ) {
        self.directory = directory
        self.meta = meta
        self.options = options
        self.writable = writable
        self.checkpointOffsets = checkpointOffsets
        self.report = report
    }

    consuming func run(segmentOffsets: [UInt64]) throws(LogError) -> Result {
        precondition(!segmentOffsets.isEmpty)
        if options.repairs && writable { return try repair(segmentOffsets: segmentOffsets) }
        var segments: [SegmentFile] = []
        var indexesToWrite: [SegmentFile] = []
        for (position, baseOffset) in segmentOffsets.enumerated() {
            let isLast = position == segmentOffsets.count - 1
            let segment = try openSegment(baseOffset: baseOffset, writable: writable)
            if !isLast {
                let nextBase = segmentOffsets[position + 1]
                if try !loadIndex(of: segment, expectedEnd: nextBase) {
                    try scanSealed(segment, expectedEnd: nextBase)
                    report.rebuiltIndexes.append(LogFileNames.index(baseOffset))
                    indexesToWrite.append(segment)
                }
            }
            segments.append(segment)
        }
        let end = try recoverLastSegment(segments.last!)
        return Result(
            segments: segments, end: end, report: report, indexesToWrite: writable ? indexesToWrite : [],
            lastRecordType: lastRecordType)
    }

    // MARK: Segments

    func openSegment(baseOffset: UInt64, writable: Bool) throws(LogError) -> SegmentFile {
        let path = LogFileNames.join(directory, LogFileNames.segment(baseOffset))
        let handle: any FileHandle
        do { handle = try fileSystem.openFile(path, mode: writable ? .readWrite : .readOnly) } catch {
            throw LogError.io(error, "Opening segment \(path)")
        }
        var bytes = [UInt8](repeating: 0, count: FormatConstants.segmentHeaderByteCount)
        let count: Int
        do {
            count = try handle.read(into: &bytes, range: 0..<bytes.count, at: 0)
        } catch {
            throw LogError.io(error, "Reading the header of \(path)")
        }
        switch SegmentHeader.decode(Array(bytes[0..<count])) {
        case .failure(.newerVersion(let version)):
            throw LogError(
                .newerFormatVersion,
                "Segment \(path) has format version \(version); this LogStore reads "
                    + "version \(FormatConstants.formatVersion) and older. Use a newer LogStore.", file: path)
        case .failure(.damaged(let what)):
            throw LogError.corruption(path, offset: 0, what)
        case .success(let header):
            guard header.storeID == meta.storeID else {
                throw LogError.corruption(
                    path, offset: 0,
                    "segment belongs to store \(header.storeID), "
                        + "not to this store \(meta.storeID)")
            }
            guard header.baseOffset == baseOffset else {
                throw LogError.corruption(
                    path, offset: 0,
                    "header says base offset \(header.baseOffset), "
                        + "the file name says \(baseOffset)")
            }
            return SegmentFile(baseOffset: baseOffset, formatVersion: header.formatVersion, path: path, handle: handle)
        }
    }

    /// Uses the segment's index file when it is valid and its last record ends at `expectedEnd`.
    private func loadIndex(of segment: SegmentFile, expectedEnd: UInt64) throws(LogError) -> Bool {
        let path = LogFileNames.join(directory, LogFileNames.index(segment.baseOffset))
        guard (try? fileSystem.kind(of: path)) == .regular,
            let bytes = try? LogCore.readWholeFile(path, fileSystem: fileSystem, byteCountMax: 64 * 1024 * 1024),
            let index = SparseIndex.decode(bytes, storeID: meta.storeID, baseOffset: segment.baseOffset),
            segment.baseOffset + index.endOffset == expectedEnd
        else { return false }
        if let last = index.lastRecordOffset {
            var scanner = SegmentScanner(
                segment: segment, position: last + UInt64(FormatConstants.segmentHeaderByteCount))
            guard case .record(let record) = try scanner.next(decodesPayload: false),
                record.endOffset == expectedEnd
            else { return false }
        } else if segment.baseOffset != expectedEnd {
            return false
        }
        segment.replaceIndex(index)
        return true
    }

    /// Reads a sealed segment whole; its records must end exactly at `expectedEnd`.
    private func scanSealed(_ segment: SegmentFile, expectedEnd: UInt64) throws(LogError) {
        var scanner = SegmentScanner(segment: segment)
        while true {
            switch try scanner.next(decodesPayload: true, RecordPlace.init) {
            case .record(let record):
                segment.note(offset: record.offset, recordByteCount: record.recordByteCount)
                guard record.endOffset <= expectedEnd else {
                    throw LogError.corruption(
                        segment.path, offset: record.offset,
                        "record ends at \(record.endOffset), "
                            + "past the next segment's base offset \(expectedEnd)")
                }
            case .end:
                guard scanner.offset == expectedEnd else {
                    throw LogError.corruption(
                        segment.path, offset: scanner.offset,
                        "sealed segment ends at offset "
                            + "\(scanner.offset) but the next segment starts at \(expectedEnd): records are missing")
                }
                return
            case .bad(let reason, _), .unsupported(let reason):
                throw LogError.corruption(segment.path, offset: scanner.offset, reason)
            }
        }
    }

    // MARK: The last segment

    /// Reads the last segment to its first bad record and handles what follows; returns the end.
    private mutating func recoverLastSegment(_ segment: SegmentFile) throws(LogError) -> UInt64 {
        var scanner = SegmentScanner(segment: segment)
        var badReason = ""
        var lastNonZero: UInt64?
        var rescans = 0
        // Bounded: a pass ends the scan, or reads at least one more record towards the published
        // end, or is one of four more looks past it (a live writer keeps appending while we look).
        rescan: while true {
            scan: while true {
                // Checked in full (CRC, decompression) but not copied out: recovery needs each
                // record's place and type only (a copy of every payload of a 64 MiB segment was
                // most of an open from a checkpoint).
                switch try scanner.next(decodesPayload: true, RecordPlace.init) {
                case .record(let record):
                    noteInLastSegment(record, segment)
                case .end:
                    break scan
                case .bad(let reason, _):
                    badReason = reason
                    break scan
                case .unsupported(let reason):
                    // A checksummed header this version refuses is not a torn write.
                    throw LogError.corruption(segment.path, offset: scanner.offset, reason)
                }
            }
            lastNonZero = try TailInspector(segment: segment).lastNonZeroPosition(from: scanner.position)
            // Beside a live writer (a read-only open takes no lock) the scanner's buffer may predate
            // an append that the look at the rest of the file then saw: read again, with a fresh
            // buffer, before calling it a tail — as `verify` does.
            guard !writable, lastNonZero != nil,
                publishedEnd.map({ scanner.offset < $0 }) ?? false || rescans < 4
            else { break rescan }
            rescans += 1
            var fresh = SegmentScanner(segment: segment, position: scanner.position)
            guard case .record(let record) = try fresh.next(decodesPayload: true, RecordPlace.init) else {
                break rescan
            }
            noteInLastSegment(record, segment)
            badReason = ""
            scanner = fresh
        }
        let end = scanner.offset
        let tailPosition = scanner.position
        guard let lastNonZero else {
            // Only zeros follow: a clean end (zeros are preallocation, not data).
            try syncLastSegment(segment)
            return end
        }
        // Bytes from `tailPosition` on are not records.
        guard writable else {
            // Past the end the last writer published: a live writer's append in flight (it keeps
            // appending while we look) or a dead one's torn tail — a read-only open cannot tell
            // which without the writer's lock, so it does not report it (`verify` judges it).
            if let publishedEnd, end >= publishedEnd { return end }
            // A read-only open changes nothing: the bad tail is the end, and the report says so.
            report.unreadTail = .init(
                offset: end, byteCount: lastNonZero + 1 - tailPosition,
                reason: badReason.isEmpty ? "zeros where a record header was expected" : badReason,
                file: segment.path)
            return end
        }
        // Decide before changing anything: a refused open must leave every byte where it was.
        let inspector = TailInspector(segment: segment)
        let evidence = try inspector.evidence(after: tailPosition, through: lastNonZero, baseOffset: segment.baseOffset)
        let damage =
            "bad record at offset \(end) (\(badReason.isEmpty ? "zeros where a record header was expected" : badReason))"
        let unchanged = "nothing on disk was changed"
        if let statement = evidence.highestStatement, statement.durableEnd > end {
            // D12: that record was written when everything before its stated durable end had been
            // synced, and a crash cannot tear synced bytes: p is damaged acknowledged data.
            throw LogError.corruption(
                segment.path, offset: end,
                "\(damage), but the record at offset \(statement.recordOffset) states that the log was durable "
                    + "through offset \(statement.durableEnd), so the bad record had been synced and acknowledged: "
                    + "damage, not a torn write; \(unchanged)")
        }
        if let checkpoint = checkpointOffsets.filter({ $0 > end }).max() {
            // A checkpoint at X is written only after an fdatasync through X.
            throw LogError.corruption(
                segment.path, offset: end,
                "\(damage), but \(LogFileNames.checkpoint(checkpoint)) was written after the log was durable "
                    + "through offset \(checkpoint), so the bad record had been synced: damage, not a torn write; "
                    + unchanged)
        }
        if let farthest = evidence.farthestRecord,
            farthest.endPosition > tailPosition + FormatConstants.unsyncedByteCountMax
        {
            // Writers never leave more than unsyncedByteCountMax unsynced, so a record ending that far
            // past p was written after p was synced: p is damaged data, not a torn write.
            throw LogError.corruption(
                segment.path, offset: end,
                "\(damage), followed by a valid record at offset \(farthest.offset) that ends more than "
                    + "\(FormatConstants.unsyncedByteCountMax) bytes later, so the bad record had been synced; "
                    + unchanged)
        }
        report.droppedRecords += try inspector.describeDropped(
            from: tailPosition, through: lastNonZero,
            baseOffset: segment.baseOffset,
            firstReason: badReason.isEmpty ? "zeros where a record header was expected" : badReason)
        report.truncatedAt = end
        try zeroFill(segment, from: tailPosition, through: lastNonZero)
        return end
    }

    /// Notes a record of the last segment in its index.
    private mutating func noteInLastSegment(_ record: RecordPlace, _ segment: SegmentFile) {
        segment.note(offset: record.offset, recordByteCount: record.recordByteCount)
        lastRecordType = record.type
    }

    /// What recovery keeps of a record it read: where it is and its type.
    private struct RecordPlace {
        let offset: UInt64
        let recordByteCount: UInt64
        let type: RecordType

        init(_ view: LogRecordView) {
            offset = view.offset
            recordByteCount = view.recordByteCount
            type = view.type
        }

        var endOffset: UInt64 { offset + recordByteCount }
    }

    /// Zero-fills `[from, through]` and syncs: the torn bytes are gone before any append.
    func zeroFill(_ segment: SegmentFile, from: UInt64, through: UInt64) throws(LogError) {
        do {
            try ZeroFill.write(segment.handle, from: from, byteCount: through + 1 - from)
            try segment.handle.syncData()
        } catch {
            throw LogError.io(error, "Cutting the torn tail of \(segment.path)")
        }
    }

    /// What recovery read may only be in the page cache (a process crashed, the machine did not):
    /// sync it before it counts as durable.
    private func syncLastSegment(_ segment: SegmentFile) throws(LogError) {
        guard writable else { return }
        do { try segment.handle.syncData() } catch { throw LogError.io(error, "Syncing \(segment.path)") }
    }
}

/// Writes zeros in bounded chunks.
enum ZeroFill {
    static let chunkByteCount = 1024 * 1024
    static let zeros = [UInt8](repeating: 0, count: chunkByteCount)

    static func write(_ handle: any FileHandle, from: UInt64, byteCount: UInt64) throws(FileSystemError) {
        var position = from
        let end = from + byteCount
        while position < end {
            let count = Int(min(UInt64(chunkByteCount), end - position))
            try handle.write(zeros, range: 0..<count, at: position)
            position += UInt64(count)
        }
    }
}
