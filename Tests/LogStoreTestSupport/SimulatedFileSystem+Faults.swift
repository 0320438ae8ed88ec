import LogStoreEngine

import struct Foundation.Date
import class Foundation.NSCondition

extension SimulatedFileSystem {
    /// A kind of call a fault can be armed for.
    public enum Operation: Sendable, Hashable, CaseIterable {
        /// ``FileSystem/openFile(_:mode:)``, every mode.
        case open
        /// ``FileHandle/read(into:at:)``.
        case read
        /// ``FileHandle/write(_:at:)``.
        case write
        /// ``FileHandle/syncData()`` and ``FileHandle/sync()`` (not ``FileSystem/syncDirectory(_:)``).
        case sync
        /// ``FileSystem/syncDirectory(_:)``.
        case syncDirectory
        /// ``FileSystem/rename(_:to:)``; the filter is matched against both paths.
        case rename
        /// ``FileSystem/removeFile(_:)``.
        case remove
        /// ``FileHandle/truncate(toByteCount:)``.
        case truncate
        /// ``FileSystem/createDirectory(_:)``.
        case createDirectory
    }

    /// Which paths a fault applies to. Matched against the normalised absolute path (for handle
    /// calls, the path the handle was opened with). A string literal means ``exactly(_:)``.
    public struct PathFilter: Sendable, ExpressibleByStringLiteral {
        let matches: @Sendable (String) -> Bool

        /// A filter from a predicate on the normalised absolute path.
        public init(_ predicate: @escaping @Sendable (String) -> Bool) {
            matches = predicate
        }

        public init(stringLiteral path: String) {
            self = .exactly(path)
        }

        /// Every path.
        public static let any = PathFilter { _ in true }

        /// One path (normalised before comparing).
        public static func exactly(_ path: String) -> PathFilter {
            let normalized = SimulatedFileSystem.normalize(path)
            return PathFilter { $0 == normalized }
        }

        /// Paths ending with `suffix`, for example `".log"`.
        public static func suffix(_ suffix: String) -> PathFilter {
            PathFilter { $0.hasSuffix(suffix) }
        }
    }

    // MARK: Arming faults

    /// Arms a fault: the `count`+1-th call of `operation` from now whose path matches `path`
    /// fails with `code`. Matching calls before it succeed. With `repeating`, every matching
    /// call from that one on fails, until ``clearFaults()``.
    ///
    /// For ``Operation/write``, `writingByteCount` leading bytes of the failing write reach the
    /// file first (reported in ``FileSystemError/byteCountWritten``). For ``Operation/sync``,
    /// the failure is evaluated when the sync would complete (after ``releaseSyncs()`` for a held
    /// one), makes nothing durable, and drops the file's unsynced sectors for good (fsyncgate).
    public func injectFault(
        _ operation: Operation, after count: Int = 0, code: Int32 = ErrorCode.ioError,
        path: PathFilter = .any, writingByteCount: Int? = nil, repeating: Bool = false
    ) {
        precondition(count >= 0, "a fault cannot fire before it is armed")
        let fault = ArmedFault(
            operation: operation, remaining: count, code: code, filter: path,
            writingByteCount: writingByteCount, repeating: repeating)
        locked { state in state.faults.append(fault) }
    }

    /// The `count`+1-th `write` from now fails with `code`, after `writingByteCount` of its
    /// leading bytes (default none) reached the file.
    public func failWrite(
        after count: Int = 0, code: Int32 = ErrorCode.ioError,
        writingByteCount: Int? = nil, path: PathFilter = .any
    ) {
        injectFault(.write, after: count, code: code, path: path, writingByteCount: writingByteCount)
    }

    /// The `count`+1-th `syncData`/`sync` from now fails with `code`, making nothing durable
    /// and losing the file's unsynced sectors for good.
    public func failSync(after count: Int = 0, code: Int32 = ErrorCode.ioError, path: PathFilter = .any) {
        injectFault(.sync, after: count, code: code, path: path)
    }

    /// The `count`+1-th `syncDirectory` from now fails with `code` and makes nothing durable.
    public func failSyncDirectory(after count: Int = 0, code: Int32 = ErrorCode.ioError, path: PathFilter = .any) {
        injectFault(.syncDirectory, after: count, code: code, path: path)
    }

    /// The `count`+1-th `rename` from now (whose source or destination matches) fails, changing
    /// nothing.
    public func failRename(after count: Int = 0, code: Int32 = ErrorCode.ioError, path: PathFilter = .any) {
        injectFault(.rename, after: count, code: code, path: path)
    }

    /// The `count`+1-th `openFile` from now (any mode) fails, creating nothing.
    public func failOpen(after count: Int = 0, code: Int32 = ErrorCode.ioError, path: PathFilter = .any) {
        injectFault(.open, after: count, code: code, path: path)
    }

    /// The `count`+1-th `read` from now fails.
    public func failRead(after count: Int = 0, code: Int32 = ErrorCode.ioError, path: PathFilter = .any) {
        injectFault(.read, after: count, code: code, path: path)
    }

    /// The `count`+1-th `removeFile` from now fails, removing nothing.
    public func failRemove(after count: Int = 0, code: Int32 = ErrorCode.ioError, path: PathFilter = .any) {
        injectFault(.remove, after: count, code: code, path: path)
    }

    /// The `count`+1-th `truncate` from now fails, changing nothing.
    public func failTruncate(after count: Int = 0, code: Int32 = ErrorCode.ioError, path: PathFilter = .any) {
        injectFault(.truncate, after: count, code: code, path: path)
    }

    /// Disarms every fault (capacity and held syncs are left as they are).
    public func clearFaults() {
        locked { state in state.faults.removeAll() }
    }

    /// Faults armed and not yet fired (repeating ones stay counted).
    public var armedFaultCount: Int {
        locked { state in state.faults.count }
    }

    // MARK: Capacity

    /// Limits the total size of all files to `byteCount` (`nil`: unlimited). A write that
    /// would grow the total past it writes what fits and fails with `ENOSPC`; a growing
    /// truncate fails whole. Overwriting bytes within a file's size always succeeds. Files
    /// already over the limit are kept. Removed files stop counting once no handle is open on
    /// them, even before the removal is durable.
    public func setCapacity(byteCount: UInt64?) {
        locked { state in state.capacity = byteCount }
    }

    /// The capacity set by ``setCapacity(byteCount:)``.
    public var capacity: UInt64? {
        locked { state in state.capacity }
    }

    /// The bytes counted against the capacity: the current sizes of linked or open files.
    public var usedByteCount: UInt64 {
        locked { state in state.usedByteCount }
    }

    // MARK: Holding syncs

    /// Makes every `syncData`/`sync` take `latency` (nil: none), as a disk's flush does, so that
    /// tests of sync sharing see the overlap they would see on a disk.
    public func setSyncLatency(_ latency: Duration?) {
        locked { state in state.syncLatency = latency }
    }

    /// From now on, every `syncData`/`sync` blocks, after being counted in
    /// ``startedSyncCount``, until ``releaseSyncs()``. Always pair with a release (`defer`),
    /// or the blocked threads never finish.
    public func holdSyncs() {
        locked { state in state.syncsHeld = true }
    }

    /// Lets every held sync go on, and stops holding new ones.
    public func releaseSyncs() {
        locked { state in
            state.syncsHeld = false
            state.holdGeneration += 1
        }
        condition.broadcast()
    }

    /// Waits until at least `count` syncs are blocked by ``holdSyncs()``. Returns `false` on
    /// timeout.
    public func waitUntilSyncsHeld(count: Int, timeout: Duration = .seconds(10)) -> Bool {
        wait(timeout: timeout) { state in state.heldSyncCount >= count }
    }

    /// Waits until at least `count` `syncData`/`sync` calls have returned. Returns `false` on
    /// timeout.
    public func waitUntilSyncCount(atLeast count: Int, timeout: Duration = .seconds(10)) -> Bool {
        wait(timeout: timeout) { state in state.completedSyncCount >= count }
    }

    /// Syncs blocked right now by ``holdSyncs()``.
    public var heldSyncCount: Int {
        locked { state in state.heldSyncCount }
    }

    /// `syncData`/`sync` calls that have returned, successfully or not.
    public var syncCount: Int {
        locked { state in state.completedSyncCount }
    }

    /// `syncData`/`sync` calls that have begun (held ones included).
    public var startedSyncCount: Int {
        locked { state in state.startedSyncCount }
    }

    private func wait(timeout: Duration, until isDone: (State) -> Bool) -> Bool {
        let (seconds, attoseconds) = timeout.components
        let deadline = Date(timeIntervalSinceNow: Double(seconds) + Double(attoseconds) / 1e18)
        condition.lock()
        defer { condition.unlock() }
        while !isDone(state) {
            if !condition.wait(until: deadline) { return isDone(state) }
        }
        return true
    }
}

/// A fault waiting for its call.
struct ArmedFault {
    var operation: SimulatedFileSystem.Operation
    /// Matching calls still to let through.
    var remaining: Int
    var code: Int32
    var filter: SimulatedFileSystem.PathFilter
    var writingByteCount: Int?
    var repeating: Bool
}

extension State {
    /// Counts a call of `operation` on `path` (and `otherPath`) against the armed faults;
    /// returns the fault that fires for it, if any.
    func takeFault(_ operation: SimulatedFileSystem.Operation, path: String, orPath otherPath: String? = nil)
        -> ArmedFault?
    {
        if faults.isEmpty { return nil }
        var fired: ArmedFault?
        var firedIndex: Int?
        for index in faults.indices where faults[index].operation == operation {
            let filter = faults[index].filter
            guard filter.matches(path) || (otherPath.map(filter.matches) ?? false) else { continue }
            if faults[index].remaining > 0 {
                faults[index].remaining -= 1
            } else if fired == nil {
                fired = faults[index]
                firedIndex = index
            }
        }
        if let firedIndex, !faults[firedIndex].repeating {
            faults.remove(at: firedIndex)
        }
        return fired
    }

    /// Throws the fault armed for this call, if one fires.
    func checkFault(
        _ operation: SimulatedFileSystem.Operation, path: String, orPath otherPath: String? = nil,
        operation name: String, reportedPath: String
    ) throws(FileSystemError) {
        if let fault = takeFault(operation, path: path, orPath: otherPath) {
            throw FileSystemError(code: fault.code, operation: name, path: reportedPath)
        }
    }
}
