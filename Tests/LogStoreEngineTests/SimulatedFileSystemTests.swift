import Dispatch
import LogStoreEngine
import LogStoreTestSupport
import Testing

import class Foundation.Thread

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The simulated file system's own behaviour: engine crash tests rely on every detail here.
@Suite("SimulatedFileSystem")
struct SimulatedFileSystemTests {
    let fs = SimulatedFileSystem()

    init() throws {
        try fs.createDirectory("/store")
    }

    // MARK: Basics

    @Test func openModesAndErrors() throws {
        #expect(errorCode { _ = try fs.openFile("/store/a", mode: .readOnly) } == ErrorCode.notFound)
        #expect(errorCode { _ = try fs.openFile("/store/a", mode: .readWrite) } == ErrorCode.notFound)
        #expect(errorCode { _ = try fs.openFile("/missing/a", mode: .createOrOpen) } == ErrorCode.notFound)
        #expect(errorCode { _ = try fs.openFile("/store", mode: .readWrite) } == ErrorCode.isDirectory)

        let handle = try fs.openFile("/store/a", mode: .createNew)
        try handle.write(Array("hello".utf8), at: 0)
        #expect(errorCode { _ = try fs.openFile("/store/a", mode: .createNew) } == ErrorCode.exists)
        #expect(errorCode { _ = try fs.openFile("/store/a/b", mode: .createOrOpen) } == ErrorCode.notDirectory)

        let reader = try fs.openFile("/store/a", mode: .readOnly)
        #expect(errorCode { try reader.write([1], at: 0) } == EBADF)
        #expect(try reader.read(byteCount: 100, at: 0) == Array("hello".utf8))
        #expect(try reader.read(byteCount: 100, at: 3) == Array("lo".utf8))
        #expect(try reader.read(byteCount: 100, at: 5) == [])
        #expect(try reader.read(byteCount: 100, at: 50) == [])
        #expect(try reader.size() == 5)

        let again = try fs.openFile("/store/a", mode: .createOrOpen)
        #expect(try again.size() == 5)
        handle.close()
        #expect(errorCode { try handle.write([1], at: 0) } == EBADF)
        #expect(fs.openHandleCount == 2)
    }

    @Test func holesReadAsZeros() throws {
        let handle = try fs.openFile("/store/a", mode: .createNew)
        try handle.write([7, 7], at: 1000)
        #expect(try handle.size() == 1002)
        #expect(try handle.read(byteCount: 4, at: 998) == [0, 0, 7, 7])
        try handle.truncate(toByteCount: 1001)
        try handle.truncate(toByteCount: 2000)
        #expect(try handle.read(byteCount: 3, at: 999) == [0, 7, 0])
    }

    @Test func directoriesKindsAndIdentities() throws {
        try fs.createDirectory("/store")  // already there: fine
        try fs.createDirectory("/store/sub/")
        #expect(errorCode { try fs.createDirectory("/x/y") } == ErrorCode.notFound)
        _ = try fs.openFile("/store/b.log", mode: .createNew)
        _ = try fs.openFile("/store//a.log", mode: .createNew)
        #expect(try fs.contentsOfDirectory("/store") == ["a.log", "b.log", "sub"])
        #expect(fs.fileNames(in: "/store") == ["a.log", "b.log"])
        #expect(try fs.kind(of: "/store") == .directory)
        #expect(try fs.kind(of: "/store/a.log") == .regular)
        #expect(try fs.kind(of: "/store/nope") == nil)
        #expect(try fs.kind(of: "/store/a.log/x") == nil)
        #expect(errorCode { _ = try fs.contentsOfDirectory("/nope") } == ErrorCode.notFound)
        #expect(errorCode { try fs.createDirectory("/store/a.log") } == ErrorCode.exists)

        let a = try fs.identity(of: "/store/a.log")
        let b = try fs.identity(of: "/store/b.log")
        #expect(a.device == fs.deviceNumber && b.device == fs.deviceNumber)
        // Another file system, or the same after a power cut, is another device: the engine's
        // registry of open stores must not mistake one for the other.
        #expect(try SimulatedFileSystem().identity(of: "/").device != a.device)
        let cut = fs.powerCut(.nothingUnsynced)
        #expect(cut.deviceNumber != fs.deviceNumber)
        #expect(try cut.identity(of: "/store").inode == fs.identity(of: "/store").inode)
        #expect(a != b)
        #expect(try fs.identity(of: "/store/./a.log") == a)
        #expect(try fs.identity(of: "/store") != a)
        #expect(errorCode { _ = try fs.identity(of: "/store/c") } == ErrorCode.notFound)
        #expect(fs.exists("/store/sub") && fs.exists("/store/a.log") && !fs.exists("/store/c"))
    }

    @Test func renameReplacesAndRemoveFails() throws {
        try fs.setBytes([1, 1], at: "/store/old")
        try fs.setBytes([2, 2, 2], at: "/store/new")
        let newIdentity = try fs.identity(of: "/store/old")
        try fs.rename("/store/old", to: "/store/new")
        #expect(fs.fileNames(in: "/store") == ["new"])
        #expect(fs.bytes(at: "/store/new") == [1, 1])
        #expect(try fs.identity(of: "/store/new") == newIdentity)
        #expect(errorCode { try fs.rename("/store/old", to: "/store/x") } == ErrorCode.notFound)
        #expect(errorCode { try fs.removeFile("/store/old") } == ErrorCode.notFound)
        #expect(errorCode { try fs.removeFile("/store") } == ErrorCode.isDirectory)
        try fs.removeFile("/store/new")
        #expect(fs.fileNames(in: "/store") == [])
    }

    @Test func removedFileStaysReadableThroughOpenHandle() throws {
        try fs.setBytes([9, 8, 7], at: "/store/f")
        let handle = try fs.openFile("/store/f", mode: .readWrite)
        try fs.removeFile("/store/f")
        #expect(!fs.exists("/store/f"))
        #expect(try handle.read(byteCount: 3, at: 0) == [9, 8, 7])
        try handle.write([1], at: 3)
        try handle.syncData()
    }

    // MARK: Power cut: file data

    @Test func syncedDataAlwaysSurvives() throws {
        let handle = try fs.openFile("/store/f", mode: .createNew)
        try fs.syncDirectory("/store")
        let data = pattern(count: 5000, seed: 1)
        try handle.write(data, at: 0)
        try handle.syncData()
        for seed in UInt64(0)..<50 {
            #expect(fs.powerCut(seed: seed).bytes(at: "/store/f") == data, "seed \(seed)")
        }
        #expect(fs.powerCut(.nothingUnsynced).bytes(at: "/store/f") == data)
        #expect(fs.durableBytes(at: "/store/f") == data)
        #expect(fs.unsyncedSectors(at: "/store/f") == [])
    }

    @Test func unsyncedAppendDisappearsOrPartlySurvives() throws {
        let handle = try fs.openFile("/store/f", mode: .createNew)
        try fs.syncDirectory("/store")
        let synced = pattern(count: 1024, seed: 1)
        try handle.write(synced, at: 0)
        try handle.sync()
        let unsynced = pattern(count: 8 * 512, seed: 2)
        try handle.write(unsynced, at: 1024)
        #expect(fs.unsyncedSectors(at: "/store/f") == Array(2..<10))

        #expect(fs.powerCut(.nothingUnsynced).bytes(at: "/store/f") == synced)
        #expect(fs.powerCut(persistingAllUnsynced: true).bytes(at: "/store/f") == synced + unsynced)

        var outcomes = Set<[UInt8]>()
        for seed in UInt64(0)..<64 {
            let after = try #require(fs.powerCut(seed: seed).bytes(at: "/store/f"))
            #expect(after.count == 1024 || after.count == 1024 + unsynced.count)
            #expect(Array(after.prefix(1024)) == synced, "synced part intact, seed \(seed)")
            // Every sector past the synced part is the written one or zeros.
            for sector in 0..<(after.count - 1024) / 512 {
                let lower = 1024 + sector * 512
                let got = Array(after[lower..<lower + 512])
                #expect(
                    got == Array(unsynced[(sector * 512)..<(sector * 512 + 512)])
                        || got == [UInt8](repeating: 0, count: 512))
            }
            outcomes.insert(after)
        }
        #expect(outcomes.count > 4, "the seed must change what survives")
        #expect(outcomes.contains(synced), "some seed loses the whole append")
    }

    @Test func someSeedKeepsANonPrefixSubsetOfSectors() throws {
        let old = [UInt8](repeating: 0x11, count: 8 * 512)
        try fs.setBytes(old, at: "/store/f")
        let handle = try fs.openFile("/store/f", mode: .readWrite)
        try handle.write([UInt8](repeating: 0x22, count: 8 * 512), at: 0)

        var sawNonPrefix = false
        var sawAll = false
        var sawNone = false
        for seed in UInt64(0)..<64 {
            let after = try #require(fs.powerCut(seed: seed).bytes(at: "/store/f"))
            #expect(after.count == old.count)
            let kept = (0..<8).map { sector -> Bool in
                let bytes = Set(after[(sector * 512)..<(sector * 512 + 512)])
                #expect(bytes == [0x11] || bytes == [0x22])
                return bytes == [0x22]
            }
            if let firstLost = kept.firstIndex(of: false), kept[firstLost...].contains(true) { sawNonPrefix = true }
            if !kept.contains(false) { sawAll = true }
            if !kept.contains(true) { sawNone = true }
        }
        #expect(sawNonPrefix, "a later sector can survive while an earlier one is lost")
        #expect(sawAll || sawNone || sawNonPrefix)
    }

    @Test func powerCutIsDeterministicPerSeed() throws {
        try fs.setBytes(pattern(count: 4096, seed: 3), at: "/store/f")
        let handle = try fs.openFile("/store/f", mode: .readWrite)
        try handle.write(pattern(count: 8192, seed: 4), at: 2000)
        for seed in UInt64(0)..<10 {
            #expect(fs.powerCut(seed: seed).bytes(at: "/store/f") == fs.powerCut(seed: seed).bytes(at: "/store/f"))
        }
    }

    @Test func unsyncedExtensionReadsAsZerosWhenSectorLost() throws {
        try fs.setBytes([], at: "/store/f")
        let handle = try fs.openFile("/store/f", mode: .readWrite)
        try handle.truncate(toByteCount: 100)
        try handle.syncData()
        try handle.write([UInt8](repeating: 5, count: 1000), at: 0)
        // Some seed keeps the new size but loses sector 1.
        var found = false
        for seed in UInt64(0)..<64 {
            let after = try #require(fs.powerCut(seed: seed).bytes(at: "/store/f"))
            if after.count == 1000 && after[600] == 0 {
                #expect(after[512..<1000].allSatisfy { $0 == 0 })
                found = true
            }
        }
        #expect(found)
    }

    @Test func unsyncedTruncateReverts() throws {
        let data = pattern(count: 3000, seed: 5)
        try fs.setBytes(data, at: "/store/f")
        let handle = try fs.openFile("/store/f", mode: .readWrite)
        try handle.truncate(toByteCount: 10)
        try handle.truncate(toByteCount: 3000)
        #expect(fs.bytes(at: "/store/f") == Array(data.prefix(10)) + [UInt8](repeating: 0, count: 2990))
        #expect(fs.powerCut(.nothingUnsynced).bytes(at: "/store/f") == data)
        try handle.sync()
        #expect(fs.powerCut(.nothingUnsynced).bytes(at: "/store/f") == fs.bytes(at: "/store/f"))
    }

    // MARK: Power cut: directory entries

    @Test func fileCreatedWithoutDirectorySyncDisappears() throws {
        let handle = try fs.openFile("/store/f", mode: .createNew)
        try handle.write([1, 2, 3], at: 0)
        try handle.syncData()  // the data is durable, the name is not
        #expect(fs.durableBytes(at: "/store/f") == [1, 2, 3])
        #expect(fs.durableFileNames(in: "/store") == [])
        for policy in [SimulatedFileSystem.PowerCutPolicy.everything, .nothingUnsynced, .random(seed: 7)] {
            #expect(!fs.powerCut(policy).exists("/store/f"))
            #expect(fs.powerCut(policy).exists("/store"), "directories are always durable")
        }
        try fs.syncDirectory("/store")
        #expect(fs.powerCut(.nothingUnsynced).bytes(at: "/store/f") == [1, 2, 3])
    }

    @Test func renameWithoutDirectorySyncReverts() throws {
        try fs.setBytes([1], at: "/store/manifest")
        try fs.setBytes([2], at: "/store/manifest.tmp")
        try fs.rename("/store/manifest.tmp", to: "/store/manifest")
        #expect(fs.fileNames(in: "/store") == ["manifest"])

        let reverted = fs.powerCut(.everything)
        #expect(reverted.fileNames(in: "/store") == ["manifest", "manifest.tmp"])
        #expect(reverted.bytes(at: "/store/manifest") == [1])
        #expect(reverted.bytes(at: "/store/manifest.tmp") == [2])

        try fs.syncDirectory("/store")
        let renamed = fs.powerCut(.nothingUnsynced)
        #expect(renamed.fileNames(in: "/store") == ["manifest"])
        #expect(renamed.bytes(at: "/store/manifest") == [2])
    }

    @Test func removeWithoutDirectorySyncLeavesTheFile() throws {
        try fs.setBytes([4, 5], at: "/store/f")
        try fs.removeFile("/store/f")
        #expect(fs.powerCut(seed: 1).bytes(at: "/store/f") == [4, 5])
        try fs.syncDirectory("/store")
        #expect(!fs.powerCut(seed: 1).exists("/store/f"))
    }

    @Test func oldFileSystemKeepsWorkingAndHandlesAreNotCarriedOver() throws {
        let handle = try fs.openFile("/store/f", mode: .createNew)
        try fs.syncDirectory("/store")
        #expect(try handle.tryLockExclusive())
        try handle.write([1], at: 0)
        let after = fs.powerCut(.everything)
        #expect(after.openHandleCount == 0)
        let fresh = try after.openFile("/store/f", mode: .readWrite)
        #expect(try fresh.tryLockExclusive(), "the lock belonged to the old file system")
        try fresh.write([9], at: 0)
        try handle.write([2], at: 1)
        #expect(fs.bytes(at: "/store/f") == [1, 2])
        #expect(after.bytes(at: "/store/f") == [9])
    }

    // MARK: Faults

    @Test func failedSyncMakesNothingDurableAndLaterSyncDoesNotResurrect() throws {
        let old = [UInt8](repeating: 0xAA, count: 1024)
        try fs.setBytes(old, at: "/store/f")
        let handle = try fs.openFile("/store/f", mode: .readWrite)
        let new = [UInt8](repeating: 0xBB, count: 1024)
        try handle.write(new, at: 0)
        try handle.write([UInt8](repeating: 0xCC, count: 512), at: 1024)

        fs.failSync()
        #expect(errorCode { try handle.syncData() } == ErrorCode.ioError)
        #expect(fs.durableBytes(at: "/store/f") == old)
        #expect(fs.bytes(at: "/store/f") == new + [UInt8](repeating: 0xCC, count: 512), "the page cache still has it")
        #expect(fs.unsyncedSectors(at: "/store/f") == [])

        try handle.syncData()  // succeeds, but the pages were marked clean
        let expected = old + [UInt8](repeating: 0, count: 512)
        #expect(fs.durableBytes(at: "/store/f") == expected)
        #expect(fs.powerCut(.everything).bytes(at: "/store/f") == expected)
        for seed in UInt64(0)..<16 {
            #expect(fs.powerCut(seed: seed).bytes(at: "/store/f") == expected)
        }

        // Data written after the failure is synced normally.
        try handle.write([1, 2, 3], at: 0)
        try handle.syncData()
        #expect(fs.durableBytes(at: "/store/f")?.prefix(3) == [1, 2, 3])
        #expect(fs.syncCount == 3)
    }

    @Test func faultsCountFromArmingAndFilterPaths() throws {
        let a = try fs.openFile("/store/a.log", mode: .createNew)
        let b = try fs.openFile("/store/b.idx", mode: .createNew)
        try a.write([0], at: 0)
        fs.failWrite(after: 1, path: .suffix(".log"))
        try b.write([1], at: 0)  // not matched, not counted
        try a.write([1], at: 1)  // counted
        #expect(errorCode { try a.write([2], at: 2) } == ErrorCode.ioError)
        try a.write([3], at: 2)  // one-shot
        #expect(fs.armedFaultCount == 0)

        fs.failSync(code: ErrorCode.noSpace, path: "/store/b.idx")
        try a.syncData()
        #expect(errorCode { try b.sync() } == ErrorCode.noSpace)

        fs.failRead()
        #expect(errorCode { _ = try a.read(byteCount: 1, at: 0) } == ErrorCode.ioError)
        #expect(try a.read(byteCount: 3, at: 0) == [0, 1, 3])

        fs.failOpen(path: "/store/c")
        #expect(errorCode { _ = try fs.openFile("/store/c", mode: .createNew) } == ErrorCode.ioError)
        #expect(!fs.exists("/store/c"))

        fs.failRename()
        #expect(errorCode { try fs.rename("/store/a.log", to: "/store/z") } == ErrorCode.ioError)
        #expect(fs.fileNames(in: "/store") == ["a.log", "b.idx"])

        fs.failSyncDirectory()
        #expect(errorCode { try fs.syncDirectory("/store") } == ErrorCode.ioError)
        #expect(fs.durableFileNames(in: "/store") == [])
        try fs.syncDirectory("/store")
        #expect(fs.durableFileNames(in: "/store") == ["a.log", "b.idx"])

        fs.injectFault(.remove, repeating: true)
        #expect(errorCode { try fs.removeFile("/store/a.log") } == ErrorCode.ioError)
        #expect(errorCode { try fs.removeFile("/store/a.log") } == ErrorCode.ioError)
        fs.clearFaults()
        try fs.removeFile("/store/a.log")
    }

    @Test func failedWriteReportsLeadingBytesWritten() throws {
        let handle = try fs.openFile("/store/f", mode: .createNew)
        fs.failWrite(writingByteCount: 3)
        let error = try #require(throwsFileSystemError { try handle.write([1, 2, 3, 4, 5], at: 10) })
        #expect(error.code == ErrorCode.ioError)
        #expect(error.byteCountWritten == 3)
        #expect(fs.bytes(at: "/store/f") == [UInt8](repeating: 0, count: 10) + [1, 2, 3])

        fs.failWrite()
        let nothing = try #require(throwsFileSystemError { try handle.write([6], at: 0) })
        #expect(nothing.byteCountWritten == 0)
        #expect(fs.bytes(at: "/store/f")?.first == 0)
    }

    @Test func outOfSpaceWritesWhatFitsAndRecovers() throws {
        fs.setCapacity(byteCount: 1000)
        try fs.setBytes([UInt8](repeating: 1, count: 300), at: "/store/other")
        let handle = try fs.openFile("/store/f", mode: .createNew)
        try handle.write([UInt8](repeating: 2, count: 600), at: 0)
        #expect(fs.usedByteCount == 900)

        let error = try #require(throwsFileSystemError { try handle.write([UInt8](repeating: 3, count: 250), at: 600) })
        #expect(error.isOutOfSpace)
        #expect(error.byteCountWritten == 100)
        #expect(try handle.size() == 700)
        #expect(fs.usedByteCount == 1000)

        // Overwriting allocated bytes always works; growing does not.
        try handle.write([UInt8](repeating: 4, count: 700), at: 0)
        #expect(errorCode { try handle.write([5], at: 700) } == ErrorCode.noSpace)
        #expect(errorCode { try handle.truncate(toByteCount: 701) } == ErrorCode.noSpace)
        #expect(try handle.size() == 700)
        try handle.truncate(toByteCount: 650)  // shrinking is fine

        // Removing a file frees its space.
        try fs.removeFile("/store/other")
        try handle.write([UInt8](repeating: 6, count: 350), at: 650)
        #expect(errorCode { try handle.write([7], at: 1000) } == ErrorCode.noSpace)

        fs.setCapacity(byteCount: 2000)
        try handle.write([UInt8](repeating: 7, count: 1000), at: 1000)
        fs.setCapacity(byteCount: nil)
        try handle.write([UInt8](repeating: 8, count: 10_000), at: 2000)
        #expect(try handle.size() == 12_000)
    }

    @Test func writePastCapacityFromAHoleWritesNothing() throws {
        fs.setCapacity(byteCount: 100)
        let handle = try fs.openFile("/store/f", mode: .createNew)
        let error = try #require(throwsFileSystemError { try handle.write([1, 2], at: 200) })
        #expect(error.code == ErrorCode.noSpace && error.byteCountWritten == 0)
        #expect(try handle.size() == 0)
    }

    // MARK: Held syncs

    @Test func heldSyncsBlockUntilReleased() throws {
        let handle = try fs.openFile("/store/f", mode: .createNew)
        try fs.syncDirectory("/store")
        try handle.write([1], at: 0)
        fs.holdSyncs()
        defer { fs.releaseSyncs() }

        let syncer = BackgroundThread { try handle.syncData() }
        #expect(fs.waitUntilSyncsHeld(count: 1))
        #expect(fs.startedSyncCount == 1)
        #expect(fs.syncCount == 0)
        // Other calls go on while the sync is held.
        try handle.write([2], at: 1)
        #expect(try handle.read(byteCount: 2, at: 0) == [1, 2])
        #expect(fs.durableBytes(at: "/store/f") == [])
        #expect(!fs.waitUntilSyncCount(atLeast: 1, timeout: .milliseconds(100)))

        fs.releaseSyncs()
        #expect(fs.waitUntilSyncCount(atLeast: 1))
        #expect(syncer.join() == nil)
        #expect(fs.heldSyncCount == 0)
        // The held sync persisted what was written by the time it ran, the second byte too.
        #expect(fs.durableBytes(at: "/store/f") == [1, 2])
    }

    @Test func faultArmedWhileSyncIsHeldFailsIt() throws {
        let handle = try fs.openFile("/store/f", mode: .createNew)
        try handle.write([1], at: 0)
        fs.holdSyncs()
        defer { fs.releaseSyncs() }
        let first = BackgroundThread { try handle.syncData() }
        let second = BackgroundThread { try handle.sync() }
        #expect(fs.waitUntilSyncsHeld(count: 2))
        fs.failSync()
        fs.releaseSyncs()
        let errors = [first.join(), second.join()]
        #expect(errors.compactMap { $0 }.count == 1)
        #expect(fs.syncCount == 2)
    }

    @Test func waitingForHeldSyncsTimesOut() {
        fs.holdSyncs()
        defer { fs.releaseSyncs() }
        #expect(!fs.waitUntilSyncsHeld(count: 1, timeout: .milliseconds(50)))
    }

    // MARK: flock

    @Test func exclusiveLockPerHandle() throws {
        let first = try fs.openFile("/store/LOCK", mode: .createOrOpen)
        let second = try fs.openFile("/store/LOCK", mode: .readWrite)
        #expect(try first.tryLockExclusive())
        #expect(try first.tryLockExclusive(), "the holder may ask again")
        #expect(try !second.tryLockExclusive())
        first.close()
        #expect(try second.tryLockExclusive())

        // Released when the holder is deinitialised.
        var third: (any LogStoreEngine.FileHandle)? = try fs.openFile("/store/OTHER", mode: .createNew)
        let fourth = try fs.openFile("/store/OTHER", mode: .readOnly)
        #expect(try third!.tryLockExclusive())
        #expect(try !fourth.tryLockExclusive())
        third = nil
        #expect(try fourth.tryLockExclusive())
    }

    /// Shared locks and `LOCK_UN` as Linux's `flock` (several writing processes, D11): shared
    /// beside shared, never beside exclusive; a handle converts its own lock; a refused
    /// conversion to exclusive leaves the handle without its shared lock (Linux drops the old
    /// lock first); `unlock` and `close` release.
    @Test func sharedLocksConversionsAndUnlock() throws {
        let a = try fs.openFile("/store/LOCK", mode: .createOrOpen)
        let b = try fs.openFile("/store/LOCK", mode: .readWrite)
        let c = try fs.openFile("/store/LOCK", mode: .readWrite)
        #expect(try a.tryLockExclusive())
        #expect(try !b.tryLockShared())
        #expect(try a.tryLockShared(), "the exclusive holder converts to shared")
        #expect(try b.tryLockShared())
        #expect(try !c.tryLockExclusive())
        #expect(try !a.tryLockExclusive(), "refused: b shares the lock")
        // a lost its shared lock in the refused conversion: b alone holds it, and converts.
        #expect(try b.tryLockExclusive())
        #expect(try !a.tryLockShared())
        try b.unlock()
        #expect(try a.tryLockShared())
        #expect(try c.tryLockShared())
        a.close()
        #expect(try !b.tryLockExclusive(), "c still shares it")
        try c.unlock()
        #expect(try b.tryLockExclusive())
        b.close()
        c.close()
    }

    // MARK: Concurrency

    @Test func concurrentWriterAndSyncer() throws {
        let handle = try fs.openFile("/store/f", mode: .createNew)
        try fs.syncDirectory("/store")
        let recordCount = 2000
        let writer = BackgroundThread {
            for index in 0..<recordCount {
                try handle.write(pattern(count: 100, seed: UInt64(index)), at: UInt64(index * 100))
            }
        }
        let syncer = BackgroundThread {
            while try handle.size() < UInt64(recordCount * 100) {
                try handle.syncData()
            }
            try handle.syncData()
        }
        #expect(writer.join() == nil)
        #expect(syncer.join() == nil)
        let expected = (0..<recordCount).flatMap { pattern(count: 100, seed: UInt64($0)) }
        #expect(fs.bytes(at: "/store/f") == expected)
        #expect(fs.powerCut(.nothingUnsynced).bytes(at: "/store/f") == expected)
    }
}

// MARK: - Helpers

/// The `errno` of the `FileSystemError` `body` throws; `nil` when it throws nothing.
private func errorCode(_ body: () throws -> Void) -> Int32? {
    throwsFileSystemError(body)?.code
}

private func throwsFileSystemError(_ body: () throws -> Void) -> FileSystemError? {
    do {
        try body()
        return nil
    } catch let error as FileSystemError {
        return error
    } catch {
        Issue.record("unexpected error \(error)")
        return nil
    }
}

/// Deterministic non-constant bytes.
private func pattern(count: Int, seed: UInt64) -> [UInt8] {
    var state = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
    return (0..<count).map { _ in
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return UInt8(truncatingIfNeeded: state >> 56) | 1
    }
}

/// A real thread (held syncs block it, so not a task of the cooperative pool).
private final class BackgroundThread: @unchecked Sendable {
    // `error` is written by the thread before it signals `done` and read only after waiting on
    // `done`, so the semaphore orders the accesses: hence `@unchecked Sendable`.
    private var error: (any Error)?
    private let done = DispatchSemaphore(value: 0)

    init(_ body: @escaping @Sendable () throws -> Void) {
        let thread = Thread { [self] in
            do { try body() } catch { self.error = error }
            done.signal()
        }
        thread.start()
    }

    /// Waits for the body to finish; returns the error it threw.
    func join() -> (any Error)? {
        done.wait()
        return error
    }
}
