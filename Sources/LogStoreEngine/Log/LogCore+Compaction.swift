extension LogCore {
    /// Deletes, oldest first, the segments whose records all end at or before `endOffset` —
    /// never the last segment — and returns their base offsets (DECISIONS.md D6).
    ///
    /// The segments leave the in-memory list first (new readers never see them; a reader that
    /// already holds one keeps its open descriptor until it is done). Then, per segment: unlink
    /// its index, unlink the segment, fsync the directory. A power cut at any point leaves a
    /// prefix of them deleted: the log still starts at a segment base and every kept segment
    /// ends where the next begins. An index left without its segment is removed at the next open.
    func deleteSegments(endingAtOrBefore endOffset: UInt64) throws(LogError) -> [UInt64] {
        let doomed = try conditionLock.withLock { () throws(LogError) -> [SegmentFile] in
            guard !state.isClosed else { throw LogError(.closed, "The log is closed.", file: directory) }
            guard !state.isReadOnly else {
                throw LogError(.readOnly, "The log is open read-only; history cannot be compacted.", file: directory)
            }
            return takeSegmentsLocked(endingAtOrBefore: endOffset)
        }
        if writers != nil { return try deleteSegmentFiles(endingAtOrBefore: endOffset) }
        var deleted: [UInt64] = []
        for (position, segment) in doomed.enumerated() {
            do throws(FileSystemError) {
                let indexPath = path(LogFileNames.index(segment.baseOffset))
                if (try? fileSystem.kind(of: indexPath)) != nil { try fileSystem.removeFile(indexPath) }
                // Already gone when an earlier attempt's directory fsync failed after the unlink.
                if (try? fileSystem.kind(of: segment.path)) != nil { try fileSystem.removeFile(segment.path) }
                try fileSystem.syncDirectory(directory)
            } catch {
                // Not deleted (or its deletion not durable): the log still starts there, and the
                // next compaction (or open) tries again. Rolls only append, so the front is ours.
                let kept = Array(doomed[position...])
                conditionLock.withLock { state.segments.insert(contentsOf: kept, at: 0) }
                throw LogError.io(
                    error,
                    "Deleting segment \(segment.path) (history compaction; the segments before "
                        + "it are deleted, it and later ones are kept until the next compaction or open)")
            }
            deleted.append(segment.baseOffset)
        }
        return deleted
    }

    /// A store shared by writers (`MAINTENANCE` held by the caller): the segment files to delete
    /// come from the directory, not from this process's list — another process may have forgotten
    /// segments that a pass cut short left (killed, a failed unlink), and this process's list may
    /// not reach the last segment yet (another rolled): every file whose successor in the
    /// directory starts at or before `endOffset` goes, lowest first, never the directory's last.
    /// A crash or failure leaves a prefix deleted, and the next pass (any process's) or an open
    /// alone deletes the rest: no gap is ever left between kept segments (review of 2dddcf6, 1).
    private func deleteSegmentFiles(endingAtOrBefore endOffset: UInt64) throws(LogError) -> [UInt64] {
        let bases = try Self.listDirectory(directory, fileSystem).compactMap(LogFileNames.segmentBaseOffset).sorted()
        var deleted: [UInt64] = []
        for (index, base) in bases.enumerated() where index + 1 < bases.count && bases[index + 1] <= endOffset {
            let segmentPath = path(LogFileNames.segment(base))
            do throws(FileSystemError) {
                let indexPath = path(LogFileNames.index(base))
                if (try? fileSystem.kind(of: indexPath)) != nil { try fileSystem.removeFile(indexPath) }
                try fileSystem.removeFile(segmentPath)
                try fileSystem.syncDirectory(directory)
            } catch {
                throw LogError.io(
                    error,
                    "Deleting segment \(segmentPath) (history compaction; the segments before it are deleted, it "
                        + "and later ones are kept until the next compaction or an open alone)")
            }
            deleted.append(base)
        }
        return deleted
    }

    /// Removes from the list the segments whose records all end at or before `endOffset`, never
    /// the last: ``Log/forgetSegments(endingAtOrBefore:)``. Nothing on disk changes.
    func takeSegments(endingAtOrBefore endOffset: UInt64) throws(LogError) -> [SegmentFile] {
        try conditionLock.withLock { () throws(LogError) -> [SegmentFile] in
            guard !state.isClosed else { throw LogError(.closed, "The log is closed.", file: directory) }
            return takeSegmentsLocked(endingAtOrBefore: endOffset)
        }
    }

    /// Removes from the list (lock held) the segments whose records all end at or before
    /// `endOffset`, never the last, once no index write of theirs is in flight.
    private func takeSegmentsLocked(endingAtOrBefore endOffset: UInt64) -> [SegmentFile] {
        var count = 0
        // Bounded: each pass either waits for the syncer's one index write or ends.
        while true {
            count = 0
            // Segment i's records end where segment i + 1 begins.
            while count + 1 < state.segments.count, state.segments[count + 1].baseOffset <= endOffset { count += 1 }
            // The syncer writes an index outside the lock: let it finish, or the index it
            // renames into place after our unlink would outlive its segment.
            guard let inFlight = state.indexWriteInFlight,
                state.segments.prefix(count).contains(where: { $0.baseOffset == inFlight })
            else { break }
            conditionLock.waitWaiter()
        }
        let doomed = Array(state.segments.prefix(count))
        state.segments.removeFirst(count)
        let bases = Set(doomed.map(\.baseOffset))
        state.pendingIndexWrites.removeAll { bases.contains($0.baseOffset) }
        return doomed
    }
}
