/// What opening a log found and did. Read it after ``Log/open(directory:options:)``.
public struct RecoveryReport: Sendable, Equatable {
    /// A record that recovery (or repair) dropped.
    public struct DroppedRecord: Sendable, Hashable, CustomStringConvertible {
        /// Logical offset where the dropped bytes start.
        public var offset: UInt64
        /// Bytes dropped from there.
        public var byteCount: UInt64
        /// Why: what was wrong with the record.
        public var reason: String
        /// The segment file it was in.
        public var file: String

        public var description: String { "\(byteCount) bytes at offset \(offset) in \(file): \(reason)" }
    }

    /// Whether a new store was created by this open.
    public var createdStore = false
    /// The logical offset the log was cut back to, when a torn tail (or repair) cut it.
    public var truncatedAt: UInt64?
    /// The records dropped from a torn tail (or by repair), in log order.
    public var droppedRecords: [DroppedRecord] = []
    /// Segment files repair deleted (they followed the first bad record).
    public var deletedSegments: [String] = []
    /// Checkpoint files repair deleted (they lay beyond the new end).
    public var deletedCheckpoints: [String] = []
    /// Temporary files left by a crash and removed.
    public var removedTemporaryFiles: [String] = []
    /// Files that are not part of the format; left alone.
    public var unknownFiles: [String] = []
    /// Sparse index files that were missing or invalid and were rebuilt.
    public var rebuiltIndexes: [String] = []
    /// For a read-only open: the bytes after the last good record of the last segment that are not
    /// zeros, which the read treated as the end (a writer's torn tail, damage, or an append still
    /// in flight beside a live writer). `nil` when only zeros follow.
    public var unreadTail: DroppedRecord?
    /// Repair rebuilt a damaged store.meta from the segment headers.
    public var rebuiltStoreMeta = false
    /// Segments whose damaged header repair rewrote (every field is known: the store's UUID, the
    /// base offset in the file name, the format version); their records were kept.
    public var rewrittenSegmentHeaders: [String] = []
    /// Repair only: the folder inside the store directory (`repair-<UTC time>`) holding every file
    /// repair changed or dropped, as it was before; `nil` when repair changed nothing.
    public var setAsideDirectory: String?
    /// Repair only: the names of the files in ``setAsideDirectory`` (copied before a change in
    /// place, or moved there instead of being deleted). Copying them back undoes the repair.
    public var setAsideFiles: [String] = []
    /// Repair only: what repair did and dropped that ``droppedRecords`` does not say, one sentence
    /// each (a checkpoint set aside and why, a segment header rewritten as version N, store.meta
    /// rebuilt, what the store can no longer rebuild).
    public var repairNotes: [String] = []

    public init() {}

    /// True when repair changed anything on disk: what the `logstore repair` command should test
    /// before saying there was nothing to repair (a checkpoint set aside or a store.meta rebuilt
    /// leaves ``truncatedAt`` `nil`).
    public var repairedAnything: Bool {
        truncatedAt != nil || droppedAnything || rebuiltStoreMeta || !rewrittenSegmentHeaders.isEmpty
            || setAsideDirectory != nil
    }

    /// True when recovery dropped or deleted anything.
    public var droppedAnything: Bool {
        !droppedRecords.isEmpty || !deletedSegments.isEmpty || !deletedCheckpoints.isEmpty
    }
}
