import Foundation

/// Several processes, one store (DECISIONS.md D11, as built: one writing process, any number of
/// read-only ones). The writer publishes its visible end in the coordination file; a read-only
/// open follows it: one `pread` tells whether anything is new, and only then are the new records
/// read and checked.
extension LogCore {
    /// In the non-synchronous modes the visible end moves at every write: it is published at most
    /// once per millisecond (the syncer publishes the last move of a burst), so a reader learns of a
    /// write within about a millisecond and the writer pays one `pwrite` per millisecond, not per
    /// record.
    static let sharedPublishIntervalNanoseconds: UInt64 = 1_000_000

    // MARK: The writer

    /// Opens the coordination file of a writer that just recovered the log to `end` (lock held by
    /// the caller's exclusive ownership of the new core) and publishes that end. The epoch carries
    /// on when the old slot is this store's and does not claim more than recovery found: readers
    /// that followed the previous writer then go on. Otherwise (a repair, a damaged or foreign
    /// slot, or a slot past the recovered end) it moves, and those readers must reopen.
    func startPublishing(repaired: Bool) throws(LogError) {
        let coordination = try CoordinationFile.openForWriting(
            directory: directory, fileSystem: fileSystem, mapsSlots: writers != nil)
        let previous = coordination.read()
        let end = state.durableEnd
        let keepsEpoch =
            !repaired && previous.map { $0.storeID == meta.storeID && $0.visibleEnd <= end && !$0.isFailed } ?? false
        let epoch = keepsEpoch ? previous!.epoch : (previous?.epoch ?? UInt64.random(in: 1..<(1 << 62))) &+ 1
        state.coordination = coordination
        state.shared = SharedEnd(
            storeID: meta.storeID, epoch: epoch, changeCounter: previous?.changeCounter ?? 0,
            lastSegmentBaseOffset: state.segments.last!.baseOffset, visibleEnd: end,
            maintenanceCounter: previous?.maintenanceCounter ?? 0)
        if writers != nil {
            // A store shared by writers, opened by a process that is alone: both slots rebuilt
            // (slot 1 states the durable end, D11 stage 2).
            // Both writes must succeed: the other writers depend on them (review12 A2).
            state.shared!.changeCounter &+= 1
            try coordination.writeChecked(state.shared!)
            state.turnCounter = (coordination.readTurn()?.turnCounter ?? 0) &+ 1
            try coordination.writeTurn(
                TurnSlot(
                    storeID: meta.storeID, writtenEnd: state.writtenEnd,
                    lastSegmentBaseOffset: state.segments.last!.baseOffset, turnCounter: state.turnCounter))
            state.publishedTurnEnd = state.writtenEnd
            state.publishedTurnBase = state.segments.last!.baseOffset
            return
        }
        publishSharedLocked(force: true)
    }

    /// The writer moved the history low-water mark (a checkpoint records it): readers reload it.
    /// In a store shared by writers the counter is bumped in slot 1 under `SYNC` (its only
    /// writer), and the other writers reload it too.
    func publishMaintenance() throws(LogError) {
        if let writers { return try publishMaintenanceShared(writers) }
        conditionLock.withLock {
            guard directoryLock != nil, writers == nil, state.shared != nil, !state.isClosed else { return }
            state.shared!.maintenanceCounter &+= 1
            publishSharedLocked(force: true)
        }
    }

    /// ``publishMaintenance()`` of a store shared by writers: read, bump and write slot 1 under
    /// `SYNC` (no other lock held), keeping everything else in it as read.
    private func publishMaintenanceShared(_ writers: SharedWriters) throws(LogError) {
        let coordination: CoordinationFile? = conditionLock.withLock {
            state.isClosed || state.isReadOnly ? nil : state.coordination
        }
        guard let coordination else {
            throw LogError(.readOnly, "The log is closed or read-only: the maintenance counter was not moved.",
                file: directory)
        }
        try writers.sync.acquire(for: "tell the other processes that history was deleted")
        defer { writers.sync.release() }
        guard var slot = coordination.read(), slot.storeID == meta.storeID, !slot.isFailed else {
            throw LogError(
                .syncFailed,
                "The coordination file's slot of \(directory) could not be read (or says a process failed): the "
                    + "other processes were not told that history was deleted.",
                file: CoordinationFile.path(in: directory))
        }
        slot.maintenanceCounter &+= 1
        slot.changeCounter &+= 1
        try coordination.writeChecked(slot)
        conditionLock.withLock {
            if state.shared?.epoch == slot.epoch { state.shared?.maintenanceCounter = slot.maintenanceCounter }
        }
    }

    /// A reader: the maintenance counter of the slot it followed last.
    var followedMaintenanceCounter: UInt64 {
        conditionLock.withLock { state.shared?.maintenanceCounter ?? 0 }
    }

    /// Writes the slot (lock held) when the visible end, the last segment or the failure moved
    /// since the last publication (or when forced).
    func publishSharedLocked(force: Bool = false) {
        guard writers == nil, let coordination = state.coordination, var slot = state.shared, !state.isReadOnly
        else { return }
        let end = visibleEndLocked
        let base = min(state.segments.last!.baseOffset, end)
        let failed = state.failure != nil
        state.sharedPublishPending = false
        guard force || slot.visibleEnd != end || slot.lastSegmentBaseOffset != base || slot.isFailed != failed else {
            return
        }
        slot.visibleEnd = end
        slot.lastSegmentBaseOffset = base
        slot.isFailed = failed
        slot.changeCounter &+= 1
        coordination.write(slot)
        state.shared = slot
        state.lastSharedPublishNanoseconds = monotonicNanoseconds()
    }

    /// After a write in a non-synchronous mode (lock held): publish now, or leave it to the syncer
    /// when the last publication was less than a millisecond ago.
    func publishWrittenEndLocked(now: UInt64) {
        guard writers == nil, state.coordination != nil else { return }
        if now &- state.lastSharedPublishNanoseconds >= Self.sharedPublishIntervalNanoseconds {
            publishSharedLocked()
        } else if !state.sharedPublishPending {
            state.sharedPublishPending = true
            conditionLock.signalSyncer()
        }
    }

    /// Nanoseconds until a pending publication is due (0: now), or `nil` when none is pending.
    var sharedPublishDelayNanoseconds: UInt64? {
        guard state.sharedPublishPending else { return nil }
        let elapsed = monotonicNanoseconds() &- state.lastSharedPublishNanoseconds
        return elapsed >= Self.sharedPublishIntervalNanoseconds ? 0 : Self.sharedPublishIntervalNanoseconds - elapsed
    }

    /// A fail-stop is about to cut the log back to the durable end (lock held). A reader may have
    /// seen records it removes (in the non-synchronous modes they were published; in any mode a
    /// read-only open shows what the files hold, which a crashed writer's next open keeps): the
    /// epoch moves and readers reopen. Published before the cut-back, so a reader that finds
    /// records gone past the end it read finds the new epoch too (followShared re-reads the slot).
    func publishFailingLocked() {
        guard writers == nil, let coordination = state.coordination, var slot = state.shared, !state.isReadOnly
        else { return }
        let end = state.durableEnd
        slot.epoch &+= 1
        slot.visibleEnd = end
        slot.lastSegmentBaseOffset = min(state.segments.last!.baseOffset, end)
        slot.isFailed = true
        slot.changeCounter &+= 1
        coordination.write(slot)
        state.shared = slot
        state.sharedPublishPending = false
        state.lastSharedPublishNanoseconds = monotonicNanoseconds()
    }

    // MARK: A read-only open

    /// At a read-only open, before the directory is listed: the slot a live writer published. Every
    /// record before its visible end was written (and, in synchronous mode, synced) before it was
    /// published, so the scan that follows finds them all.
    static func readSharedEnd(directory: String, fileSystem: any FileSystem, storeID: UUID)
        -> (CoordinationFile, SharedEnd?)?
    {
        guard let coordination = CoordinationFile.openForReading(directory: directory, fileSystem: fileSystem) else {
            return nil
        }
        return (coordination, coordination.read().flatMap { $0.storeID == storeID ? $0 : nil })
    }


    /// A read-only log: reads the coordination slot and, when the writer published a visible end
    /// past this log's, opens the segments it rolled to, checks every new record (CRCs, offsets)
    /// and moves the visible end there. Returns whether it moved. When nothing is new this is one
    /// `pread` of 80 bytes.
    ///
    /// Throws ``LogError/Code/reopenRequired`` when the writer's epoch moved (a repair, or a cut-back
    /// in a non-synchronous mode: records this log showed may be gone), and
    /// ``LogError/Code/corruption`` when a record before the published end does not check out.
    func followShared() throws(LogError) -> Bool {
        conditionLock.lock()
        defer { conditionLock.unlock() }
        guard directoryLock == nil, !state.isClosed else { return false }
        if state.coordination == nil {
            state.coordination = CoordinationFile.openForReading(directory: directory, fileSystem: fileSystem)
        }
        guard let coordination = state.coordination, let bytes = coordination.readBytes(),
            !Self.sameBytes(bytes, state.sharedBytes), let slot = coordination.read(), slot.storeID == meta.storeID
        else { return false }
        if let followed = state.shared, followed.epoch != slot.epoch {
            throw LogError(
                .reopenRequired,
                "The store at \(directory) was repaired, or cut back after a failed sync, by the process "
                    + "writing it: records this read-only open showed may be gone. Open it again.",
                file: CoordinationFile.path(in: directory))
        }
        // Remembered only once followed: after an error the next call reads and throws again.
        func remember() {
            state.shared = slot
            state.sharedBytes = slot.encoded()
        }
        guard slot.visibleEnd > state.durableEnd else {
            remember()
            return false
        }
        let segmentCount = state.segments.count
        do throws(LogError) {
            try openSegments(through: slot.lastSegmentBaseOffset)
            try checkRecords(through: slot.visibleEnd)
        } catch {
            // Nothing of a failed follow stays: the last segment must start at or before the
            // durable end (checkInvariants, which close() runs), and the next call lists the
            // directory again.
            for segment in state.segments[segmentCount...] { segment.handle.close() }
            state.segments.removeSubrange(segmentCount...)
            // A writer failing meanwhile publishes its new epoch before it cuts records back:
            // what looks like damage is that cut-back, not corruption.
            if error.code == .corruption, let now = coordination.read(), now.storeID == meta.storeID,
                now.epoch != slot.epoch
            {
                throw LogError(
                    .reopenRequired,
                    "The store at \(directory) was cut back after a failed sync by the process writing it "
                        + "while this read-only open read it: records it was reading are gone. Open it again.",
                    file: CoordinationFile.path(in: directory))
            }
            throw error
        }
        remember()
        state.writtenEnd = slot.visibleEnd
        state.durableEnd = slot.visibleEnd
        state.syncRequestedEnd = slot.visibleEnd
        checkInvariants()
        return true
    }

    private static func sameBytes(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        lhs.count == rhs.count
            && lhs.withUnsafeBytes { left in rhs.withUnsafeBytes { memcmp(left.baseAddress!, $0.baseAddress!, left.count) == 0 } }
    }

    /// Opens (read-only, header checked; for writing in a store shared by writers) the segments the
    /// writer rolled to, up to `lastBase`.
    func openSegments(through lastBase: UInt64, writable: Bool = false) throws(LogError) {
        let known = state.segments.last!.baseOffset
        guard lastBase > known else { return }
        let bases = try Self.listDirectory(directory, fileSystem).compactMap(LogFileNames.segmentBaseOffset)
            .filter { $0 > known && $0 <= lastBase }.sorted()
        guard bases.last == lastBase else {
            throw LogError.corruption(
                LogFileNames.join(directory, LogFileNames.segment(lastBase)), offset: lastBase,
                "the writer published segment \(LogFileNames.segment(lastBase)) as its last, but it is not in the "
                    + "directory")
        }
        let recovery = Recovery(
            directory: directory, meta: meta, options: options, writable: false, report: RecoveryReport())
        for base in bases {
            state.segments.append(try recovery.openSegment(baseOffset: base, writable: writable))
        }
    }

    /// Whether `segment` ending at `offset`, with later segments open but not the one starting
    /// there, is history deletion rather than damage: the writer deleted the leading segments up
    /// to and including this one (it is no longer in the directory; this log still reads it
    /// through its open handle).
    private func fellBehindDeletion(reading segment: SegmentFile, at offset: UInt64) throws(LogError) -> Bool {
        guard state.segments.contains(where: { $0.baseOffset > offset }) else { return false }
        return !(try Self.listDirectory(directory, fileSystem).contains {
            LogFileNames.segmentBaseOffset($0) == segment.baseOffset
        })
    }

    /// Reads and checks every record from the visible end to `target`, noting each in its
    /// segment's index; they must end exactly at `target`.
    /// Returns the type of the last record it read (`nil`: none).
    @discardableResult
    func checkRecords(from start: UInt64? = nil, through target: UInt64) throws(LogError) -> RecordType? {
        var lastType: RecordType?
        var offset = start ?? state.durableEnd
        // Bounded: every pass moves `offset` past a record or throws.
        while offset < target {
            let segment = state.segments.last { $0.baseOffset <= offset }!
            var scanner = SegmentScanner(
                segment: segment,
                position: SegmentScanner.filePosition(logicalOffset: offset, baseOffset: segment.baseOffset))
            scan: while offset < target {
                switch try scanner.next(decodesPayload: false) {
                case .record(let record):
                    lastType = record.type
                    // A read-only open noted records up to the end it showed; never note twice.
                    if record.offset >= segment.endOffset { segment.note(record) }
                    offset = record.endOffset
                    guard offset <= target else {
                        throw LogError.corruption(
                            segment.path, offset: record.offset,
                            "the record at offset \(record.offset) ends at \(offset), past the end the writer "
                                + "published (\(target))")
                    }
                case .end where state.segments.contains(where: { $0.baseOffset == offset && $0 !== segment }):
                    break scan  // the next segment starts here
                case .end where try fellBehindDeletion(reading: segment, at: offset):
                    // The writer deleted history (D6: leading segments) past this segment before
                    // this reader opened the next one: the records it would fold are gone. Not
                    // damage — the store is fine, this open fell behind.
                    throw LogError(
                        .reopenRequired,
                        "A process writing \(directory) deleted history this process had not read yet "
                            + "(the records from offset \(offset) on, in a segment deleted before it was read). "
                            + "Open the store again.", file: directory, offset: offset)
                case .end:
                    throw LogError.corruption(
                        segment.path, offset: offset,
                        "no record at offset \(offset), before the end the writer published (\(target))")
                case .bad(let reason, _), .unsupported(let reason):
                    throw LogError.corruption(
                        segment.path, offset: offset,
                        "\(reason), before the end the writer published (\(target))")
                }
            }
        }
        return lastType
    }
}
