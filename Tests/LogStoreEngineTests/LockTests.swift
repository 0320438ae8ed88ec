import Foundation
import LogStoreTestSupport
import Testing

@testable import LogStoreEngine

@Suite struct LockTests {
    @Test func aSecondOpenInTheSameProcessIsRefused() throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        let error = logError { _ = try Log.open(directory: storePath, options: simulatedOptions(fileSystem)) }
        #expect(error?.code == .alreadyOpenInProcess)
        try log.close()
        let again = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        try again.close()
    }

    @Test func aStoreLockedElsewhereIsRefusedWithAClearError() throws {
        let fileSystem = SimulatedFileSystem()
        try Log.open(directory: storePath, options: simulatedOptions(fileSystem)).close()
        // Another open file description holding the flock stands for another process.
        let other = try fileSystem.openFile(storePath + "/LOCK", mode: .readWrite)
        #expect(try other.tryLockExclusive())
        let error = logError { _ = try Log.open(directory: storePath, options: simulatedOptions(fileSystem)) }
        #expect(error?.code == .locked)
        #expect(error?.message.contains("another process") == true)
        other.close()
        try Log.open(directory: storePath, options: simulatedOptions(fileSystem)).close()
    }

    /// A child this process forks to run a command holds a copy of every descriptor until it
    /// execs, `LOCK`'s too; a duplicate stands for it here. Closing the store lets go of the
    /// `flock` all the same (explicitly: a close alone kept it while the copy lived), so the store
    /// reopens at once — alone, when several writers are allowed.
    @Test(arguments: [false, true])
    func aCopyOfTheLockDescriptorDoesNotKeepAClosedStoreLocked(allowsOtherWriters: Bool) throws {
        let temporary = TemporaryDirectory("lock-copy")
        defer { temporary.remove() }
        let directory = temporary.appending("store")
        var options = LogOptions()
        options.allowsOtherWriters = allowsOtherWriters
        let log = try Log.open(directory: directory, options: options)
        let copy = try #require(Self.duplicateOfOwnDescriptor(for: directory + "/LOCK"))
        defer { close(copy) }
        try log.close()
        let again = try Log.open(directory: directory, options: options)
        #expect(again.wasOpenedAlone)
        try again.close()
    }

    /// A duplicate of this process's descriptor open on `path` (found through `/proc/self/fd`).
    static func duplicateOfOwnDescriptor(for path: String) -> Int32? {
        let target = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for name in names {
            guard let descriptor = Int32(name),
                let destination = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + name),
                destination == target
            else { continue }
            let copy = dup(descriptor)
            return copy >= 0 ? copy : nil
        }
        return nil
    }

    @Test func aReadOnlyOpenBesideAWriterChangesNothing() throws {
        let fileSystem = SimulatedFileSystem()
        // No preallocation, so the writer's own background work (zeros ahead) cannot change files
        // between the two snapshots; its index writes for sealed segments are awaited below.
        let writer = try Log.open(
            directory: storePath,
            options: simulatedOptions(fileSystem, segmentByteCountMax: 2048, preallocates: false))
        for number in 0..<40 { try writer.append(Array("record \(number) ".utf8) + [UInt8](repeating: 5, count: 80)) }
        let sealedCount = writer.segmentBaseOffsets.count - 1
        let deadline = Date().addingTimeInterval(10)
        while fileSystem.fileNames(in: storePath).filter({ $0.hasSuffix(".index") }).count < sealedCount
            && Date() < deadline
        {
            Thread.sleep(forTimeInterval: 0.005)
        }
        // An unsynced write the reader may or may not see, and never modifies.
        try writer.write(Array("in flight".utf8))
        let before = Dictionary(
            uniqueKeysWithValues: fileSystem.fileNames(in: storePath).map {
                ($0, fileSystem.bytes(at: storePath + "/" + $0)!)
            })
        let reader = try Log.openReadOnly(directory: storePath, fileSystem: fileSystem)
        let records = try readAll(reader)
        #expect(records.count >= 40)
        #expect(reader.isReadOnly)
        #expect(logError { try reader.append([1]) }?.code == .readOnly)
        try reader.close()
        let after = Dictionary(
            uniqueKeysWithValues: fileSystem.fileNames(in: storePath).map {
                ($0, fileSystem.bytes(at: storePath + "/" + $0)!)
            })
        #expect(after == before)
        try writer.close()
    }

    @Test func aMissingDirectoryOrAForeignDirectoryIsNotAStore() throws {
        let fileSystem = SimulatedFileSystem()
        var options = simulatedOptions(fileSystem)
        options.createsIfMissing = false
        #expect(logError { _ = try Log.open(directory: "/missing", options: options) }?.code == .notAStore)
        #expect(
            logError { _ = try Log.openReadOnly(directory: "/missing", fileSystem: fileSystem) }?.code == .notAStore)
        try fileSystem.setBytes(Array("hello".utf8), at: "/other/notes.txt")
        let error = logError { _ = try Log.open(directory: "/other", options: simulatedOptions(fileSystem)) }
        #expect(error?.code == .notAStore)
        #expect(error?.message.contains("not empty") == true)
    }

    @Test func leftoverTemporaryFilesAreRemovedAndUnknownFilesListed() throws {
        let fileSystem = SimulatedFileSystem()
        try Log.open(directory: storePath, options: simulatedOptions(fileSystem)).close()
        try fileSystem.setBytes([1, 2, 3], at: storePath + "/00000000000000000999.log.tmp")
        try fileSystem.setBytes([1, 2, 3], at: storePath + "/README.txt")
        let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        #expect(log.recoveryReport.removedTemporaryFiles == ["00000000000000000999.log.tmp"])
        #expect(log.recoveryReport.unknownFiles == ["README.txt"])
        #expect(!fileSystem.exists(storePath + "/00000000000000000999.log.tmp"))
        #expect(fileSystem.exists(storePath + "/README.txt"))
        try log.close()
    }
}

@Suite struct OpenValidationTests {
    /// Found by the fuzz corpus (RELIABILITY.md, bug 6): a segment whose name carried a base offset
    /// near 2^64 — header and CRC valid for it — made offset arithmetic trap on open and verify.
    /// Such a name is not one of the store's: it is listed as unknown, and nothing traps.
    @Test func aSegmentNameWithAnOffsetPastTheLargestIsAnUnknownFile() throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        let storeID = log.storeID
        try log.append(Array("kept".utf8))
        try log.close()
        let huge = UInt64.max - 40
        let name = String(huge) + ".log"  // 20 digits
        try fileSystem.setBytes(
            SegmentHeader(formatVersion: FormatConstants.formatVersion, storeID: storeID, baseOffset: huge).encoded()
                + [UInt8](repeating: 0x5A, count: 96), at: storePath + "/" + name)
        #expect(LogFileNames.segmentBaseOffset(name) == nil)
        #expect(LogFileNames.segmentBaseOffset(LogFileNames.segment(FormatConstants.offsetMax)) == FormatConstants.offsetMax)
        let reopened = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        #expect(reopened.recoveryReport.unknownFiles == [name])
        #expect(try readAll(reopened).map(\.payload) == [Array("kept".utf8)])
        try reopened.close()
        let report = try Log.verify(directory: storePath, fileSystem: fileSystem)
        #expect(!report.hasCorruption)
    }

    @Test func aUsersOwnTmpFileIsLeftAlone() throws {
        let fileSystem = SimulatedFileSystem()
        try Log.open(directory: storePath, options: simulatedOptions(fileSystem)).close()
        try fileSystem.setBytes([1], at: storePath + "/notes.tmp")
        try fileSystem.setBytes([1], at: storePath + "/store.meta.tmp")
        let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        #expect(log.recoveryReport.removedTemporaryFiles == ["store.meta.tmp"])
        #expect(log.recoveryReport.unknownFiles == ["notes.tmp"])
        #expect(fileSystem.exists(storePath + "/notes.tmp"))
        try log.close()
    }

    @Test func outOfRangeOptionsAreRefusedBeforeAnythingIsCreated() throws {
        let fileSystem = SimulatedFileSystem()
        var options = simulatedOptions(fileSystem, segmentByteCountMax: 64)
        #expect(logError { _ = try Log.open(directory: storePath, options: options) }?.code == .invalidOptions)
        options.segmentByteCountMax = 8 * 1024 * 1024 * 1024
        #expect(logError { _ = try Log.open(directory: storePath, options: options) }?.code == .invalidOptions)
        options.segmentByteCountMax = 1 << 20
        options.preallocationChunkByteCount = 0
        options.preallocationAheadByteCount = 4096
        #expect(logError { _ = try Log.open(directory: storePath, options: options) }?.code == .invalidOptions)
        #expect(!fileSystem.exists(storePath))
    }

    @Test func aVersionZeroHeaderIsDamageNotAnOlderVersion() throws {
        var bytes = SegmentHeader(storeID: UUID(), baseOffset: 0).encoded()
        bytes[8] = 0
        guard case .failure(.damaged) = SegmentHeader.decode(bytes) else {
            Issue.record("version 0 accepted")
            return
        }
    }

    @Test func aLargerNewerStoreMetaIsRecognisedByItsVersion() throws {
        // A future store.meta may be larger: it is refused by name, not reported as damage.
        var meta = [UInt8](repeating: 0xCD, count: 80)
        meta.replaceSubrange(0..<8, with: FormatConstants.storeMetaMagic)
        meta.replaceSubrange(8..<12, with: [7, 0, 0, 0])
        #expect(StoreMeta.decode(meta) == .failure(.newerVersion(7)))
    }
}

@Suite struct DirectoryCreationTests {
    @Test func aNewStoreGetsItsMissingParentDirectories() throws {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(directory: "/deep/er/store", options: simulatedOptions(fileSystem))
        try log.append(Array("hello".utf8))
        try log.close()
        // Every level was made durable: a power cut keeps the store.
        let cut = fileSystem.powerCut(.nothingUnsynced)
        let reopened = try Log.open(directory: "/deep/er/store", options: simulatedOptions(cut))
        #expect(try readAll(reopened).map(\.payload) == [Array("hello".utf8)])
        try reopened.close()
    }

    @Test func refusingADirectoryLeavesNoLockFileInIt() throws {
        let fileSystem = SimulatedFileSystem()
        try fileSystem.createDirectory("/empty")
        var options = simulatedOptions(fileSystem)
        options.createsIfMissing = false
        #expect(logError { _ = try Log.open(directory: "/empty", options: options) }?.code == .notAStore)
        #expect(fileSystem.fileNames(in: "/empty").isEmpty)
        try fileSystem.setBytes([1], at: "/other/notes.txt")
        #expect(
            logError { _ = try Log.open(directory: "/other", options: simulatedOptions(fileSystem)) }?.code
                == .notAStore)
        #expect(fileSystem.fileNames(in: "/other") == ["notes.txt"])
    }
}
