import LogStoreEngine

/// One regular file. Only accessed under the file system's lock.
final class Inode {
    let number: UInt64
    /// What reads return.
    var current: [UInt8] = []
    /// What survives a power cut for sure.
    var durable: [UInt8] = []
    /// Sectors of `current` written (or zeroed by a size change) since the last sync.
    var dirtySectors = Set<Int>()
    var currentLinks = 0
    var durableLinks = 0
    var openHandles = 0

    init(number: UInt64) {
        self.number = number
    }

    var isUnreferenced: Bool { currentLinks == 0 && durableLinks == 0 && openHandles == 0 }

    /// Whether the file still takes space: unlinked files without open handles do not, even
    /// while their removal is not durable.
    var occupiesSpace: Bool { currentLinks > 0 || openHandles > 0 }

    /// Marks every sector overlapping bytes `lower..<upper` dirty.
    func markDirty(_ lower: Int, _ upper: Int) {
        guard lower < upper else { return }
        let sectorSize = SimulatedFileSystem.sectorSize
        for sector in (lower / sectorSize)...((upper - 1) / sectorSize) {
            dirtySectors.insert(sector)
        }
    }

    /// Writes `bytes` at `offset` into the current content, growing it with zeros as needed.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int) {
        guard !bytes.isEmpty else { return }
        let end = offset + bytes.count
        let oldSize = current.count
        if end > oldSize {
            Self.appendZeros(&current, count: end - oldSize)
            // Zeros of a hole: the durable content may hold older bytes there.
            markDirty(oldSize, offset)
        }
        current.withUnsafeMutableBytes { target in
            (target.baseAddress! + offset).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        }
        markDirty(offset, end)
    }

    /// Sets the current size, zero-filling when growing.
    func resize(to size: Int) {
        let oldSize = current.count
        if size > oldSize {
            Self.appendZeros(&current, count: size - oldSize)
        } else if size < oldSize {
            current.removeLast(oldSize - size)
        }
        markDirty(min(oldSize, size), max(oldSize, size))
    }

    /// A successful sync: the current size and the dirty sectors become durable.
    func makeDurable() {
        Self.resize(&durable, to: current.count)
        let sectorSize = SimulatedFileSystem.sectorSize
        let size = current.count
        current.withUnsafeBytes { source in
            durable.withUnsafeMutableBytes { target in
                for sector in dirtySectors {
                    let lower = sector * sectorSize
                    let upper = min(lower + sectorSize, size)
                    if lower < upper {
                        (target.baseAddress! + lower).copyMemory(
                            from: source.baseAddress! + lower, byteCount: upper - lower)
                    }
                }
            }
        }
        dirtySectors.removeAll(keepingCapacity: true)
    }

    static func resize(_ bytes: inout [UInt8], to size: Int) {
        if size > bytes.count {
            appendZeros(&bytes, count: size - bytes.count)
        } else if size < bytes.count {
            bytes.removeLast(bytes.count - size)
        }
    }

    /// Appends `count` zeros by copying from one shared zero buffer. The obvious
    /// `append(contentsOf: repeatElement(0, count:))` goes element by element through the
    /// unspecialised standard library in a debug build (and, under TSan, through a `swift_once`
    /// per element); the syncer preallocates 2 MiB at a time, so sanitizer runs spent most of
    /// their time here.
    static func appendZeros(_ bytes: inout [UInt8], count: Int) {
        precondition(count >= 0)
        var left = count
        while left > 0 {
            let chunk = min(left, zeros.count)
            zeros.withUnsafeBufferPointer { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: $0[0..<chunk])) }
            left -= chunk
        }
    }

    private static let zeros = [UInt8](repeating: 0, count: 1 << 16)
}

/// One directory. Only accessed under the file system's lock.
final class Directory {
    let inodeNumber: UInt64
    /// Regular files: name -> inode number, as seen now.
    var current: [String: UInt64] = [:]
    /// Regular files: name -> inode number, as a power cut would leave them.
    var durable: [String: UInt64] = [:]
    /// Names of subdirectories; always durable.
    var subdirectories = Set<String>()

    init(inodeNumber: UInt64) {
        self.inodeNumber = inodeNumber
    }
}

/// Everything a ``SimulatedFileSystem`` holds. Only accessed under its lock.
final class State {
    var inodes: [UInt64: Inode] = [:]
    /// Every directory by normalised path, `/` included.
    var directories: [String: Directory] = [:]
    var nextInodeNumber: UInt64 = 2
    var nextHandleID: UInt64 = 1
    var openHandles = Set<UInt64>()
    /// Inode number -> the handle holding its `flock` exclusive.
    var lockHolders: [UInt64: UInt64] = [:]
    /// Inode number -> the handles holding its `flock` shared (never beside an exclusive holder).
    var sharedLockHolders: [UInt64: Set<UInt64>] = [:]

    var capacity: UInt64?
    var faults: [ArmedFault] = []

    var syncsHeld = false
    /// How long each `syncData`/`sync` takes, like a disk's flush (none by default).
    var syncLatency: Duration?
    /// Bumped by every release, so a sync held before a release is not caught by a later hold.
    var holdGeneration: UInt64 = 0
    var heldSyncCount = 0
    var startedSyncCount = 0
    var completedSyncCount = 0

    init() {
        directories["/"] = Directory(inodeNumber: 1)
    }

    enum Entry {
        case file(Inode)
        case directory(Directory)
    }

    func lookup(_ normalized: String) -> Entry? {
        if let directory = directories[normalized] { return .directory(directory) }
        guard let (parent, name) = SimulatedFileSystem.split(normalized),
            let number = directories[parent]?.current[name]
        else { return nil }
        return .file(inodes[number]!)
    }

    func makeInode() -> Inode {
        let inode = Inode(number: nextInodeNumber)
        nextInodeNumber += 1
        inodes[inode.number] = inode
        return inode
    }

    func addDirectory(_ normalized: String, in parent: Directory, name: String) {
        directories[normalized] = Directory(inodeNumber: nextInodeNumber)
        nextInodeNumber += 1
        parent.subdirectories.insert(name)
    }

    /// The directory at a normalised path, or `ENOENT` / `ENOTDIR`.
    func existingDirectory(_ normalized: String, operation: String, path: String) throws(FileSystemError) -> Directory {
        if let directory = directories[normalized] { return directory }
        let code = lookup(normalized) == nil ? ErrorCode.notFound : ErrorCode.notDirectory
        throw FileSystemError(code: code, operation: operation, path: path)
    }

    /// The directory that holds a normalised path, and the path's last component.
    func parentDirectory(of normalized: String, operation: String, path: String) throws(FileSystemError) -> (
        Directory, String
    ) {
        guard let (parent, name) = SimulatedFileSystem.split(normalized) else {
            throw FileSystemError(code: ErrorCode.isDirectory, operation: operation, path: path)
        }
        return (try existingDirectory(parent, operation: operation, path: path), name)
    }

    // Link counting: an inode lives while a current or durable entry or an open handle names it.

    func setCurrentEntry(in directory: Directory, name: String, to number: UInt64) {
        inodes[number]!.currentLinks += 1
        if let old = directory.current.updateValue(number, forKey: name) {
            inodes[old]!.currentLinks -= 1
            collect(old)
        }
    }

    func removeCurrentEntry(in directory: Directory, name: String) {
        if let old = directory.current.removeValue(forKey: name) {
            inodes[old]!.currentLinks -= 1
            collect(old)
        }
    }

    func makeEntriesDurable(_ directory: Directory) {
        let old = directory.durable
        for number in directory.current.values { inodes[number]!.durableLinks += 1 }
        for number in old.values { inodes[number]!.durableLinks -= 1 }
        directory.durable = directory.current
        for number in old.values { collect(number) }
    }

    func collect(_ number: UInt64) {
        if let inode = inodes[number], inode.isUnreferenced {
            inodes[number] = nil
            lockHolders[number] = nil
            sharedLockHolders[number] = nil
        }
    }

    /// Bytes taken by files, for the capacity check.
    var usedByteCount: UInt64 {
        var total: UInt64 = 0
        for inode in inodes.values where inode.occupiesSpace { total += UInt64(inode.current.count) }
        return total
    }

    /// Bytes a file may still grow by, or `nil` when capacity is unlimited.
    var availableByteCount: UInt64? {
        guard let capacity else { return nil }
        let used = usedByteCount
        return capacity > used ? capacity - used : 0
    }
}
