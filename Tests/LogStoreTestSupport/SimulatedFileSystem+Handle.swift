import LogStoreEngine

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An open file of a ``SimulatedFileSystem``: one open file description. Its state (open or
/// closed, `flock` held) lives in the file system, under its lock; the handle itself holds only
/// constants, so it is `Sendable` without exceptions.
final class SimulatedFileHandle: FileHandle {
    let fileSystem: SimulatedFileSystem
    let id: UInt64
    let inodeNumber: UInt64
    let path: String
    let normalizedPath: String
    let isWritable: Bool

    init(
        fileSystem: SimulatedFileSystem, id: UInt64, inodeNumber: UInt64, path: String,
        normalizedPath: String, isWritable: Bool
    ) {
        self.fileSystem = fileSystem
        self.id = id
        self.inodeNumber = inodeNumber
        self.path = path
        self.normalizedPath = normalizedPath
        self.isWritable = isWritable
    }

    deinit { close() }

    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(FileSystemError) -> Int {
        try fileSystem.read(self, into: buffer, at: offset)
    }

    func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(FileSystemError) {
        try fileSystem.write(self, bytes, at: offset)
    }

    func syncData() throws(FileSystemError) {
        try fileSystem.syncFile(self, operation: "fdatasync")
    }

    func sync() throws(FileSystemError) {
        try fileSystem.syncFile(self, operation: "fsync")
    }

    func size() throws(FileSystemError) -> UInt64 {
        try fileSystem.size(of: self)
    }

    func truncate(toByteCount byteCount: UInt64) throws(FileSystemError) {
        try fileSystem.truncate(self, toByteCount: byteCount)
    }

    func tryLockExclusive() throws(FileSystemError) -> Bool {
        try fileSystem.tryLockExclusive(self)
    }

    func tryLockShared() throws(FileSystemError) -> Bool {
        try fileSystem.tryLockShared(self)
    }

    func unlock() throws(FileSystemError) {
        try fileSystem.unlock(self)
    }

    func close() {
        fileSystem.close(self)
    }
}

/// Files larger than this are refused with `EFBIG`, so a wild offset fails instead of
/// allocating gigabytes.
let simulatedMaximumFileSize: UInt64 = 1 << 32

extension SimulatedFileSystem {
    /// The inode of an open handle, or `EBADF` for a closed one.
    private func openInode(_ handle: SimulatedFileHandle, _ state: State, operation: String) throws(FileSystemError)
        -> Inode
    {
        guard state.openHandles.contains(handle.id), let inode = state.inodes[handle.inodeNumber] else {
            throw FileSystemError(code: EBADF, operation: operation, path: handle.path)
        }
        return inode
    }

    func read(_ handle: SimulatedFileHandle, into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64)
        throws(FileSystemError) -> Int
    {
        try locked { (state) throws(FileSystemError) in
            let inode = try openInode(handle, state, operation: "pread")
            try state.checkFault(.read, path: handle.normalizedPath, operation: "pread", reportedPath: handle.path)
            let size = UInt64(inode.current.count)
            guard offset < size, !buffer.isEmpty else { return 0 }
            let count = Int(min(UInt64(buffer.count), size - offset))
            inode.current.withUnsafeBytes { source in
                buffer.baseAddress!.copyMemory(from: source.baseAddress! + Int(offset), byteCount: count)
            }
            return count
        }
    }

    func write(_ handle: SimulatedFileHandle, _ bytes: UnsafeRawBufferPointer, at offset: UInt64)
        throws(FileSystemError)
    {
        try locked { (state) throws(FileSystemError) in
            let inode = try openInode(handle, state, operation: "pwrite")
            guard handle.isWritable else {
                throw FileSystemError(code: EBADF, operation: "pwrite", path: handle.path)
            }
            var count = bytes.count
            var failure: FileSystemError?
            if let fault = state.takeFault(.write, path: handle.normalizedPath) {
                count = min(max(fault.writingByteCount ?? 0, 0), bytes.count)
                failure = FileSystemError(code: fault.code, operation: "pwrite", path: handle.path)
            }
            guard offset <= simulatedMaximumFileSize, offset + UInt64(count) <= simulatedMaximumFileSize else {
                throw FileSystemError(code: EFBIG, operation: "pwrite", path: handle.path)
            }
            let end = offset + UInt64(count)
            let size = UInt64(inode.current.count)
            if end > size, let available = state.availableByteCount, end > size + available {
                // Out of space: what fits is written, the rest is refused.
                let limit = size + available
                count = limit > offset ? Int(limit - offset) : 0
                if failure == nil {
                    failure = FileSystemError(code: ErrorCode.noSpace, operation: "pwrite", path: handle.path)
                }
            }
            if count > 0 {
                inode.write(UnsafeRawBufferPointer(rebasing: bytes[0..<count]), at: Int(offset))
            }
            if var failure {
                failure.byteCountWritten = count
                throw failure
            }
        }
    }

    func syncFile(_ handle: SimulatedFileHandle, operation: String) throws(FileSystemError) {
        // A disk's flush takes time; the data written meanwhile may become durable too, which a
        // real fdatasync also allows.
        if let latency = locked({ state in state.syncLatency }) {
            let microseconds =
                latency.components.seconds * 1_000_000 + latency.components.attoseconds / 1_000_000_000_000
            usleep(useconds_t(max(0, microseconds)))
        }
        condition.lock()
        defer { condition.unlock() }
        let inode = try openInode(handle, state, operation: operation)
        state.startedSyncCount += 1
        defer {
            state.completedSyncCount += 1
            condition.broadcast()
        }
        if state.syncsHeld {
            let generation = state.holdGeneration
            state.heldSyncCount += 1
            condition.broadcast()
            while state.syncsHeld && state.holdGeneration == generation {
                condition.wait()
            }
            state.heldSyncCount -= 1
        }
        if let fault = state.takeFault(.sync, path: handle.normalizedPath) {
            // fsyncgate: the kernel marks the pages clean although they never reached the disk,
            // so a later successful sync does not write them either.
            inode.dirtySectors.removeAll(keepingCapacity: true)
            throw FileSystemError(code: fault.code, operation: operation, path: handle.path)
        }
        inode.makeDurable()
    }

    func size(of handle: SimulatedFileHandle) throws(FileSystemError) -> UInt64 {
        try locked { (state) throws(FileSystemError) in
            UInt64(try openInode(handle, state, operation: "fstat").current.count)
        }
    }

    func truncate(_ handle: SimulatedFileHandle, toByteCount byteCount: UInt64) throws(FileSystemError) {
        try locked { (state) throws(FileSystemError) in
            let inode = try openInode(handle, state, operation: "ftruncate")
            guard handle.isWritable else {
                // ftruncate on a descriptor not open for writing.
                throw FileSystemError(code: EINVAL, operation: "ftruncate", path: handle.path)
            }
            try state.checkFault(
                .truncate, path: handle.normalizedPath, operation: "ftruncate", reportedPath: handle.path)
            if byteCount > simulatedMaximumFileSize {
                throw FileSystemError(code: EFBIG, operation: "ftruncate", path: handle.path)
            }
            let size = UInt64(inode.current.count)
            if byteCount > size, let available = state.availableByteCount, byteCount - size > available {
                throw FileSystemError(code: ErrorCode.noSpace, operation: "ftruncate", path: handle.path)
            }
            inode.resize(to: Int(byteCount))
        }
    }

    /// `flock(LOCK_EX | LOCK_NB)` as Linux does it: a handle's shared lock is converted — removed
    /// first, so a conversion refused because others share the lock leaves this handle with none.
    func tryLockExclusive(_ handle: SimulatedFileHandle) throws(FileSystemError) -> Bool {
        try locked { (state) throws(FileSystemError) in
            _ = try openInode(handle, state, operation: "flock")
            let inode = handle.inodeNumber
            if let holder = state.lockHolders[inode] { return holder == handle.id }
            state.sharedLockHolders[inode]?.remove(handle.id)
            if let sharing = state.sharedLockHolders[inode], !sharing.isEmpty { return false }
            state.sharedLockHolders[inode] = nil
            state.lockHolders[inode] = handle.id
            return true
        }
    }

    /// `flock(LOCK_SH | LOCK_NB)`: granted beside other shared holders; this handle's exclusive
    /// lock is converted.
    func tryLockShared(_ handle: SimulatedFileHandle) throws(FileSystemError) -> Bool {
        try locked { (state) throws(FileSystemError) in
            _ = try openInode(handle, state, operation: "flock")
            let inode = handle.inodeNumber
            if let holder = state.lockHolders[inode] {
                guard holder == handle.id else { return false }
                state.lockHolders[inode] = nil
            }
            state.sharedLockHolders[inode, default: []].insert(handle.id)
            return true
        }
    }

    /// `flock(LOCK_UN)`.
    func unlock(_ handle: SimulatedFileHandle) throws(FileSystemError) {
        try locked { (state) throws(FileSystemError) in
            _ = try openInode(handle, state, operation: "flock")
            Self.dropLocks(of: handle, state)
        }
    }

    private static func dropLocks(of handle: SimulatedFileHandle, _ state: State) {
        if state.lockHolders[handle.inodeNumber] == handle.id { state.lockHolders[handle.inodeNumber] = nil }
        state.sharedLockHolders[handle.inodeNumber]?.remove(handle.id)
        if state.sharedLockHolders[handle.inodeNumber]?.isEmpty == true { state.sharedLockHolders[handle.inodeNumber] = nil }
    }

    func close(_ handle: SimulatedFileHandle) {
        locked { state in
            guard state.openHandles.remove(handle.id) != nil else { return }
            Self.dropLocks(of: handle, state)
            if let inode = state.inodes[handle.inodeNumber] {
                inode.openHandles -= 1
                state.collect(inode.number)
            }
        }
    }
}
