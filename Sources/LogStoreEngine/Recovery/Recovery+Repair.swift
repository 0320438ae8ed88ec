extension Recovery {
    /// Where repair cuts the log.
    private struct Cut {
        /// Index of the segment the cut is in.
        var segmentIndex: Int
        /// File position of the first bad byte; `nil` when the segment's header itself is bad.
        var position: UInt64?
        var reason: String
    }

    /// The folder that keeps, as they were, the files repair changes or drops.
    private var aside: RepairAside { RepairAside(directory: directory, fileSystem: options.fileSystem) }

    /// Reads every record of every segment and cuts the log at the first bad one: zero-fills the
    /// rest of that segment, sets aside every later segment, every index of the cut segments and
    /// every checkpoint beyond the new end; then sets aside every checkpoint at or before the end
    /// whose framing does not check out. Every file changed or dropped is first kept in
    /// ``RecoveryReport/setAsideDirectory``; the report says all that was dropped.
    mutating func repair(segmentOffsets: [UInt64]) throws(LogError) -> Result {
        var result = try repairSegments(segmentOffsets: segmentOffsets)
        try setAsideDamagedCheckpoints(end: result.end, startOffset: result.segments.first!.baseOffset)
        result.report = report
        return result
    }

    private mutating func repairSegments(segmentOffsets: [UInt64]) throws(LogError) -> Result {
        var segments: [SegmentFile] = []
        var cut: Cut?
        for (index, baseOffset) in segmentOffsets.enumerated() {
            let nextBase = index + 1 < segmentOffsets.count ? segmentOffsets[index + 1] : nil
            let segment: SegmentFile
            do {
                segment = try openSegment(baseOffset: baseOffset, writable: true)
            } catch  where error.code == .corruption {
                // A damaged header loses nothing that is not known elsewhere: rewrite it and keep the
                // records, which check themselves. A valid header of another store or base is not damage.
                guard
                    try rewriteDamagedHeader(
                        baseOffset: baseOffset,
                        neighbourVersion: neighbourVersion(
                            of: index, segmentOffsets: segmentOffsets, previous: segments.last)),
                    let reopened = try? openSegment(baseOffset: baseOffset, writable: true)
                else {
                    cut = Cut(segmentIndex: index, position: nil, reason: error.message)
                    break
                }
                segment = reopened
            }
            segments.append(segment)
            if let found = try firstProblem(in: segment, nextBase: nextBase) {
                cut = Cut(segmentIndex: index, position: found.position, reason: found.reason)
                break
            }
        }
        guard let cut else {
            // Every record checks out; the last segment may still have bytes past its end.
            let last = segments.last!
            let endPosition = SegmentScanner.filePosition(logicalOffset: last.endOffset, baseOffset: last.baseOffset)
            if let lastNonZero = try TailInspector(segment: last).lastNonZeroPosition(from: endPosition) {
                report.droppedRecords += try TailInspector(segment: last)
                    .describeDropped(
                        from: endPosition, through: lastNonZero, baseOffset: last.baseOffset,
                        firstReason: "bytes after the last record")
                report.truncatedAt = last.endOffset
                try aside.copy(LogFileNames.segment(last.baseOffset), report: &report)
                try zeroFill(last, from: endPosition, through: lastNonZero)
            } else {
                do { try last.handle.syncData() } catch { throw LogError.io(error, "Syncing \(last.path)") }
            }
            // A torn tail cut by an earlier open can leave a checkpoint beyond the end: repair drops it too.
            try deleteCheckpoints(beyond: last.endOffset)
            return Result(
                segments: segments, end: last.endOffset, report: report, indexesToWrite: Array(segments.dropLast()))
        }
        return try apply(cut, segments: segments, segmentOffsets: segmentOffsets)
    }

    /// The first bad record of a segment (or its early end), indexing the good ones on the way.
    private func firstProblem(in segment: SegmentFile, nextBase: UInt64?) throws(LogError) -> (
        position: UInt64, reason: String
    )? {
        var scanner = SegmentScanner(segment: segment)
        while true {
            switch try scanner.next(decodesPayload: true) {
            case .record(let record):
                if let nextBase, record.endOffset > nextBase {
                    return (
                        scanner.position - record.recordByteCount,
                        "record runs past the next segment's base \(nextBase)"
                    )
                }
                segment.note(record)
            case .end:
                if let nextBase, scanner.offset != nextBase {
                    return (scanner.position, "segment ends at \(scanner.offset), the next one starts at \(nextBase)")
                }
                return nil
            case .bad(let reason, _), .unsupported(let reason):
                return (scanner.position, reason)
            }
        }
    }

    private mutating func apply(_ cut: Cut, segments: [SegmentFile], segmentOffsets: [UInt64]) throws(LogError)
        -> Result
    {
        var kept = segments
        let fileSystem = options.fileSystem
        var end: UInt64
        if let position = cut.position {
            let segment = kept[cut.segmentIndex]
            let inspector = TailInspector(segment: segment)
            end = SegmentScanner.logicalOffset(filePosition: position, baseOffset: segment.baseOffset)
            if let lastNonZero = try inspector.lastNonZeroPosition(from: position) {
                report.droppedRecords += try inspector.describeDropped(
                    from: position, through: lastNonZero,
                    baseOffset: segment.baseOffset, firstReason: cut.reason)
                try aside.copy(LogFileNames.segment(segment.baseOffset), report: &report)
                try zeroFill(segment, from: position, through: lastNonZero)
            }
            kept = Array(kept[...cut.segmentIndex])
        } else if cut.segmentIndex == 0 {
            // The first segment's header is bad: start it afresh at its base offset.
            let baseOffset = segmentOffsets[0]
            let path = LogFileNames.join(directory, LogFileNames.segment(baseOffset))
            report.droppedRecords.append(
                .init(offset: baseOffset, byteCount: fileByteCount(path), reason: cut.reason, file: path))
            try aside.copy(LogFileNames.segment(baseOffset), report: &report)
            do {
                // createSegment's rename replaces the damaged file atomically: no moment without it.
                kept = [
                    try LogCore.createSegment(
                        directory: directory, storeID: meta.storeID, baseOffset: baseOffset,
                        fileSystem: fileSystem)
                ]
            } catch {
                throw LogError.io(error, "Recreating segment \(path)")
            }
            end = baseOffset
        } else {
            kept = Array(kept[..<cut.segmentIndex])
            end = kept.last!.endOffset
        }
        let firstDeleted = cut.position == nil && cut.segmentIndex == 0 ? 1 : kept.count
        try deleteFiles(
            segmentOffsets: Array(segmentOffsets[firstDeleted...]), cutSegment: kept.last!, end: end,
            reason: cut.reason)
        report.truncatedAt = end
        return Result(segments: kept, end: end, report: report, indexesToWrite: Array(kept.dropLast()))
    }

    /// Deletes the segments after the cut, the cut segment's index, and checkpoints beyond `end`.
    private mutating func deleteFiles(
        segmentOffsets: [UInt64], cutSegment: SegmentFile, end: UInt64,
        reason: String
    ) throws(LogError) {
        let aside = self.aside
        let fileSystem = options.fileSystem
        do {
            for baseOffset in segmentOffsets {
                let name = LogFileNames.segment(baseOffset)
                let path = LogFileNames.join(directory, name)
                report.droppedRecords.append(
                    .init(
                        offset: baseOffset, byteCount: fileByteCount(path),
                        reason: "segment follows the repair point", file: path))
                try aside.move(name, report: &report)
                report.deletedSegments.append(name)
            }
            let names = try fileSystem.contentsOfDirectory(directory).sorted()
            for name in names {
                if let base = LogFileNames.indexBaseOffset(name), base >= cutSegment.baseOffset {
                    try aside.move(name, report: &report)
                }
                if let offset = LogFileNames.checkpointOffset(name), offset > end {
                    try aside.move(name, report: &report)
                    report.deletedCheckpoints.append(name)
                    report.repairNotes.append(
                        "\(name) set aside: it holds the state at offset \(offset), beyond the repaired end at \(end).")
                }
            }
            try fileSystem.syncDirectory(directory)
        } catch let error as FileSystemError {
            throw LogError.io(error, "Deleting what follows the repair point (\(reason))")
        } catch let error as LogError {
            throw error
        } catch {
            preconditionFailure("unexpected error \(error)")
        }
    }

    /// Deletes the checkpoints beyond `end` (a log whose every record checks out, cut earlier).
    private mutating func deleteCheckpoints(beyond end: UInt64) throws(LogError) {
        let beyond: [String]
        do {
            beyond = try options.fileSystem.contentsOfDirectory(directory)
                .filter { LogFileNames.checkpointOffset($0).map { $0 > end } ?? false }.sorted()
        } catch {
            throw LogError.io(error, "Listing the checkpoints beyond the end of the log at \(end)")
        }
        for name in beyond {
            try aside.move(name, report: &report)
            report.deletedCheckpoints.append(name)
            report.repairNotes.append(
                "\(name) set aside: it lies beyond the end of the log at \(end) (an earlier open cut the log).")
        }
    }

    /// Sets aside every checkpoint at or before `end` whose file does not check out as a record file
    /// of this store at its offset (file header, store, offset, every record's checks, nothing after
    /// the last record). Its grammar is the model layer's business; the framing catches rot and
    /// truncation. A checkpoint of a newer format version is left alone.
    private mutating func setAsideDamagedCheckpoints(end: UInt64, startOffset: UInt64) throws(LogError) {
        let names: [String]
        do {
            names = try options.fileSystem.contentsOfDirectory(directory)
                .filter { LogFileNames.checkpointOffset($0).map { $0 <= end } ?? false }.sorted()
        } catch {
            throw LogError.io(error, "Listing the checkpoints of \(directory)")
        }
        var kept: [UInt64] = []
        var setAside: [String] = []
        for name in names {
            let offset = LogFileNames.checkpointOffset(name)!
            guard let problem = try checkpointProblem(name: name, offset: offset) else {
                kept.append(offset)
                continue
            }
            try aside.move(name, report: &report)
            report.deletedCheckpoints.append(name)
            setAside.append(name)
            report.repairNotes.append("\(name) set aside: \(problem).")
        }
        if !setAside.isEmpty, startOffset > 0, !kept.contains(where: { $0 >= startOffset }) {
            report.repairNotes.append(
                "The log starts at offset \(startOffset) (older history was deleted) and no checkpoint that "
                    + "checks out holds the state before it: the models as of that offset were only in "
                    + "\(setAside.joined(separator: ", ")). The store cannot open without them; restore one from "
                    + "a backup, or start a new store.")
        }
    }

    /// What is wrong with the checkpoint file `name`, or `nil` when its framing checks out.
    private func checkpointProblem(name: String, offset: UInt64) throws(LogError) -> String? {
        let path = LogFileNames.join(directory, name)
        do {
            var reader = try RecordFileReader(
                path: path, magic: FormatConstants.checkpointMagic, fileSystem: options.fileSystem)
            defer { reader.close() }
            guard reader.header.storeID == meta.storeID else {
                return "it is a checkpoint of store \(reader.header.storeID), not of this store \(meta.storeID)"
            }
            guard reader.header.value == offset else {
                return "its file header says offset \(reader.header.value), its name \(offset)"
            }
            // Bounded by the file's size: each pass reads one record or ends.
            while try reader.next() != nil {}
            return nil
        } catch where error.code == .corruption {
            return error.message
        }
    }

    /// The format version of the segments next to segment `index`, for a damaged header whose
    /// version field is itself unreadable: segments of one store go from version 1 to 2 to 3 and
    /// never back, so the previous segment's version, else the next one's, else store.meta's
    /// (the version the store was created with) is the likeliest.
    private func neighbourVersion(of index: Int, segmentOffsets: [UInt64], previous: SegmentFile?) -> UInt32 {
        if let previous { return previous.formatVersion }
        if index + 1 < segmentOffsets.count {
            let path = LogFileNames.join(directory, LogFileNames.segment(segmentOffsets[index + 1]))
            if let handle = try? options.fileSystem.openFile(path, mode: .readOnly) {
                defer { handle.close() }
                if let bytes = try? handle.read(byteCount: FormatConstants.segmentHeaderByteCount, at: 0),
                    case .success(let header) = SegmentHeader.decode(bytes)
                {
                    return header.formatVersion
                }
            }
        }
        return min(meta.formatVersion, FormatConstants.formatVersion)
    }

    /// Rewrites the 64-byte header of a segment whose header fails its magic or CRC check, with
    /// the format version the damaged header most likely had (its version field when that names a
    /// version this code reads, else `neighbourVersion`): the records' layout depends on it.
    /// Returns `false` (and changes nothing) when the header is intact or of a newer version.
    private mutating func rewriteDamagedHeader(baseOffset: UInt64, neighbourVersion: UInt32) throws(LogError) -> Bool {
        let name = LogFileNames.segment(baseOffset)
        let path = LogFileNames.join(directory, name)
        let bytes: [UInt8]
        do {
            let handle = try options.fileSystem.openFile(path, mode: .readOnly)
            defer { handle.close() }
            bytes = try handle.read(byteCount: FormatConstants.segmentHeaderByteCount, at: 0)
        } catch {
            throw LogError.io(error, "Reading the header of \(path)")
        }
        guard case .failure(.damaged(let what)) = SegmentHeader.decode(bytes) else { return false }
        let stated = SegmentHeader.probableVersion(ofDamaged: bytes)
        // A guess of version 2 or later is written as the current version (see readableVersion).
        let version = FormatConstants.readableVersion(guessed: stated ?? neighbourVersion)
        try aside.copy(name, report: &report)
        do {
            let handle = try options.fileSystem.openFile(path, mode: .readWrite)
            defer { handle.close() }
            try handle.write(
                SegmentHeader(formatVersion: version, storeID: meta.storeID, baseOffset: baseOffset).encoded(), at: 0)
            try handle.syncData()
        } catch {
            throw LogError.io(error, "Rewriting the header of \(path)")
        }
        report.rewrittenSegmentHeaders.append(name)
        report.repairNotes.append(
            "\(name): header rewritten (\(what)) as format version \(version) "
                + (stated != nil ? "(the version it states)" : "(its version field is unreadable; the neighbours' version)")
                + "; its records were kept.")
        return true
    }

    private func fileByteCount(_ path: String) -> UInt64 {
        guard let handle = try? options.fileSystem.openFile(path, mode: .readOnly) else { return 0 }
        defer { handle.close() }
        let size = (try? handle.size()) ?? 0
        return size > UInt64(FormatConstants.segmentHeaderByteCount)
            ? size - UInt64(FormatConstants.segmentHeaderByteCount) : 0
    }
}
