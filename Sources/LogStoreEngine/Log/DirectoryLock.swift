import Foundation
import Synchronization

/// The exclusive `flock` on a store's `LOCK` file, plus a registry of stores this process has
/// open, keyed by the directory's device and inode, which catches a second open in the same
/// process with a clearer message than the lock would give.
///
/// `LOCK` is created once and never unlinked, renamed or replaced: replacing it would let two
/// processes hold locks on two different inodes of the same name.
final class DirectoryLock: Sendable {
    private static let openStores = Mutex<Set<FileIdentity>>([])

    let identity: FileIdentity
    private let handle: any FileHandle
    private let released = AtomicFlag()

    private init(identity: FileIdentity, handle: any FileHandle, wasAlone: Bool) {
        self.identity = identity
        self.handle = handle
        self.wasAlone = wasAlone
    }

    /// A process that was alone and has recovered the store lets other writing processes in:
    /// `LOCK` becomes shared (D11 stage 2). Linux converts a `flock` by dropping the old lock
    /// first; a process that takes it exclusive in that instant is alone too, and finds a store
    /// this one has just recovered and not yet written to.
    func convertToShared() throws(LogError) {
        let granted: Bool
        do { granted = try handle.tryLockShared() } catch { throw LogError.io(error, "Sharing \(handle.path)") }
        guard granted else {
            throw LogError(
                .locked, "Another process took \(handle.path) exclusively while this one let other writers in.",
                file: handle.path)
        }
    }

    /// Whether this process took `LOCK` exclusive at open (a store shared by several writers,
    /// D11 stage 2: it was alone, so it ran the full recovery). Always `true` for an exclusive open.
    let wasAlone: Bool

    /// Takes the lock of `directory`, or throws ``LogError/Code/locked`` /
    /// ``LogError/Code/alreadyOpenInProcess``. With `shared` (a store several writing processes
    /// share, D11 stage 2) it first tries `LOCK` exclusive without waiting — granted, this process
    /// is alone (``wasAlone``) and keeps it exclusive until ``convertToShared()`` — and otherwise
    /// takes it shared, waiting at most 30 s for a process that is alone to finish its recovery.
    static func acquire(directory: String, fileSystem: any FileSystem, shared: Bool = false) throws(LogError)
        -> DirectoryLock
    {
        let identity: FileIdentity
        do { identity = try fileSystem.identity(of: directory) } catch {
            throw LogError.io(error, "Reading the store directory \(directory)")
        }
        let inserted = openStores.withLock { $0.insert(identity).inserted }
        if !inserted, keptUntilExit.withLock({ $0.contains { $0.identity == identity } }) {
            throw LogError(
                .alreadyOpenInProcess,
                "The store at \(directory) stays locked in this process: a failed "
                    + "fsync could not be cut back, so the page cache may still hold bytes that never became durable. "
                    + "Restart the process to open it again.", file: directory)
        }
        guard inserted else {
            throw LogError(
                .alreadyOpenInProcess,
                "The store at \(directory) is already open in this process; "
                    + "share the open instance instead of opening it twice.", file: directory)
        }
        do throws(LogError) {
            let path = LogFileNames.join(directory, FormatConstants.lockFileName)
            let handle: any FileHandle
            do { handle = try fileSystem.openFile(path, mode: .createOrOpen) } catch {
                throw LogError.io(error, "Opening the lock file")
            }
            let locked: Bool
            do { locked = try handle.tryLockExclusive() } catch { throw LogError.io(error, "Locking \(path)") }
            if shared {
                if locked {
                    Self.writeHolderHint(handle)
                    return DirectoryLock(identity: identity, handle: handle, wasAlone: true)
                }
                let deadline = monotonicNanoseconds() + SharedFileLock.waitNanosecondsMax
                var pause: UInt64 = 20_000
                // Bounded: every pass sleeps, and the deadline ends it.
                while true {
                    let granted: Bool
                    do { granted = try handle.tryLockShared() } catch {
                        handle.close()
                        throw LogError.io(error, "Locking \(path) shared (several writing processes need POSIX flock)")
                    }
                    if granted { return DirectoryLock(identity: identity, handle: handle, wasAlone: false) }
                    guard monotonicNanoseconds() < deadline else {
                        let holder = Self.holderHint(handle)
                        handle.close()
                        throw LogError(
                            .locked,
                            "The store at \(directory) is held exclusively by another process"
                                + (holder.isEmpty ? "" : " (\(holder))") + " for more than 30 s: a process that is "
                                + "alone recovering it, repairing it, or one that opened it without allowsOtherWriters. "
                                + "Open it there with allowsOtherWriters too, or close it there.", file: path)
                    }
                    usleep(UInt32(pause / 1000))
                    pause = min(pause * 2, 1_000_000)
                }
            }
            guard locked else {
                let holder = Self.holderHint(handle)
                throw LogError(
                    .locked,
                    "The store at \(directory) is open for writing in another process"
                        + (holder.isEmpty ? "" : " (\(holder))") + ". Close it there, or open this one read-only "
                        + "beside it: ModelConfiguration(url:allowsSave: false) or Log.openReadOnly, which follow "
                        + "that process's saves.",
                    file: path)
            }
            Self.writeHolderHint(handle)
            return DirectoryLock(identity: identity, handle: handle, wasAlone: true)
        } catch {
            _ = openStores.withLock { $0.remove(identity) }
            throw error
        }
    }

    private static func holderHint(_ handle: any FileHandle) -> String {
        var bytes = [UInt8](repeating: 0, count: 200)
        let count = (try? handle.read(into: &bytes, range: 0..<bytes.count, at: 0)) ?? 0
        return String(decoding: bytes[0..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A hint for the "locked" messages in the next process (exclusive holder only, also a shared
    /// store's process that is alone while it recovers); not synced, not relied upon.
    private static func writeHolderHint(_ handle: any FileHandle) {
        let hint = Array(
            "pid \(ProcessInfo.processInfo.processIdentifier) on \(ProcessInfo.processInfo.hostName) since \(Date())\n"
                .utf8)
        try? handle.truncate(toByteCount: 0)
        try? handle.write(hint, at: 0)
    }

    private static let keptUntilExit = Mutex<[DirectoryLock]>([])

    /// Holds `lock` for the rest of the process (after a failed cut-back, see `LogCore.failStop`).
    static func keepUntilExit(_ lock: DirectoryLock) {
        keptUntilExit.withLock { $0.append(lock) }
    }

    /// Releases the lock and the registry entry. The `flock` is let go explicitly before the
    /// handle closes: a close drops it only once every copy of the descriptor is closed, and a
    /// child this process forked to run a command holds a copy until it execs — a store closed
    /// here meanwhile stayed locked, and its reopen was refused naming this very process (seen in
    /// the test suite, which spawns the `logstore` tool from parallel tests; with
    /// `allowsOtherWriters`, the reopen took `LOCK` shared and thought other processes were there).
    func release() {
        guard released.setOnce() else { return }
        try? handle.unlock()
        handle.close()
        _ = Self.openStores.withLock { $0.remove(identity) }
    }

    deinit { release() }
}
