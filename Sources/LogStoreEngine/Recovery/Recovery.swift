import Foundation

/// Opens the segments of a store and recovers the log as DECISIONS.md D3 says.
///
/// - Sealed segments (all but the last): the header must be valid and the records must end
///   exactly where the next segment begins. Checked through the segment's index file when it is
///   valid (its last record must check out and end there), else by reading the whole segment.
/// - The last segment is read to its first bad record p. Bytes from p on are a torn tail, unless
///   a valid record ends more than ``FormatConstants/unsyncedByteCountMax`` past p, which proves p
///   had been synced: corruption.
/// - With ``LogOptions/repairs``, every segment is read and the log is cut at the first bad record.
struct Recovery {
    let directory: String
    let meta: StoreMeta
    let options: LogOptions
    /// False for a read-only open: nothing on disk changes and a bad tail is simply the end.
    let writable: Bool
    var report: RecoveryReport

    struct Result {
        var segments: [SegmentFile]
        var end: UInt64
        var report: RecoveryReport
        var indexesToWrite: [SegmentFile]
    }

    private var fileSystem: any FileSystem { options.fileSystem }

    init(directory: String, meta: StoreMeta, options: LogOptions, writable: Bool, report: RecoveryReport) {
        self.directory = directory
        self.meta = meta
        self.options = options
        self.writable = writable
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
        return Result(segments: segments, end: end, report: report, indexesToWrite: writable ? indexesToWrite : [])
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
        }
        return SegmentFile(baseOffset: baseOffset, path: path, handle: handle)
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
                handle: segment.handle, baseOffset: segment.baseOffset,
                position: last + UInt64(FormatConstants.segmentHeaderByteCount))
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
        var scanner = SegmentScanner(handle: segment.handle, baseOffset: segment.baseOffset)
        while true {
            switch try scanner.next(decodesPayload: true) {
            case .record(let record):
                segment.note(record)
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
        var scanner = SegmentScanner(handle: segment.handle, baseOffset: segment.baseOffset)
        var badReason = ""
        scan: while true {
            switch try scanner.next(decodesPayload: true) {
            case .record(let record):
                segment.note(record)
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
        let end = scanner.offset
        let tailPosition = scanner.position
        let lastNonZero = try TailInspector(handle: segment.handle, path: segment.path).lastNonZeroPosition(
            from: tailPosition)
        guard let lastNonZero else {
            // Only zeros follow: a clean end (zeros are preallocation, not data).
            try syncLastSegment(segment)
            return end
        }
        // Bytes from `tailPosition` on are not records.
        guard writable else {
            // A read-only open changes nothing: the bad tail is the end, and the report says so.
            report.unreadTail = .init(
                offset: end, byteCount: lastNonZero + 1 - tailPosition,
                reason: badReason.isEmpty ? "zeros where a record header was expected" : badReason,
                file: segment.path)
            return end
        }
        let inspector = TailInspector(handle: segment.handle, path: segment.path)
        if let proof = try inspector.validRecord(
            endingBeyond: tailPosition + FormatConstants.unsyncedByteCountMax,
            from: tailPosition, through: lastNonZero, baseOffset: segment.baseOffset)
        {
            // Writers never leave more than unsyncedByteCountMax unsynced, so a record ending that far
            // past p was written after p was synced: p is damaged data, not a torn write.
            throw LogError.corruption(
                segment.path, offset: end,
                "bad record (\(badReason.isEmpty ? "zeros" : badReason)) "
                    + "followed by a valid record at offset \(proof) that ends more than "
                    + "\(FormatConstants.unsyncedByteCountMax) bytes later, so the bad record had been synced")
        }
        report.droppedRecords += try inspector.describeDropped(
            from: tailPosition, through: lastNonZero,
            baseOffset: segment.baseOffset,
            firstReason: badReason.isEmpty ? "zeros where a record header was expected" : badReason)
        report.truncatedAt = end
        try zeroFill(segment, from: tailPosition, through: lastNonZero)
        return end
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
