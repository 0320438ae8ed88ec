import LogStoreEngine
import Synchronization

import class Foundation.NSCondition

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An in-memory ``FileSystem`` that models what a disk keeps when the power fails.
///
/// Every regular file (inode) has a *current* content, what reads return, and a *durable*
/// content, what survives ``powerCut(_:)``. ``FileHandle/syncData()`` and ``FileHandle/sync()``
/// copy the sectors written since the last sync (512-byte *dirty sectors*) and the current size
/// to the durable content. Every directory likewise has current and durable entries
/// (name -> inode); ``syncDirectory(_:)`` makes the current entries durable. Directories
/// themselves are durable as soon as they are created.
///
/// Paths are absolute; a relative path is taken relative to `/`. Repeated and trailing slashes,
/// `.` and `..` are resolved textually. Renaming directories is not simulated (`ENOTSUP`).
///
/// Faults (I/O errors, out of space, held syncs) are armed through the methods in
/// `SimulatedFileSystem+Faults.swift`; test helpers that read or alter the state directly are in
/// `SimulatedFileSystem+Inspection.swift`.
///
/// All mutable state lives in ``state`` and is only touched while ``condition`` is locked, so the
/// class can be shared between threads: hence `@unchecked Sendable`.
public final class SimulatedFileSystem: FileSystem, @unchecked Sendable {
    /// The unit in which unsynced data is tracked and, on a power cut, kept or lost.
    public static let sectorSize = 512

    /// The device number ``identity(of:)`` reports for every path of this file system: unique
    /// per instance (the first is 1), and new after ``powerCut(_:)``, so that an engine's
    /// per-process registry of open stores (keyed by ``FileIdentity``) neither confuses two
    /// simulated file systems used by parallel tests nor the stores before and after a cut.
    public let deviceNumber: UInt64

    private static let devicesMade = Atomic<UInt64>(0)

    /// Guards ``state``; also the condition held syncs and ``waitUntilSyncsHeld(count:timeout:)``
    /// wait on.
    let condition = NSCondition()
    /// Only accessed while ``condition`` is locked.
    let state: State

    /// An empty file system holding only the root directory `/`.
    public init() {
        state = State()
        deviceNumber = Self.devicesMade.add(1, ordering: .relaxed).newValue
    }

    init(state: State) {
        self.state = state
        deviceNumber = Self.devicesMade.add(1, ordering: .relaxed).newValue
    }

    /// Runs `body` with the lock held.
    func locked<T, E: Error>(_ body: (State) throws(E) -> T) throws(E) -> T {
        condition.lock()
        defer { condition.unlock() }
        return try body(state)
    }

    // MARK: FileSystem

    public func openFile(_ path: String, mode: FileOpenMode) throws(FileSystemError) -> any FileHandle {
        let normalized = Self.normalize(path)
        let opened: (id: UInt64, inode: UInt64) = try locked { (state) throws(FileSystemError) in
            try state.checkFault(.open, path: normalized, operation: "open", reportedPath: path)
            let (directory, name) = try state.parentDirectory(of: normalized, operation: "open", path: path)
            if directory.subdirectories.contains(name) {
                throw FileSystemError(code: ErrorCode.isDirectory, operation: "open", path: path)
            }
            let inode: Inode
            if let number = directory.current[name] {
                if mode == .createNew {
                    throw FileSystemError(code: ErrorCode.exists, operation: "open", path: path)
                }
                inode = state.inodes[number]!
            } else {
                if mode == .readOnly || mode == .readWrite {
                    throw FileSystemError(code: ErrorCode.notFound, operation: "open", path: path)
                }
                inode = state.makeInode()
                state.setCurrentEntry(in: directory, name: name, to: inode.number)
            }
            inode.openHandles += 1
            let id = state.nextHandleID
            state.nextHandleID += 1
            state.openHandles.insert(id)
            return (id, inode.number)
        }
        // Made outside the lock: a handle's deinit takes the lock.
        return SimulatedFileHandle(
            fileSystem: self, id: opened.id, inodeNumber: opened.inode, path: path,
            normalizedPath: normalized, isWritable: mode != .readOnly)
    }

    public func createDirectory(_ path: String) throws(FileSystemError) {
        let normalized = Self.normalize(path)
        try locked { (state) throws(FileSystemError) in
            try state.checkFault(.createDirectory, path: normalized, operation: "mkdir", reportedPath: path)
            if state.directories[normalized] != nil { return }
            let (parent, name) = try state.parentDirectory(of: normalized, operation: "mkdir", path: path)
            if parent.current[name] != nil {
                throw FileSystemError(code: ErrorCode.exists, operation: "mkdir", path: path)
            }
            state.addDirectory(normalized, in: parent, name: name)
        }
    }

    public func removeFile(_ path: String) throws(FileSystemError) {
        let normalized = Self.normalize(path)
        try locked { (state) throws(FileSystemError) in
            try state.checkFault(.remove, path: normalized, operation: "unlink", reportedPath: path)
            if state.directories[normalized] != nil {
                throw FileSystemError(code: ErrorCode.isDirectory, operation: "unlink", path: path)
            }
            let (directory, name) = try state.parentDirectory(of: normalized, operation: "unlink", path: path)
            guard directory.current[name] != nil else {
                throw FileSystemError(code: ErrorCode.notFound, operation: "unlink", path: path)
            }
            state.removeCurrentEntry(in: directory, name: name)
        }
    }

    public func rename(_ source: String, to destination: String) throws(FileSystemError) {
        let from = Self.normalize(source)
        let to = Self.normalize(destination)
        let reported = "\(source) -> \(destination)"
        try locked { (state) throws(FileSystemError) in
            try state.checkFault(.rename, path: from, orPath: to, operation: "rename", reportedPath: reported)
            if state.directories[from] != nil {
                throw FileSystemError(code: ENOTSUP, operation: "rename (directory)", path: reported)
            }
            let (sourceDirectory, sourceName) = try state.parentDirectory(of: from, operation: "rename", path: reported)
            guard let inode = sourceDirectory.current[sourceName] else {
                throw FileSystemError(code: ErrorCode.notFound, operation: "rename", path: reported)
            }
            if state.directories[to] != nil {
                throw FileSystemError(code: ErrorCode.isDirectory, operation: "rename", path: reported)
            }
            let (destinationDirectory, destinationName) = try state.parentDirectory(
                of: to, operation: "rename", path: reported)
            // POSIX: renaming a file onto a link to the same inode does nothing.
            if destinationDirectory.current[destinationName] == inode { return }
            state.setCurrentEntry(in: destinationDirectory, name: destinationName, to: inode)
            state.removeCurrentEntry(in: sourceDirectory, name: sourceName)
        }
    }

    public func syncDirectory(_ path: String) throws(FileSystemError) {
        let normalized = Self.normalize(path)
        try locked { (state) throws(FileSystemError) in
            try state.checkFault(.syncDirectory, path: normalized, operation: "fsync directory", reportedPath: path)
            let directory = try state.existingDirectory(normalized, operation: "open directory", path: path)
            state.makeEntriesDurable(directory)
        }
    }

    public func contentsOfDirectory(_ path: String) throws(FileSystemError) -> [String] {
        let normalized = Self.normalize(path)
        return try locked { (state) throws(FileSystemError) in
            let directory = try state.existingDirectory(normalized, operation: "opendir", path: path)
            return (Array(directory.current.keys) + Array(directory.subdirectories)).sorted()
        }
    }

    public func kind(of path: String) throws(FileSystemError) -> FileKind? {
        let normalized = Self.normalize(path)
        return locked { state in
            switch state.lookup(normalized) {
            case .directory: .directory
            case .file: .regular
            case nil: nil
            }
        }
    }

    public func identity(of path: String) throws(FileSystemError) -> FileIdentity {
        let normalized = Self.normalize(path)
        return try locked { (state) throws(FileSystemError) in
            switch state.lookup(normalized) {
            case .directory(let directory):
                return FileIdentity(device: deviceNumber, inode: directory.inodeNumber)
            case .file(let inode):
                return FileIdentity(device: deviceNumber, inode: inode.number)
            case nil:
                throw FileSystemError(code: ErrorCode.notFound, operation: "stat", path: path)
            }
        }
    }

    // MARK: Paths

    /// `path` as an absolute path without empty components, `.` or `..`.
    static func normalize(_ path: String) -> String {
        var parts: [Substring] = []
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            if component == "." { continue }
            if component == ".." {
                _ = parts.popLast()
                continue
            }
            parts.append(component)
        }
        return "/" + parts.joined(separator: "/")
    }

    /// The parent directory and last component of a normalised path; `nil` for `/`.
    static func split(_ normalized: String) -> (parent: String, name: String)? {
        guard normalized != "/", let slash = normalized.lastIndex(of: "/") else { return nil }
        let parent = slash == normalized.startIndex ? "/" : String(normalized[..<slash])
        return (parent, String(normalized[normalized.index(after: slash)...]))
    }
}
