import Foundation
import LogStoreTestSupport
import Synchronization
import Testing

@testable import LogStoreEngine

/// D2 and D11: a fail-stop tells the read-only processes before it cuts the log back. At the
/// moment the cut-back's `ftruncate` runs, the coordination slot already says `failed`, carries a
/// new epoch and states the durable end as the visible end, and a read-only log following the
/// writer gets `reopenRequired` — neither the records the cut-back is about to remove nor a
/// corruption report for them. Observed at the truncation itself, by a file system that looks at
/// the slot and asks the reader before it forwards the call.
@Suite struct FailStopOrderTests {
    enum Cause: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// An `fdatasync` of a synchronous save fails.
        case syncOfASave
        /// `Log.sync()` fails in `.none` mode, after the reader was shown records past the durable end.
        case syncInNoneMode
        /// A write fails with EIO (not a full disk: that only fails the save).
        case write

        var testDescription: String { rawValue }
    }

    /// What the slot and the reader said when the segment was truncated.
    struct Observation {
        let byteCount: UInt64
        let slot: SharedEnd?
        let readerError: LogError?
    }

    @Test(arguments: Cause.allCases)
    func theSlotSaysFailedBeforeTheCutBackTruncates(cause: Cause) throws {
        let base = SimulatedFileSystem()
        let watching = TruncationWatchingFileSystem(base, pathSuffix: ".log")
        var options = simulatedOptions(
            base, durability: cause == .syncInNoneMode ? .none : .synchronous, preallocates: false)
        options.fileSystem = watching
        let writer = try Log.open(directory: storePath, options: options)
        try writer.append(Array("durable".utf8))
        try writer.sync()
        let durableEnd = writer.durableEnd
        let reader = try Log.openReadOnly(directory: storePath, fileSystem: base)
        if cause == .syncInNoneMode {
            // Written, published, not durable: the reader shows them; the cut-back will remove them.
            for number in 0..<3 { try writer.append(Array("seen, not durable \(number)".utf8)) }
            #expect(writer.durableEnd == durableEnd)
            // The last write is published within a millisecond (by the syncer); bounded: 10 s.
            for _ in 0..<10_000 where reader.visibleEnd < writer.visibleEnd {
                _ = try reader.refresh()
                Thread.sleep(forTimeInterval: 0.001)
            }
            #expect(reader.visibleEnd == writer.visibleEnd)
            #expect(try readAll(reader).count == 4)
        } else {
            #expect(try reader.refresh() == false)
        }
        let before = try #require(CoordinationFile.openForReading(directory: storePath, fileSystem: base)?.read())
        #expect(!before.isFailed)

        let observations = Mutex<[Observation]>([])
        watching.beforeTruncate = { byteCount in
            let slot = CoordinationFile.openForReading(directory: storePath, fileSystem: base)?.read()
            // The reader stands for another process: it asks from a thread of its own (this one
            // holds the writer's lock, and LockOrder allows no second log's lock under it).
            let readerOutcome = Mutex<LogError?>(nil)
            let asked = DispatchSemaphore(value: 0)
            Thread {
                readerOutcome.withLock { $0 = logError { _ = try reader.refresh() } }
                asked.signal()
            }.start()
            asked.wait()
            let readerError = readerOutcome.withLock { $0 }
            observations.withLock { $0.append(Observation(byteCount: byteCount, slot: slot, readerError: readerError)) }
        }
        let failure: LogError?
        switch cause {
        case .syncOfASave:
            base.failSync(path: .suffix(".log"))
            failure = logError { try writer.append(Array("never acknowledged".utf8)) }
            #expect(failure?.code == .syncFailed)
        case .syncInNoneMode:
            base.failSync(path: .suffix(".log"))
            failure = logError { try writer.sync() }
            #expect(failure?.code == .syncFailed)
        case .write:
            base.failWrite(code: ErrorCode.ioError, writingByteCount: 5, path: .suffix(".log"))
            failure = logError { try writer.append(Array("never written whole".utf8)) }
            #expect(failure?.code == .ioError)
        }
        watching.beforeTruncate = nil

        let seen = observations.withLock { $0 }
        #expect(seen.count == 1, "one cut-back, one truncation: \(seen.map(\.byteCount))")
        let atTruncation = try #require(seen.first)
        #expect(atTruncation.byteCount == SegmentScanner.filePosition(logicalOffset: durableEnd, baseOffset: 0))
        let slot = try #require(atTruncation.slot, "no slot when the cut-back truncated")
        #expect(slot.isFailed, "the slot did not say failed when the cut-back truncated")
        #expect(slot.epoch != before.epoch, "the epoch had not moved when the cut-back truncated")
        #expect(slot.visibleEnd == durableEnd)
        #expect(slot.storeID == before.storeID)
        #expect(atTruncation.readerError?.code == .reopenRequired, "\(String(describing: atTruncation.readerError))")

        // After it: still failed, the reader still told to reopen, a new read-only open shows the durable record only.
        let after = try #require(CoordinationFile.openForReading(directory: storePath, fileSystem: base)?.read())
        #expect(after.isFailed && after.epoch == slot.epoch && after.visibleEnd == durableEnd)
        #expect(logError { _ = try reader.refresh() }?.code == .reopenRequired)
        let reopened = try Log.openReadOnly(directory: storePath, fileSystem: base)
        #expect(try readAll(reopened).map(\.payload) == [Array("durable".utf8)])
        #expect(logError { try writer.append(Array("after".utf8)) }?.code == .readOnly)
        try reopened.close()
        try reader.close()
        try? writer.close()
    }
}

/// Forwards to a simulated file system; handles of paths ending in `pathSuffix` call
/// `beforeTruncate` (when set) with the new size before they forward `truncate(toByteCount:)`.
final class TruncationWatchingFileSystem: FileSystem, @unchecked Sendable {
    let base: SimulatedFileSystem
    let pathSuffix: String
    private let hook = Mutex<(@Sendable (UInt64) -> Void)?>(nil)

    init(_ base: SimulatedFileSystem, pathSuffix: String) {
        self.base = base
        self.pathSuffix = pathSuffix
    }

    var beforeTruncate: (@Sendable (UInt64) -> Void)? {
        get { hook.withLock { $0 } }
        set { hook.withLock { $0 = newValue } }
    }

    func openFile(_ path: String, mode: FileOpenMode) throws(FileSystemError) -> any LogStoreEngine.FileHandle {
        let handle = try base.openFile(path, mode: mode)
        guard path.hasSuffix(pathSuffix) else { return handle }
        return WatchedHandle(handle, fileSystem: self)
    }
    func createDirectory(_ path: String) throws(FileSystemError) { try base.createDirectory(path) }
    func removeFile(_ path: String) throws(FileSystemError) { try base.removeFile(path) }
    func rename(_ source: String, to destination: String) throws(FileSystemError) {
        try base.rename(source, to: destination)
    }
    func syncDirectory(_ path: String) throws(FileSystemError) { try base.syncDirectory(path) }
    func contentsOfDirectory(_ path: String) throws(FileSystemError) -> [String] { try base.contentsOfDirectory(path) }
    func kind(of path: String) throws(FileSystemError) -> FileKind? { try base.kind(of: path) }
    func identity(of path: String) throws(FileSystemError) -> FileIdentity { try base.identity(of: path) }

    final class WatchedHandle: LogStoreEngine.FileHandle, @unchecked Sendable {
        let handle: any LogStoreEngine.FileHandle
        let fileSystem: TruncationWatchingFileSystem

        init(_ handle: any LogStoreEngine.FileHandle, fileSystem: TruncationWatchingFileSystem) {
            self.handle = handle
            self.fileSystem = fileSystem
        }

        var path: String { handle.path }
        func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(FileSystemError) -> Int {
            try handle.read(into: buffer, at: offset)
        }
        func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(FileSystemError) {
            try handle.write(bytes, at: offset)
        }
        func syncData() throws(FileSystemError) { try handle.syncData() }
        func sync() throws(FileSystemError) { try handle.sync() }
        func size() throws(FileSystemError) -> UInt64 { try handle.size() }
        func truncate(toByteCount byteCount: UInt64) throws(FileSystemError) {
            fileSystem.beforeTruncate?(byteCount)
            try handle.truncate(toByteCount: byteCount)
        }
        func tryLockExclusive() throws(FileSystemError) -> Bool { try handle.tryLockExclusive() }
        func close() { handle.close() }
    }
}
