import LogStoreEngine

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Test helpers that read or change the state directly, bypassing faults and capacity.
extension SimulatedFileSystem {
    /// The current content of the regular file at `path` (what reads return), or `nil`.
    public func bytes(at path: String) -> [UInt8]? {
        let normalized = Self.normalize(path)
        return locked { state in
            guard case .file(let inode) = state.lookup(normalized) else { return nil }
            return inode.current
        }
    }

    /// The durable content of the file currently at `path`: what a power cut keeps for sure
    /// *if* its directory entry survives (see ``durableFileNames(in:)``). `nil` when no file is
    /// at `path`.
    public func durableBytes(at path: String) -> [UInt8]? {
        let normalized = Self.normalize(path)
        return locked { state in
            guard case .file(let inode) = state.lookup(normalized) else { return nil }
            return inode.durable
        }
    }

    /// Makes the file at `path` hold `bytes`, durably (content and directory entry), creating
    /// it and any missing parent directories. Open handles on an existing file see the change.
    public func setBytes(_ bytes: [UInt8], at path: String) throws(FileSystemError) {
        let normalized = Self.normalize(path)
        try locked { (state) throws(FileSystemError) in
            guard let (parentPath, name) = Self.split(normalized) else {
                throw FileSystemError(code: ErrorCode.isDirectory, operation: "setBytes", path: path)
            }
            let parent = try state.makeDirectories(parentPath, path: path)
            if parent.subdirectories.contains(name) {
                throw FileSystemError(code: ErrorCode.isDirectory, operation: "setBytes", path: path)
            }
            let inode: Inode
            if let number = parent.current[name] {
                inode = state.inodes[number]!
            } else {
                inode = state.makeInode()
                state.setCurrentEntry(in: parent, name: name, to: inode.number)
            }
            inode.current = bytes
            inode.durable = bytes
            inode.dirtySectors.removeAll()
            if parent.durable[name] != inode.number {
                inode.durableLinks += 1
                if let old = parent.durable.updateValue(inode.number, forKey: name) {
                    state.inodes[old]!.durableLinks -= 1
                    state.collect(old)
                }
            }
        }
    }

    /// XORs the byte at `offset` of the file at `path` with `mask`, in the current and the
    /// durable content (a corrupted disk). `EINVAL` when `offset` is past the end.
    public func corruptByte(at offset: Int, in path: String, mask: UInt8 = 0xFF) throws(FileSystemError) {
        try alterFile(path, operation: "corruptByte") { (inode) throws(FileSystemError) in
            guard offset >= 0, offset < inode.current.count else {
                throw FileSystemError(code: EINVAL, operation: "corruptByte", path: path)
            }
            inode.current[offset] ^= mask
            if offset < inode.durable.count { inode.durable[offset] ^= mask }
        }
    }

    /// Sets the size of the file at `path`, durably (zero-filling when growing).
    public func truncateFile(_ path: String, toByteCount byteCount: Int) throws(FileSystemError) {
        try alterFile(path, operation: "truncateFile") { (inode) throws(FileSystemError) in
            guard byteCount >= 0 else {
                throw FileSystemError(code: EINVAL, operation: "truncateFile", path: path)
            }
            Inode.resize(&inode.current, to: byteCount)
            Inode.resize(&inode.durable, to: byteCount)
            inode.dirtySectors = inode.dirtySectors.filter { $0 * Self.sectorSize < byteCount }
        }
    }

    /// The regular files currently in `directory`, sorted; empty when it does not exist.
    public func fileNames(in directory: String) -> [String] {
        let normalized = Self.normalize(directory)
        return locked { state in state.directories[normalized].map { $0.current.keys.sorted() } ?? [] }
    }

    /// The regular files a power cut would leave in `directory`, sorted.
    public func durableFileNames(in directory: String) -> [String] {
        let normalized = Self.normalize(directory)
        return locked { state in
            guard let entry = state.directories[normalized] else { return [] }
            return entry.durable.keys.filter { !entry.subdirectories.contains($0) }.sorted()
        }
    }

    /// Whether a file or directory is at `path` now.
    public func exists(_ path: String) -> Bool {
        let normalized = Self.normalize(path)
        return locked { state in state.lookup(normalized) != nil }
    }

    /// The sectors of the file at `path` written since its last sync, sorted; empty for a
    /// missing file.
    public func unsyncedSectors(at path: String) -> [Int] {
        let normalized = Self.normalize(path)
        return locked { state in
            guard case .file(let inode) = state.lookup(normalized) else { return [] }
            return inode.dirtySectors.sorted()
        }
    }

    /// Handles opened and not yet closed, over all files.
    public var openHandleCount: Int {
        locked { state in state.openHandles.count }
    }

    private func alterFile(
        _ path: String, operation: String,
        _ change: (Inode) throws(FileSystemError) -> Void
    ) throws(FileSystemError) {
        let normalized = Self.normalize(path)
        try locked { (state) throws(FileSystemError) in
            switch state.lookup(normalized) {
            case .file(let inode): try change(inode)
            case .directory: throw FileSystemError(code: ErrorCode.isDirectory, operation: operation, path: path)
            case nil: throw FileSystemError(code: ErrorCode.notFound, operation: operation, path: path)
            }
        }
    }
}

extension State {
    /// The directory at a normalised path, made with its missing parents (`mkdir -p`).
    func makeDirectories(_ normalized: String, path: String) throws(FileSystemError) -> Directory {
        if let directory = directories[normalized] { return directory }
        guard let (parentPath, name) = SimulatedFileSystem.split(normalized) else { return directories["/"]! }
        let parent = try makeDirectories(parentPath, path: path)
        if parent.current[name] != nil {
            throw FileSystemError(code: ErrorCode.notDirectory, operation: "mkdir", path: path)
        }
        addDirectory(normalized, in: parent, name: name)
        return directories[normalized]!
    }
}
