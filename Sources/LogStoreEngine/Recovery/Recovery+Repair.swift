extension Recovery {
    /// Where repair cuts the log.
    private struct Cut {
        /// Index of the segment the cut is in.
        var segmentIndex: Int
        /// File position of the first bad byte; `nil` when the segment's header itself is bad.
        var position: UInt64?
        var reason: String
    }

    /// Reads every record of every segment and cuts the log at the first bad one: zero-fills the
    /// rest of that segment, deletes every later segment, every index of the cut segments and
    /// every checkpoint beyond the new end, and reports all it dropped.
    mutating func repair(segmentOffsets: [UInt64]) throws(LogError) -> Result {
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
                guard try rewriteDamagedHeader(baseOffset: baseOffset),
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
                try zeroFill(segment, from: position, through: lastNonZero)
            }
            kept = Array(kept[...cut.segmentIndex])
        } else if cut.segmentIndex == 0 {
            // The first segment's header is bad: start it afresh at its base offset.
            let baseOffset = segmentOffsets[0]
            let path = LogFileNames.join(directory, LogFileNames.segment(baseOffset))
            report.droppedRecords.append(
                .init(offset: baseOffset, byteCount: fileByteCount(path), reason: cut.reason, file: path))
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
        let fileSystem = options.fileSystem
        do {
            for baseOffset in segmentOffsets {
                let name = LogFileNames.segment(baseOffset)
                let path = LogFileNames.join(directory, name)
                report.droppedRecords.append(
                    .init(
                        offset: baseOffset, byteCount: fileByteCount(path),
                        reason: "segment follows the repair point", file: path))
                try fileSystem.removeFile(path)
                report.deletedSegments.append(name)
            }
            let names = try fileSystem.contentsOfDirectory(directory)
            for name in names {
                if let base = LogFileNames.indexBaseOffset(name), base >= cutSegment.baseOffset {
                    try fileSystem.removeFile(LogFileNames.join(directory, name))
                }
                if let offset = LogFileNames.checkpointOffset(name), offset > end {
                    try fileSystem.removeFile(LogFileNames.join(directory, name))
                    report.deletedCheckpoints.append(name)
                }
            }
            try fileSystem.syncDirectory(directory)
        } catch {
            throw LogError.io(error, "Deleting what follows the repair point (\(reason))")
        }
    }

    /// Deletes the checkpoints beyond `end` (a log whose every record checks out, cut earlier).
    private mutating func deleteCheckpoints(beyond end: UInt64) throws(LogError) {
        let fileSystem = options.fileSystem
        do {
            let beyond = try fileSystem.contentsOfDirectory(directory)
                .filter { LogFileNames.checkpointOffset($0).map { $0 > end } ?? false }.sorted()
            guard !beyond.isEmpty else { return }
            for name in beyond { try fileSystem.removeFile(LogFileNames.join(directory, name)) }
            try fileSystem.syncDirectory(directory)
            report.deletedCheckpoints += beyond
        } catch {
            throw LogError.io(error, "Deleting checkpoints beyond the end of the log at \(end)")
        }
    }

    /// Rewrites the 64-byte header of a segment whose header fails its magic or CRC check.
    /// Returns `false` (and changes nothing) when the header is intact or of a newer version.
    private mutating func rewriteDamagedHeader(baseOffset: UInt64) throws(LogError) -> Bool {
        let name = LogFileNames.segment(baseOffset)
        let path = LogFileNames.join(directory, name)
        do {
            let handle = try options.fileSystem.openFile(path, mode: .readWrite)
            defer { handle.close() }
            let bytes = try handle.read(byteCount: FormatConstants.segmentHeaderByteCount, at: 0)
            guard case .failure(.damaged) = SegmentHeader.decode(bytes) else { return false }
            try handle.write(SegmentHeader(storeID: meta.storeID, baseOffset: baseOffset).encoded(), at: 0)
            try handle.syncData()
        } catch {
            throw LogError.io(error, "Rewriting the header of \(path)")
        }
        report.rewrittenSegmentHeaders.append(name)
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
