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

    private init(identity: FileIdentity, handle: any FileHandle) {
        self.identity = identity
        self.handle = handle
    }

    /// Takes the lock of `directory`, or throws ``LogError/Code/locked`` /
    /// ``LogError/Code/alreadyOpenInProcess``.
    static func acquire(directory: String, fileSystem: any FileSystem) throws(LogError) -> DirectoryLock {
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
            // A hint for the message above in the next process; not synced, not relied upon.
            let hint = Array(
                "pid \(ProcessInfo.processInfo.processIdentifier) on \(ProcessInfo.processInfo.hostName) since \(Date())\n"
                    .utf8)
            try? handle.truncate(toByteCount: 0)
            try? handle.write(hint, at: 0)
            return DirectoryLock(identity: identity, handle: handle)
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

    private static let keptUntilExit = Mutex<[DirectoryLock]>([])

    /// Holds `lock` for the rest of the process (after a failed cut-back, see `LogCore.failStop`).
    static func keepUntilExit(_ lock: DirectoryLock) {
        keptUntilExit.withLock { $0.append(lock) }
    }

    /// Releases the lock (closing the handle drops the `flock`) and the registry entry.
    func release() {
        guard released.setOnce() else { return }
        handle.close()
        _ = Self.openStores.withLock { $0.remove(identity) }
    }

    deinit { release() }
}
