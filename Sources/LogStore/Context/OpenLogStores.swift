import Foundation
import LogStoreEngine
import Synchronization

/// One open ``LogStore`` per store directory in a process (DECISIONS.md D11: "one open store per
/// (device, inode)"): a second writing ``ModelContainer`` on a directory this process has open
/// shares the open store instead of failing with `alreadyOpenInProcess`. Each container holds the
/// store through a ``SharedStoreBox``; the store closes when the last container closes it.
enum OpenLogStores {
    struct Key: Hashable {
        var device: UInt64
        var inode: UInt64
    }

    final class Entry {
        weak var store: LogStore?
        var openCount = 0
    }

    /// Keyed by the directory's device and inode (two paths to one directory share too).
    private static let entries = Mutex<[Key: Entry]>([:])

    static func key(of directory: String) -> Key? {
        var status = stat()
        guard stat(directory, &status) == 0 else { return nil }
        return Key(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
    }

    /// The store open on `configuration.directory` in this process when its configuration
    /// matches (same schema, durability, unique policy, sharing), or a newly opened one. The
    /// registry is not held while a store opens (an open may wait for a sync, a turn, or a
    /// simulated file system's gate); two threads opening one directory at once are told apart
    /// by the engine's own registry (`alreadyOpenInProcess` for the second).
    static func open(
        _ configuration: LogStoreConfiguration, migrationPlan: (any SchemaMigrationPlan.Type)?
    ) throws -> any ModelStore {
        // Real directories only: a simulated file system's paths are not the disk's.
        guard configuration.fileSystem is PosixFileSystem else {
            return StoreBox(try LogStore(configuration, migrationPlan: migrationPlan))
        }
        if let key = key(of: configuration.directory),
            let shared = try entries.withLock({ entries throws -> SharedStoreBox? in
                guard let entry = entries[key], let store = entry.store, store.isOpen else { return nil }
                let open = store.configuration
                guard open.schema == configuration.schema, open.durability == configuration.durability,
                    open.uniqueCollisionPolicy == configuration.uniqueCollisionPolicy,
                    open.allowsOtherWriters == configuration.allowsOtherWriters
                else {
                    throw LogStoreError.log(
                        LogError(
                            .alreadyOpenInProcess,
                            "The store at \(configuration.directory) is already open in this process with another "
                                + "configuration (schema, durability, unique policy or allowsOtherWriters differ); a "
                                + "second container shares the open store only with the same ones.",
                            file: configuration.directory))
                }
                entry.openCount += 1
                return SharedStoreBox(store: store, key: key)
            })
        {
            return shared
        }
        let store = try LogStore(configuration, migrationPlan: migrationPlan)
        guard let key = key(of: configuration.directory) else { return SharedStoreBox(store: store, key: nil) }
        entries.withLock { entries in
            let entry = Entry()
            entry.store = store
            entry.openCount = 1
            entries[key] = entry
        }
        return SharedStoreBox(store: store, key: key)
    }

    /// A container let go of the store: the last one closes it (`close`), or merely drops its
    /// reference (deinit: the store closes when released).
    static func release(_ key: Key, store: LogStore, closing: Bool) throws {
        let last = entries.withLock { entries -> Bool in
            guard let entry = entries[key], entry.store === store else { return true }
            entry.openCount -= 1
            if entry.openCount > 0 { return false }
            entries[key] = nil
            return true
        }
        if last && closing { try store.close() }
    }
}

/// A container's hold on a store shared by every container of the process on its directory: the
/// store's box, except that closing releases this container's hold (the store closes with the last).
final class SharedStoreBox: StoreBox<LogStore>, @unchecked Sendable {
    // @unchecked: `store` and `key` are immutable; `released` is atomic.
    private let key: OpenLogStores.Key?
    private let released = Mutex(false)

    init(store: LogStore, key: OpenLogStores.Key?) {
        self.key = key
        super.init(store)
    }

    deinit {
        if let key, !released.withLock({ $0 }) {
            try? OpenLogStores.release(key, store: store, closing: false)
        }
    }

    /// Closes the store when this is the last container holding it; closing twice is harmless.
    override func close() throws {
        guard released.withLock({ released in
            defer { released = true }
            return !released
        }) else { return }
        if let key {
            try OpenLogStores.release(key, store: store, closing: true)
        } else {
            try super.close()
        }
    }
}
