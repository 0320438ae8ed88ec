import Foundation
import LogStoreTestSupport
import Testing

@testable import LogStoreEngine

/// Issue 14, item 7: every error that sends the user to `logstore repair` is produced here, then
/// repair runs, and the store opens with what the test says is kept. Repair keeps every file it
/// changes or drops, as it was, in the store's `repair-<UTC time>` folder, and says what it dropped.
///
/// The errors that name repair: `LogError.corruption` (every engine corruption: store.meta missing
/// or oversized, segment headers, sealed segments, the last segment's refusals, reads, record
/// files such as checkpoints) and `LogCore.readMeta`'s "`logstore repair` rebuilds store.meta";
/// `verify`'s two refusal explanations name it too.
@Suite struct RepairCoverageTests {
    // MARK: Helpers

    /// A closed store of 30 records in segments of about 1 KiB, loaded into a fresh file system.
    static func store() throws -> (SimulatedFileSystem, records: [LogRecord], bases: [UInt64]) {
        let (files, records, bases) = try CorruptionTests.makeStore()
        let fileSystem = SimulatedFileSystem()
        for (path, bytes) in files { try fileSystem.setBytes(bytes, at: path) }
        return (fileSystem, records, bases)
    }

    /// Every file of the store directory (not the repair folder) and its bytes.
    static func snapshot(_ fileSystem: SimulatedFileSystem) -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        for name in fileSystem.fileNames(in: storePath) {
            if let bytes = fileSystem.bytes(at: storePath + "/" + name) { files[name] = bytes }
        }
        return files
    }

    /// Opens for writing without repair; the error, or nil when it opened.
    static func plainOpenError(_ fileSystem: SimulatedFileSystem) -> LogError? {
        logError { try Log.open(directory: storePath, options: simulatedOptions(fileSystem)).close() }
    }

    /// Runs repair (an open with `repairs`, then close) and returns its report.
    static func repair(_ fileSystem: SimulatedFileSystem) throws -> RecoveryReport {
        var options = simulatedOptions(fileSystem)
        options.repairs = true
        let log = try Log.open(directory: storePath, options: options)
        let report = log.recoveryReport
        try log.close()
        return report
    }

    /// The records of a plain open after repair (which must succeed and report nothing dropped).
    static func recordsAfterRepair(_ fileSystem: SimulatedFileSystem) throws -> [LogRecord] {
        let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        defer { try? log.close() }
        #expect(!log.recoveryReport.droppedAnything, "\(log.recoveryReport)")
        return try readAll(log).filter { $0.type != .durableEndMark }
    }

    /// The bytes repair kept aside for `name`.
    static func keptAside(_ name: String, _ report: RecoveryReport, _ fileSystem: SimulatedFileSystem) -> [UInt8]? {
        guard let folder = report.setAsideDirectory else { return nil }
        return fileSystem.bytes(at: folder + "/" + name)
    }

    static func names(_ error: LogError?) -> Bool {
        error?.code == .corruption && error?.message.contains("logstore repair") == true
    }

    // MARK: store.meta

    /// The folder's time stamp is made with `gmtime_r` (an ICU formatter per repair dominated a
    /// fuzzed repair's cost): it must read exactly as `ISO8601DateFormatter` wrote it before.
    @Test(arguments: [0, 59, 86_399, 951_782_400, 1_700_000_000, 1_764_126_903, 4_102_444_799] as [Int])
    func theRepairFolderStampReadsAsTheISO8601FormatterWroteIt(seconds: Int) {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withYear, .withMonth, .withDay, .withTime, .withTimeZone]
        let expected = formatter.string(from: Date(timeIntervalSince1970: TimeInterval(seconds)))
        #expect(RepairAside.utcStamp(secondsSince1970: time_t(seconds)) == expected)
    }

    @Test func aBitFlipInStoreMetaIsRepairedFromTheSegmentHeadersAndTheDamagedFileIsKeptAside() throws {
        let (fileSystem, records, _) = try Self.store()
        try fileSystem.corruptByte(at: 20, in: storePath + "/store.meta")
        let damaged = fileSystem.bytes(at: storePath + "/store.meta")!
        #expect(Self.names(Self.plainOpenError(fileSystem)))
        let report = try Self.repair(fileSystem)
        #expect(report.rebuiltStoreMeta)
        #expect(report.setAsideFiles == ["store.meta"])
        #expect(Self.keptAside("store.meta", report, fileSystem) == damaged)
        #expect(report.repairNotes.contains { $0.contains("store.meta rebuilt") }, "\(report.repairNotes)")
        #expect(try Self.recordsAfterRepair(fileSystem) == records)
    }

    @Test(arguments: [0, 7, 30, 63])
    func aTruncatedStoreMetaIsRepaired(byteCount: Int) throws {
        let (fileSystem, records, _) = try Self.store()
        let original = try StoreMeta.decode(fileSystem.bytes(at: storePath + "/store.meta")!).get()
        try fileSystem.truncateFile(storePath + "/store.meta", toByteCount: byteCount)
        #expect(Self.names(Self.plainOpenError(fileSystem)))
        let report = try Self.repair(fileSystem)
        #expect(report.rebuiltStoreMeta)
        #expect(Self.keptAside("store.meta", report, fileSystem)?.count == byteCount)
        let rebuilt = try StoreMeta.decode(fileSystem.bytes(at: storePath + "/store.meta")!).get()
        #expect(rebuilt.storeID == original.storeID && rebuilt.formatVersion == original.formatVersion)
        #expect(try Self.recordsAfterRepair(fileSystem) == records)
    }

    /// `readWholeFile`'s "file is N bytes, more than the 4096 allowed".
    @Test func anOversizedStoreMetaIsRepaired() throws {
        let (fileSystem, records, _) = try Self.store()
        try fileSystem.setBytes(
            fileSystem.bytes(at: storePath + "/store.meta")! + [UInt8](repeating: 7, count: 5000),
            at: storePath + "/store.meta")
        let error = Self.plainOpenError(fileSystem)
        #expect(Self.names(error) && error?.message.contains("more than the 4096 allowed") == true, "\(error!)")
        #expect(try Self.repair(fileSystem).rebuiltStoreMeta)
        #expect(try Self.recordsAfterRepair(fileSystem) == records)
    }

    /// Bug: "store.meta is missing but segment files exist" named `logstore repair`, and repair
    /// failed with the same error.
    @Test func repairRecreatesAMissingStoreMetaWhichItUsedToRefuse() throws {
        let (fileSystem, records, _) = try Self.store()
        let original = try StoreMeta.decode(fileSystem.bytes(at: storePath + "/store.meta")!).get()
        try fileSystem.removeFile(storePath + "/store.meta")
        let error = Self.plainOpenError(fileSystem)
        #expect(Self.names(error) && error?.message.contains("store.meta is missing") == true)
        let report = try Self.repair(fileSystem)
        #expect(report.rebuiltStoreMeta)
        #expect(report.repairNotes.contains { $0.contains("store.meta recreated") }, "\(report.repairNotes)")
        #expect(try StoreMeta.decode(fileSystem.bytes(at: storePath + "/store.meta")!).get().storeID == original.storeID)
        #expect(try Self.recordsAfterRepair(fileSystem) == records)
    }

    @Test func aStoreMetaThatNothingCanRebuildIsRefusedWithoutChangingAnything() throws {
        let (fileSystem, _, bases) = try Self.store()
        try fileSystem.corruptByte(at: 20, in: storePath + "/store.meta")
        for base in bases { try fileSystem.corruptByte(at: 20, in: segmentPath(base)) }
        let before = Self.snapshot(fileSystem)
        var options = simulatedOptions(fileSystem)
        options.repairs = true
        let error = logError { try Log.open(directory: storePath, options: options).close() }
        #expect(error?.code == .corruption)
        #expect(error?.message.contains("no segment or checkpoint header survives") == true, "\(error!)")
        #expect(error?.message.contains("nothing was changed") == true)
        #expect(Self.snapshot(fileSystem).filter { $0.key != "LOCK" } == before.filter { $0.key != "LOCK" })
    }

    // MARK: Segment headers

    @Test func aDamagedSegmentHeaderIsRewrittenAndTheDamagedFileIsKeptAside() throws {
        let (fileSystem, records, bases) = try Self.store()
        try fileSystem.corruptByte(at: 20, in: segmentPath(bases[1]), mask: 0x01)
        let damaged = fileSystem.bytes(at: segmentPath(bases[1]))!
        #expect(Self.names(Self.plainOpenError(fileSystem)))
        let report = try Self.repair(fileSystem)
        #expect(report.rewrittenSegmentHeaders == [LogFileNames.segment(bases[1])])
        #expect(Self.keptAside(LogFileNames.segment(bases[1]), report, fileSystem) == damaged)
        #expect(report.droppedRecords.isEmpty)
        #expect(try Self.recordsAfterRepair(fileSystem) == records)
    }

    /// Bug: repair rewrote a damaged version-1 segment header as version 2, so its records were
    /// then read with the version-2 layout. It keeps the version the header states (byte 20 is in
    /// the store UUID) and, when the version field itself is damaged (byte 8), the neighbours'.
    @Test(arguments: [20, 8])
    func repairRewroteADamagedVersionOneSegmentHeaderAsVersionTwo(damagedByte: Int) throws {
        let fileSystem = SimulatedFileSystem()
        let directory = DurableEndTests.fixtures.appendingPathComponent("v1-torn-tail")
        for name in try FileManager.default.contentsOfDirectory(atPath: directory.path) {
            try fileSystem.setBytes(
                Array(try Data(contentsOf: directory.appendingPathComponent(name))), at: storePath + "/" + name)
        }
        try fileSystem.corruptByte(at: damagedByte, in: segmentPath(0), mask: 0x04)
        #expect(Self.names(Self.plainOpenError(fileSystem)))
        let report = try Self.repair(fileSystem)
        #expect(report.rewrittenSegmentHeaders == [LogFileNames.segment(0)])
        #expect(report.repairNotes.contains { $0.contains("as format version 1") }, "\(report.repairNotes)")
        let header = SegmentHeader.decode(Array(fileSystem.bytes(at: segmentPath(0))!.prefix(64)))
        #expect(header.map(\.formatVersion) == .success(1))
        // The fixture's torn tail (records at 110 and 152) is cut; alpha, beta, gamma are kept.
        #expect(report.truncatedAt == 110)
        #expect(try Self.recordsAfterRepair(fileSystem).map(\.payload) == ["alpha", "beta", "gamma"].map { Array($0.utf8) })
    }

    @Test(arguments: ["another store", "another base"])
    func aSegmentWhoseValidHeaderDoesNotFitIsSetAsideWithWhatFollows(kind: String) throws {
        let (fileSystem, records, bases) = try Self.store()
        let path = segmentPath(bases[2])
        var bytes = fileSystem.bytes(at: path)!
        let header = try SegmentHeader.decode(Array(bytes.prefix(64))).get()
        let replacement =
            kind == "another store"
            ? SegmentHeader(storeID: UUID(), baseOffset: header.baseOffset)
            : SegmentHeader(storeID: header.storeID, baseOffset: header.baseOffset + 1)
        bytes.replaceSubrange(0..<64, with: replacement.encoded())
        try fileSystem.setBytes(bytes, at: path)
        let error = Self.plainOpenError(fileSystem)
        #expect(Self.names(error), "\(String(describing: error))")
        let report = try Self.repair(fileSystem)
        let dropped = bases[2...].map(LogFileNames.segment)
        #expect(report.deletedSegments == Array(dropped))
        for name in dropped { #expect(Self.keptAside(name, report, fileSystem) != nil) }
        #expect(Self.keptAside(LogFileNames.segment(bases[2]), report, fileSystem) == bytes)
        #expect(try Self.recordsAfterRepair(fileSystem) == records.filter { $0.offset < bases[2] })
    }

    // MARK: Sealed segments

    @Test func aSealedSegmentCutShortIsRepaired() throws {
        let (fileSystem, records, bases) = try Self.store()
        try fileSystem.removeFile(storePath + "/" + LogFileNames.index(bases[1]))
        let size = fileSystem.bytes(at: segmentPath(bases[1]))!.count
        try fileSystem.truncateFile(segmentPath(bases[1]), toByteCount: size - 10)
        let error = Self.plainOpenError(fileSystem)
        #expect(Self.names(error), "\(String(describing: error))")
        let report = try Self.repair(fileSystem)
        let lastWhole = records.last { $0.endOffset <= bases[2] - 10 }!
        #expect(report.truncatedAt == lastWhole.endOffset)
        #expect(try Self.recordsAfterRepair(fileSystem) == records.filter { $0.endOffset <= lastWhole.endOffset })
    }

    @Test func aBadRecordInASealedSegmentIsRepairedAndCopyingTheKeptFilesBackUndoesIt() throws {
        let (fileSystem, records, bases) = try Self.store()
        try fileSystem.removeFile(storePath + "/" + LogFileNames.index(bases[1]))
        let damaged = records.first { $0.offset > bases[1] + 10 }!
        try fileSystem.corruptByte(at: Int(damaged.offset - bases[1]) + 64 + 40, in: segmentPath(bases[1]))
        let before = Self.snapshot(fileSystem)
        #expect(Self.names(Self.plainOpenError(fileSystem)))
        let report = try Self.repair(fileSystem)
        #expect(report.truncatedAt == damaged.offset)
        #expect(report.droppedRecords.first?.offset == damaged.offset)
        #expect(try Self.recordsAfterRepair(fileSystem) == records.filter { $0.offset < damaged.offset })
        // Undo: every file repair changed or dropped is in the folder as it was.
        let folder = try #require(report.setAsideDirectory)
        #expect(folder.hasPrefix(storePath + "/repair-"))
        for name in report.setAsideFiles {
            try fileSystem.setBytes(fileSystem.bytes(at: folder + "/" + name)!, at: storePath + "/" + name)
        }
        // The coordination slot is not data: repair moves its epoch so that readers in other
        // processes reopen (issue 12), and a later writer rewrites it anyway.
        for (name, bytes) in before where name != "LOCK" && name != FormatConstants.coordinationFileName && !name.hasSuffix(".index") {
            // Segments may have grown past their records again (a writer's preallocation) only with zeros.
            let now = fileSystem.bytes(at: storePath + "/" + name)!
            #expect(Array(now.prefix(bytes.count)) == bytes, "\(name) restored")
            #expect(now.dropFirst(bytes.count).allSatisfy { $0 == 0 }, "\(name) restored")
        }
    }

    // MARK: The last segment: damage proved acknowledged

    /// A store whose last segment holds every record, closed cleanly (a durable-end mark states the end).
    static func singleSegmentStore(
        count: Int, byteCount: Int, compressible: Bool = true
    ) throws -> (SimulatedFileSystem, [LogRecord]) {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        var generator = SeededGenerator(seed: 5)
        for number in 0..<count {
            try log.append(
                payload(number: number, byteCount: byteCount, compressible: compressible, generator: &generator))
        }
        let records = try readAll(log).filter { $0.type != .durableEndMark }
        try log.close()
        return (fileSystem, records)
    }

    @Test func damageBelowAStatedDurableEndIsRefusedNamingRepairAndRepairCutsIt() throws {
        let (fileSystem, records) = try Self.singleSegmentStore(count: 8, byteCount: 100)
        let damaged = records[3]
        try fileSystem.corruptByte(at: Int(damaged.offset) + 64 + 40, in: segmentPath(0))
        let error = Self.plainOpenError(fileSystem)
        #expect(Self.names(error) && error?.message.contains("states that the log was durable") == true, "\(error!)")
        let verification = try Log.verify(directory: storePath, fileSystem: fileSystem)
        #expect(verification.problems.contains { $0.message.contains("`logstore repair` cuts the log here") })
        let report = try Self.repair(fileSystem)
        #expect(report.truncatedAt == damaged.offset)
        #expect(report.droppedRecords.map(\.offset).prefix(5) == records[3...].map(\.offset)[...])
        #expect(report.setAsideFiles == [LogFileNames.segment(0)])
        #expect(try Self.recordsAfterRepair(fileSystem) == Array(records.prefix(3)))
    }

    @Test func damageBelowACheckpointIsRefusedNamingRepairAndRepairSetsTheCheckpointAside() throws {
        let (fileSystem, records) = try Self.singleSegmentStore(count: 8, byteCount: 100)
        // A version-1-like tail: no later record states a durable end, only the checkpoint proves it.
        let last = records.last!
        let name = LogFileNames.checkpoint(last.endOffset)
        try fileSystem.setBytes(Array("checkpoint".utf8), at: storePath + "/" + name)
        let size = fileSystem.bytes(at: segmentPath(0))!.count
        try fileSystem.truncateFile(segmentPath(0), toByteCount: min(size, Int(last.offset) + 64 + 20))
        let error = Self.plainOpenError(fileSystem)
        #expect(Self.names(error) && error?.message.contains(name) == true, "\(error!)")
        let report = try Self.repair(fileSystem)
        #expect(report.truncatedAt == last.offset)
        #expect(report.deletedCheckpoints == [name])
        #expect(Self.keptAside(name, report, fileSystem) == Array("checkpoint".utf8))
        #expect(try Self.recordsAfterRepair(fileSystem) == Array(records.dropLast()))
    }

    // MARK: Reads

    /// Rot that appears after an open (the open read the segment whole and found it sound) shows
    /// when a read reaches it (`LogIterator`'s corruption), which names repair.
    @Test func aBadRecordFoundByAReadIsRepaired() throws {
        let (fileSystem, records, bases) = try Self.store()
        let damaged = records.first { $0.offset > bases[1] + 10 && $0.endOffset < bases[2] - 200 }!
        let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        try fileSystem.corruptByte(at: Int(damaged.offset - bases[1]) + 64 + 40, in: segmentPath(bases[1]))
        var readError: LogError?
        do { _ = try readAll(log) } catch let error as LogError { readError = error }
        try log.close()
        #expect(Self.names(readError), "\(String(describing: readError))")
        #expect(readError?.offset == damaged.offset)
        let report = try Self.repair(fileSystem)
        #expect(report.truncatedAt == damaged.offset)
        #expect(try Self.recordsAfterRepair(fileSystem) == records.filter { $0.offset < damaged.offset })
    }

    // MARK: Checkpoints (framing; the model layer's tests open the store through them)

    static func writeCheckpoint(_ fileSystem: SimulatedFileSystem, offset: UInt64, storeID: UUID) throws -> String {
        let name = LogFileNames.checkpoint(offset)
        let writer = try RecordFileWriter(
            directory: storePath, name: name,
            header: RecordFileHeader(magic: FormatConstants.checkpointMagic, storeID: storeID, value: offset),
            fileSystem: fileSystem)
        for number in 0..<4 { try writer.append([UInt8](repeating: UInt8(number), count: 90), type: .checkpointHeader) }
        try writer.commit()
        return name
    }

    @Test(arguments: ["file header", "record", "trailing bytes", "another store"])
    func aDamagedCheckpointIsSetAsideByRepairWhichUsedToSayNothingToRepair(damage: String) throws {
        let (fileSystem, records, bases) = try Self.store()
        let storeID = try StoreMeta.decode(fileSystem.bytes(at: storePath + "/store.meta")!).get().storeID
        let good = try Self.writeCheckpoint(fileSystem, offset: bases[1], storeID: storeID)
        let name = try Self.writeCheckpoint(
            fileSystem, offset: bases[2], storeID: damage == "another store" ? UUID() : storeID)
        let path = storePath + "/" + name
        switch damage {
        case "file header": try fileSystem.corruptByte(at: 30, in: path)
        case "record": try fileSystem.corruptByte(at: 64 + 40, in: path)
        case "trailing bytes":
            try fileSystem.setBytes(fileSystem.bytes(at: path)! + [UInt8](repeating: 0, count: 40) + [1], at: path)
        default: break
        }
        let damaged = fileSystem.bytes(at: path)!
        if damage != "another store" {
            // What the model layer's open reads it with, and the error it would give.
            let error = logError {
                var reader = try RecordFileReader(path: path, magic: FormatConstants.checkpointMagic, fileSystem: fileSystem)
                while try reader.next() != nil {}
            }
            #expect(Self.names(error), "\(String(describing: error))")
        }
        let report = try Self.repair(fileSystem)
        #expect(report.truncatedAt == nil, "the log itself was fine")
        #expect(report.repairedAnything, "what the CLI tests before saying 'Nothing to repair'")
        #expect(report.deletedCheckpoints == [name])
        #expect(report.repairNotes.contains { $0.hasPrefix("\(name) set aside") }, "\(report.repairNotes)")
        #expect(Self.keptAside(name, report, fileSystem) == damaged)
        #expect(fileSystem.exists(storePath + "/" + good), "a checkpoint that checks out stays")
        #expect(!fileSystem.exists(path))
        #expect(try Self.recordsAfterRepair(fileSystem) == records)
    }

    // MARK: Nothing to repair

    @Test func repairOfASoundStoreChangesNothingAndMakesNoFolder() throws {
        let (fileSystem, records, bases) = try Self.store()
        let storeID = try StoreMeta.decode(fileSystem.bytes(at: storePath + "/store.meta")!).get().storeID
        _ = try Self.writeCheckpoint(fileSystem, offset: bases[1], storeID: storeID)
        let report = try Self.repair(fileSystem)
        #expect(report.setAsideDirectory == nil && report.setAsideFiles.isEmpty && report.repairNotes.isEmpty)
        #expect(!report.droppedAnything && report.truncatedAt == nil && !report.repairedAnything)
        #expect(!fileSystem.fileNames(in: storePath).contains { $0.hasPrefix("repair-") })
        #expect(try Self.recordsAfterRepair(fileSystem) == records)
    }
}
