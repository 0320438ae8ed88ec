import Foundation
import Synchronization
import LogStoreTestSupport
import Testing

@testable import LogStoreEngine

/// The coordination file and a read-only log following a writer (D11 as built). Here the writer
/// and the reader are two opens on one simulated file system, which is what two processes share;
/// the tests with real processes are in LogStoreTests/ProcessesTests.swift.
@Suite struct SharedEndTests {
    @Test func theSlotRoundTripsAndAnyDamagedByteIsRefused() {
        let slot = SharedEnd(
            storeID: UUID(), epoch: 7, changeCounter: 3, lastSegmentBaseOffset: 100, visibleEnd: 4242, isFailed: true)
        let bytes = slot.encoded()
        #expect(bytes.count == SharedEnd.byteCount)
        #expect(SharedEnd.decode(bytes) == slot)
        for index in bytes.indices {
            var damaged = bytes
            damaged[index] ^= 0x10
            #expect(SharedEnd.decode(damaged) == nil, "byte \(index)")
        }
        #expect(SharedEnd.decode([UInt8](repeating: 0, count: SharedEnd.byteCount)) == nil)
    }

    @Test func aReadOnlyLogFollowsTheWriterAcrossRollsAndShowsOnlyDurableRecords() throws {
        let fileSystem = SimulatedFileSystem()
        let writer = try Log.open(directory: storePath, options: simulatedOptions(fileSystem, segmentByteCountMax: 2048))
        try writer.append(Array("first".utf8))
        let reader = try Log.openReadOnly(directory: storePath, fileSystem: fileSystem)
        #expect(try readAll(reader).map(\.payload) == [Array("first".utf8)])
        #expect(try reader.refresh() == false)
        for number in 0..<40 { try writer.append(Array("record \(number) ".utf8) + [UInt8](repeating: 5, count: 80)) }
        #expect(writer.segmentBaseOffsets.count > 2)
        #expect(try reader.refresh())
        #expect(reader.visibleEnd == writer.visibleEnd)
        #expect(reader.segmentBaseOffsets == writer.segmentBaseOffsets)
        #expect(try readAll(reader).map(\.payload) == (try readAll(writer)).map(\.payload))
        #expect(try readAll(reader).count == 41)
        // Written but not synced: not published, not shown.
        let inFlight = try writer.write(Array("in flight".utf8))
        #expect(try reader.refresh() == false)
        #expect(reader.visibleEnd == inFlight.offset)
        try writer.waitUntilDurable(inFlight)
        #expect(try reader.refresh())
        #expect(try readAll(reader).last?.payload == Array("in flight".utf8))
        #expect(logError { try reader.append([1]) }?.code == .readOnly)
        try writer.close()
        try reader.close()
    }

    @Test func aReadOnlyOpenShowsWhatTheFilesHoldThenFollowsOncePastIt() throws {
        let fileSystem = SimulatedFileSystem()
        let writer = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        try writer.append(Array("durable".utf8))
        let unsynced = try writer.write(Array("not yet".utf8))
        // Like a crashed writer's unsynced records, which its next open keeps: shown.
        let reader = try Log.openReadOnly(directory: storePath, fileSystem: fileSystem)
        #expect(reader.visibleEnd == unsynced.endOffset)
        #expect(reader.recoveryReport.unreadTail == nil)
        #expect(try reader.refresh() == false)
        try writer.waitUntilDurable(unsynced)
        #expect(try reader.refresh() == false)
        try writer.append(Array("next".utf8))
        #expect(try reader.refresh())
        #expect(try readAll(reader).map(\.payload).last == Array("next".utf8))
        try writer.close()
        try reader.close()
    }

    @Test func aWriterThatReopensKeepsTheEpochAndTheReaderGoesOn() throws {
        let fileSystem = SimulatedFileSystem()
        try {
            let writer = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
            try writer.append(Array("one".utf8))
            try writer.close()
        }()
        let reader = try Log.openReadOnly(directory: storePath, fileSystem: fileSystem)
        let writer = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        try writer.append(Array("two".utf8))
        #expect(try reader.refresh())
        #expect(try readAll(reader).map(\.payload) == [Array("one".utf8), Array("two".utf8)])
        try writer.close()
        try reader.close()
    }

    @Test func aRepairMovesTheEpochAndTheReaderMustReopen() throws {
        let fileSystem = SimulatedFileSystem()
        try {
            let writer = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
            try writer.append(Array("one".utf8))
            try writer.close()
        }()
        let reader = try Log.openReadOnly(directory: storePath, fileSystem: fileSystem)
        var options = simulatedOptions(fileSystem)
        options.repairs = true
        let writer = try Log.open(directory: storePath, options: options)
        try writer.append(Array("two".utf8))
        let error = logError { try reader.refresh() }
        #expect(error?.code == .reopenRequired)
        #expect(error?.message.contains("Open it again") == true)
        try writer.close()
        try reader.close()
    }

    @Test func aRecordThatDoesNotCheckOutBeforeThePublishedEndIsCorruption() throws {
        let fileSystem = SimulatedFileSystem()
        let writer = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        try writer.append(Array("one".utf8))
        let reader = try Log.openReadOnly(directory: storePath, fileSystem: fileSystem)
        let second = try writer.append([UInt8](repeating: 7, count: 200))
        let position = SegmentScanner.filePosition(logicalOffset: second.offset, baseOffset: 0)
        try fileSystem.corruptByte(at: Int(position) + FormatConstants.recordHeaderByteCount, in: segmentPath(0), mask: 0x01)
        let error = logError { try reader.refresh() }
        #expect(error?.code == .corruption)
        #expect(error?.offset == second.offset)
        #expect(reader.visibleEnd == second.offset)
        try writer.close()
        try reader.close()
    }

    @Test func aFailedSyncPublishesTheFailureAndMovesTheEpoch() throws {
        let fileSystem = SimulatedFileSystem()
        let writer = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        try writer.append(Array("one".utf8))
        let reader = try Log.openReadOnly(directory: storePath, fileSystem: fileSystem)
        fileSystem.failSync()
        #expect(logError { try writer.append(Array("two".utf8)) }?.code == .syncFailed)
        let slot = try #require(CoordinationFile.openForReading(directory: storePath, fileSystem: fileSystem)?.read())
        #expect(slot.isFailed)
        // A reader may have seen what the cut-back removed: it must open again.
        #expect(logError { try reader.refresh() }?.code == .reopenRequired)
        try? writer.close()
        try reader.close()
    }

    /// Review F1: a follow that opened the writer's new segments and then found a bad record kept
    /// them, past the durable end it did not move, and the next close() stopped on the invariant.
    @Test func aFailedFollowKeepsNoSegmentItOpenedAndTheReaderStillCloses() throws {
        let fileSystem = SimulatedFileSystem()
        let writer = try Log.open(directory: storePath, options: simulatedOptions(fileSystem, segmentByteCountMax: 2048))
        try writer.append(Array("first".utf8))
        let reader = try Log.openReadOnly(directory: storePath, fileSystem: fileSystem)
        let readerEnd = reader.visibleEnd
        for number in 0..<40 { try writer.append(Array("record \(number) ".utf8) + [UInt8](repeating: 5, count: 80)) }
        #expect(writer.segmentBaseOffsets.count > 2)
        let position = SegmentScanner.filePosition(logicalOffset: readerEnd, baseOffset: 0)
        try fileSystem.corruptByte(at: Int(position) + FormatConstants.recordHeaderByteCount + 4, in: segmentPath(0), mask: 0x01)
        #expect(logError { try reader.refresh() }?.code == .corruption)
        #expect(reader.segmentBaseOffsets == [0])
        #expect(reader.visibleEnd == readerEnd)
        #expect(logError { try reader.refresh() }?.code == .corruption)
        #expect(reader.segmentBaseOffsets == [0])
        try reader.close()
        try writer.close()
    }

    /// Review F2: a reader that fell behind the writer's history deletion (the segments after the
    /// one it was reading were deleted before it opened them) reported corruption and pointed at
    /// `logstore repair`, though nothing is damaged: it must open again.
    @Test func aReaderBehindHistoryDeletionMustReopenNotRepair() throws {
        let fileSystem = SimulatedFileSystem()
        let writer = try Log.open(directory: storePath, options: simulatedOptions(fileSystem, segmentByteCountMax: 2048))
        try writer.append(Array("first".utf8))
        let reader = try Log.openReadOnly(directory: storePath, fileSystem: fileSystem)
        for number in 0..<40 { try writer.append(Array("record \(number) ".utf8) + [UInt8](repeating: 5, count: 80)) }
        let bases = writer.segmentBaseOffsets
        #expect(bases.count >= 3)
        #expect(try writer.deleteSegments(endingAtOrBefore: bases[2]) == [bases[0], bases[1]])
        for _ in 0..<2 {
            let error = logError { try reader.refresh() }
            #expect(error?.code == .reopenRequired)
            #expect(error?.message.contains("deleted history") == true)
            #expect(reader.segmentBaseOffsets == [0])
        }
        try reader.close()
        let reopened = try Log.openReadOnly(directory: storePath, fileSystem: fileSystem)
        #expect(reopened.segmentBaseOffsets == Array(bases.dropFirst(2)))
        try reopened.close()
        try writer.close()
    }

    /// Review F4: the inotify watch on the coordination file was armed on the watcher's thread,
    /// after it started: a publication in between was never signalled (1–3 in 20 here). Each
    /// round makes a watcher and publishes at once; the watcher must bring the reader there. The
    /// wait is a bound for a missed signal, not a measurement.
    @Test func aPublicationRightAfterTheWatcherIsMadeIsSignalled() throws {
        let temporary = TemporaryDirectory("watch")
        defer { temporary.remove() }
        var options = LogOptions()
        options.durableEndMarkDelay = nil
        let writer = try Log.open(directory: temporary.path, options: options)
        try writer.append(Array("first".utf8))
        let reader = try Log.openReadOnly(directory: temporary.path)
        for round in 0..<20 {
            let watcher = reader.watchForChanges { _ = try? reader.refresh() }
            #if os(Linux)
                #expect(watcher.mechanism == .inotify)
            #endif
            let record = try writer.append(Array("round \(round)".utf8))
            var waited = 0
            // Bounded: 30 s at most.
            while reader.visibleEnd < record.endOffset && waited < 3000 {
                Thread.sleep(forTimeInterval: 0.01)
                waited += 1
            }
            #expect(reader.visibleEnd == record.endOffset, "round \(round)")
            watcher.cancel()
        }
        try reader.close()
        try writer.close()
    }

    /// Review F5: a writer failing while a reader checks records it published cuts them back;
    /// the reader saw a bad record and reported corruption (pointing at repair). The writer now
    /// publishes the new epoch before it cuts back, and a reader that finds a bad record reads the
    /// slot again: a moved epoch means the records were cut back — reopen, not repair. Here the
    /// reader is parked while opening the writer's next segment; meanwhile a record it will check
    /// goes bad and the epoch moves, as a failing writer does.
    @Test func aRecordGoneWhileTheWriterFailedMeansReopenNotCorruption() throws {
        let base = SimulatedFileSystem()
        let gated = GatedFileSystem(base, gatedSuffix: ".log")
        let writer = try Log.open(directory: storePath, options: simulatedOptions(base, segmentByteCountMax: 2048))
        try writer.append(Array("first".utf8))
        let reader = try Log.openReadOnly(directory: storePath, fileSystem: gated)
        let readerEnd = reader.visibleEnd
        for number in 0..<40 { try writer.append(Array("record \(number) ".utf8) + [UInt8](repeating: 5, count: 80)) }
        #expect(writer.segmentBaseOffsets.count > 1)
        gated.arm()
        let outcome = Mutex<(done: Bool, error: LogError?)>((false, nil))
        let following = Thread {
            let error = logError { try reader.refresh() }
            outcome.withLock { $0 = (true, error) }
        }
        following.start()
        gated.waitUntilParked()
        let position = SegmentScanner.filePosition(logicalOffset: readerEnd, baseOffset: 0)
        try base.corruptByte(at: Int(position) + FormatConstants.recordHeaderByteCount + 4, in: segmentPath(0), mask: 0x01)
        let coordination = try CoordinationFile.openForWriting(directory: storePath, fileSystem: base)
        var slot = try #require(coordination.read())
        slot.epoch &+= 1
        slot.isFailed = true
        coordination.write(slot)
        coordination.close()
        gated.open()
        // Bounded: the reader finishes its refresh once the gate is open.
        while !outcome.withLock({ $0.done }) { Thread.sleep(forTimeInterval: 0.001) }
        let error = try #require(outcome.withLock { $0.error })
        #expect(error.code == .reopenRequired)
        #expect(error.message.contains("Open it again"))
        #expect(reader.segmentBaseOffsets == [0])
        try reader.close()
        try? writer.close()
    }
}
