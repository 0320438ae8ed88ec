/// The record pass of ``Log/verify(directory:fileSystem:)``: every record of one segment, with
/// resynchronisation after damage.
extension StoreVerifier {
    /// Bytes of a segment that are not records, from `start` up to `end` (file positions).
    struct DamagedRange {
        var start: UInt64
        var end: UInt64
        var reason: String
        /// The header at `start` when it was valid (the payload was not).
        var header: RecordHeader?
        /// Whether a record that checks out starts at `end`.
        var isFollowedByRecord: Bool
    }

    /// What the scan of one segment saw.
    struct ScanState {
        var result: SegmentResult
        var damage: [DamagedRange] = []
        /// The logical offset just past the last record that checked out, damage or not.
        var lastValidEnd: UInt64
        /// Records that checked out after the first damage, and the last one's offset and end position.
        var recordCountAfterDamage: UInt64 = 0
        var lastAfterDamage: (offset: UInt64, endPosition: UInt64)?
        /// The highest durable end a record after the first damage states (format version 2).
        var highestStatementAfterDamage: (durableEnd: UInt64, recordOffset: UInt64)?
        /// The file position being looked at (for an I/O error message).
        var position = UInt64(FormatConstants.segmentHeaderByteCount)
    }

    /// Bytes read per step of the byte-by-byte search for the next record.
    static let resyncChunkByteCount = 1024 * 1024

    mutating func checkRecords(_ entry: SegmentEntry, nextBase: UInt64?) -> SegmentResult {
        guard let handle = entry.handle else { return SegmentResult(isDamaged: true, end: entry.baseOffset) }
        var state = ScanState(result: SegmentResult(end: entry.baseOffset), lastValidEnd: entry.baseOffset)
        do {
            try scanRecords(handle, entry: entry, nextBase: nextBase, state: &state)
        } catch {
            // A read error is reported as what it is, never as damage; the rest of the segment is unknown.
            add(
                entry.name, state.position, offset: logicalOffset(state.position, entry.baseOffset), .corruption,
                "I/O error: \(error.message) The rest of this segment was not checked.")
            state.result.isDamaged = true
            return state.result
        }
        state.result.isDamaged = !state.damage.isEmpty
        if nextBase == nil {
            reportTail(state, entry: entry)
        } else {
            reportSealed(state, entry: entry, nextBase: nextBase!)
        }
        return state.result
    }

    /// Reads the segment record by record; after a bad one, finds the next good one and goes on.
    private mutating func scanRecords(
        _ handle: any FileHandle, entry: SegmentEntry, nextBase: UInt64?,
        state: inout ScanState
    ) throws(LogError) {
        let base = entry.baseOffset
        let inspector = TailInspector(
            handle: handle, path: LogFileNames.join(directory, entry.name), formatVersion: entry.formatVersion)
        // One lookup of the segment's dictionary (FORMAT.md §6.8) for every scanner below.
        let dictionary = SegmentDictionary()
        var scanner = SegmentScanner(
            handle: handle, baseOffset: base, formatVersion: entry.formatVersion, dictionary: dictionary)
        // Bounded: every pass moves past a record, resumes strictly after the damage, or returns.
        while true {
            let start = scanner.position
            state.position = start
            let reason: String
            var header: RecordHeader?
            var lastNonZero: UInt64?
            switch try scanner.next(decodesPayload: true) {
            case .record(let record):
                account(record, at: start, entry: entry, nextBase: nextBase, state: &state)
                continue
            case .end:
                lastNonZero = try inspector.lastNonZeroPosition(from: start)
                // Only zeros (preallocation) or nothing follows: the end of the records.
                guard lastNonZero != nil else { return }
                reason = "zeros where a record header was expected, but non-zero bytes follow"
            case .bad(let why, let badHeader):
                reason = why
                header = badHeader
            case .unsupported(let why):
                reason = "a record this version refuses: \(why)"
            }
            if nextBase == nil {
                // Beside a live writer the buffered bytes may predate an append: read again before
                // calling it damage.
                var fresh = SegmentScanner(
                    handle: handle, baseOffset: base, formatVersion: entry.formatVersion, position: start,
                    dictionary: dictionary)
                if case .record(let record) = try fresh.next(decodesPayload: true) {
                    account(record, at: start, entry: entry, nextBase: nextBase, state: &state)
                    scanner = fresh
                    continue
                }
            }
            if lastNonZero == nil { lastNonZero = try inspector.lastNonZeroPosition(from: start) }
            let through = lastNonZero ?? start
            if let next = try nextRecordPosition(
                handle, baseOffset: base, formatVersion: entry.formatVersion, after: start, through: through,
                path: inspector.path, dictionary: dictionary)
            {
                state.damage.append(
                    DamagedRange(
                        start: start, end: next, reason: reason, header: header,
                        isFollowedByRecord: true))
                scanner = SegmentScanner(
                    handle: handle, baseOffset: base, formatVersion: entry.formatVersion, position: next,
                    dictionary: dictionary)
            } else {
                state.damage.append(
                    DamagedRange(
                        start: start, end: through + 1, reason: reason, header: header,
                        isFollowedByRecord: false))
                return
            }
        }
    }

    private mutating func account(
        _ record: LogRecord, at position: UInt64, entry: SegmentEntry, nextBase: UInt64?,
        state: inout ScanState
    ) {
        if record.type == .durableEndMark {
            report.markCount += 1
        } else {
            report.recordCount += 1
            report.recordByteCount += record.recordByteCount
        }
        state.lastValidEnd = record.endOffset
        if state.damage.isEmpty {
            state.result.index.note(
                relativeOffset: record.offset - entry.baseOffset, recordByteCount: record.recordByteCount)
            state.result.end = record.endOffset
        } else {
            state.recordCountAfterDamage += 1
            state.lastAfterDamage = (record.offset, position + record.recordByteCount)
            if let stated = record.statedDurableEnd, stated > state.highestStatementAfterDamage?.durableEnd ?? 0 {
                state.highestStatementAfterDamage = (stated, record.offset)
            }
        }
        if record.type == .dictionary && record.offset != entry.baseOffset {
            add(
                entry.name, position, offset: record.offset, byteCount: record.recordByteCount, .warning,
                "a dictionary record that is not its segment's first record: no record can use it (FORMAT.md §6.8)")
        }
        if let nextBase, record.endOffset > nextBase {
            add(
                entry.name, position, offset: record.offset, byteCount: record.recordByteCount, .corruption,
                "record ends at offset \(record.endOffset), past the start of the next segment at \(nextBase)")
        }
    }

    /// The first file position in `(after, through]` where a record starts whose header is valid
    /// for its position and whose payload checks out; `nil` when there is none.
    private func nextRecordPosition(
        _ handle: any FileHandle, baseOffset: UInt64, formatVersion: UInt32, after: UInt64, through: UInt64,
        path: String, dictionary: SegmentDictionary
    ) throws(LogError) -> UInt64? {
        let headerByteCount = FormatConstants.recordHeaderByteCount
        guard through > after else { return nil }
        // No bigger than the range (plus one header): a short range costs no 1 MiB buffer.
        var buffer = [UInt8](
            repeating: 0, count: Int(min(UInt64(Self.resyncChunkByteCount), through - after)) + headerByteCount - 1)
        var chunkStart = after + 1
        while chunkStart <= through {
            let count = Int(min(UInt64(Self.resyncChunkByteCount), through + 1 - chunkStart)) + headerByteCount - 1
            let got: Int
            do { got = try handle.read(into: &buffer, range: 0..<count, at: chunkStart) } catch {
                throw LogError.io(error, "Reading \(path)")
            }
            var index = 0
            while index + headerByteCount <= got && chunkStart + UInt64(index) <= through {
                let position = chunkStart + UInt64(index)
                // A record carries its own logical offset at header byte 8: a cheap filter before the CRCs.
                let claimed = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: index + 8, as: UInt64.self) }
                if UInt64(littleEndian: claimed) == logicalOffset(position, baseOffset) {
                    var scanner = SegmentScanner(
                        handle: handle, baseOffset: baseOffset, formatVersion: formatVersion, position: position,
                        dictionary: dictionary)
                    if case .record = try scanner.next(decodesPayload: true) { return position }
                }
                index += 1
            }
            chunkStart += UInt64(Self.resyncChunkByteCount)
        }
        return nil
    }

    // MARK: Reporting

    /// In a sealed segment every damaged range is corruption, and the records must end exactly
    /// where the next segment begins.
    private mutating func reportSealed(_ state: ScanState, entry: SegmentEntry, nextBase: UInt64) {
        let base = entry.baseOffset
        for range in state.damage {
            let offset = logicalOffset(range.start, base)
            let after =
                range.isFollowedByRecord
                ? " Verification resumed at the record at offset \(logicalOffset(range.end, base)) (byte \(range.end))."
                : " No record that checks out follows in this segment, whose records should run to offset \(nextBase)."
            add(
                entry.name, range.start, offset: offset, byteCount: range.end - range.start, .corruption,
                "\(range.reason); expected a record at offset \(offset).\(after)")
        }
        if state.damage.last?.isFollowedByRecord ?? true, state.lastValidEnd < nextBase {
            let position = SegmentScanner.filePosition(logicalOffset: state.lastValidEnd, baseOffset: base)
            add(
                entry.name, position, offset: state.lastValidEnd, .corruption,
                "sealed segment's records end at offset "
                    + "\(state.lastValidEnd) but the next segment starts at \(nextBase): records are missing")
        }
    }

    /// In the last segment, bytes after the last good record are a torn tail when a writer dying
    /// mid-append could have left them (a warning: the next open for writing cuts them), and
    /// corruption when something proves they had been synced — a later record stating a durable
    /// end past them (D12), a checkpoint past them, a record ending more than the unsynced bound
    /// past them — or when there are too many. The same judgement as an open for writing.
    private mutating func reportTail(_ state: ScanState, entry: SegmentEntry) {
        guard let first = state.damage.first else { return }
        let base = entry.baseOffset
        let start = first.start
        let offset = logicalOffset(start, base)
        let tailEnd = max(state.damage.last!.end, state.lastAfterDamage?.endPosition ?? 0)
        let window = max(FormatConstants.unsyncedByteCountMax, first.header?.recordByteCount ?? 0)
        let statement = state.highestStatementAfterDamage.flatMap { $0.durableEnd > offset ? $0 : nil }
        let checkpoint = checkpointOffsets.filter { $0 > offset }.max()
        if statement != nil || checkpoint != nil {
            let proof =
                statement.map {
                    " The record at offset \($0.recordOffset) states that the log was durable through offset "
                        + "\($0.durableEnd)"
                }
                ?? " \(LogFileNames.checkpoint(checkpoint!)) was written after the log was durable through offset "
                + "\(checkpoint!)"
            for (number, range) in state.damage.enumerated() {
                let rangeOffset = logicalOffset(range.start, base)
                let why =
                    number > 0
                    ? ""
                    : "\(proof), so these bytes had been synced and acknowledged: opening refuses the store "
                        + "(`logstore repair` cuts the log here)."
                add(
                    entry.name, range.start, offset: rangeOffset, byteCount: range.end - range.start, .corruption,
                    "\(range.reason); expected a record at offset \(rangeOffset).\(why)")
            }
        } else if let proof = state.lastAfterDamage, proof.endPosition > start + FormatConstants.unsyncedByteCountMax {
            // Writers never leave more than unsyncedByteCountMax unsynced, so the bad bytes had been synced.
            for (number, range) in state.damage.enumerated() {
                let rangeOffset = logicalOffset(range.start, base)
                let why =
                    number > 0
                    ? ""
                    : " A record that checks out at offset \(proof.offset) ends more than "
                        + "\(FormatConstants.unsyncedByteCountMax) bytes later, so these bytes had been synced: opening "
                        + "refuses the store (`logstore repair` cuts the log here)."
                add(
                    entry.name, range.start, offset: rangeOffset, byteCount: range.end - range.start, .corruption,
                    "\(range.reason); expected a record at offset \(rangeOffset).\(why)")
            }
        } else if tailEnd - start <= window {
            let dropped =
                state.recordCountAfterDamage == 0
                ? ""
                : ", dropping the \(state.recordCountAfterDamage) records that checked out after it"
            add(
                entry.name, start, offset: offset, byteCount: tailEnd - start, .warning,
                "torn tail: \(first.reason); \(tailEnd - start) bytes after the last complete record, as a writer "
                    + "that died mid-append leaves them. The next open for writing cuts the log at offset \(offset)\(dropped)."
            )
        } else {
            add(
                entry.name, start, offset: offset, byteCount: tailEnd - start, .corruption,
                "\(first.reason); \(tailEnd - start) bytes that are not records follow the last record at offset "
                    + "\(offset), more than the \(window) bytes an interrupted append can leave")
        }
    }

    func logicalOffset(_ filePosition: UInt64, _ baseOffset: UInt64) -> UInt64 {
        SegmentScanner.logicalOffset(
            filePosition: max(filePosition, UInt64(FormatConstants.segmentHeaderByteCount)),
            baseOffset: baseOffset)
    }
}
