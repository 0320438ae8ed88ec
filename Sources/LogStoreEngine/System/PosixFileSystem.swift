#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The permissions of the files and directories a store creates.
public struct FilePermissions: Sendable, Hashable {
    /// Mode bits of new files (`0o600`: the owner reads and writes).
    public var file: UInt32
    /// Mode bits of new directories (`0o700`).
    public var directory: UInt32

    public init(file: UInt32, directory: UInt32) {
        self.file = file
        self.directory = directory
    }

    /// Only the owner may read or write the store (the default).
    public static let ownerOnly = FilePermissions(file: 0o600, directory: 0o700)
    /// The owner's group may read and write too (processes of several users sharing a store);
    /// directories are set-group-ID so new files keep the group. Set whatever the umask says.
    public static let group = FilePermissions(file: 0o660, directory: 0o2770)
}

/// The real file system, through the C library's system calls. Files and directories it creates
/// get ``permissions`` (by default only their owner may read them).
public struct PosixFileSystem: FileSystem {
    public var permissions: FilePermissions

    public init(permissions: FilePermissions = .ownerOnly) {
        self.permissions = permissions
    }

    public func openFile(_ path: String, mode: FileOpenMode) throws(FileSystemError) -> any FileHandle {
        // O_NOFOLLOW: a store's files are never symbolic links; one planted in the directory must
        // not send a write (or a truncation) to a file outside the store.
        var flags: Int32 = O_CLOEXEC | O_NOFOLLOW
        switch mode {
        case .readOnly: flags |= O_RDONLY
        case .readWrite: flags |= O_RDWR
        case .createNew: flags |= O_RDWR | O_CREAT | O_EXCL
        case .createOrOpen: flags |= O_RDWR | O_CREAT
        }
        let descriptor = retryingInterrupts { open(path, flags, mode_t(permissions.file)) }
        guard descriptor >= 0 else {
            throw FileSystemError(code: errno, operation: "open", path: path)
        }
        // Beyond the owner's bits, the umask would take what the group mode asks for. A file that
        // existed already (createOrOpen) may belong to another member of the group, who made it
        // with the same mode: then the chmod is refused, and that is fine.
        if mode == .createNew || mode == .createOrOpen, permissions.file & 0o077 != 0,
           fchmod(descriptor, mode_t(permissions.file)) != 0, mode == .createNew || errno != EPERM {
            let code = errno
            close(descriptor)
            throw FileSystemError(code: code, operation: "fchmod", path: path)
        }
        return PosixFileHandle(descriptor: descriptor, path: path)
    }

    public func createDirectory(_ path: String) throws(FileSystemError) {
        if mkdir(path, mode_t(permissions.directory & 0o777)) != 0 {
            let code = errno
            if code == EEXIST, (try? kind(of: path)) == .directory { return }
            throw FileSystemError(code: code, operation: "mkdir", path: path)
        }
        // The set-group-ID bit, and group bits the umask took, need an explicit chmod.
        if permissions.directory & 0o7077 != 0, chmod(path, mode_t(permissions.directory)) != 0 {
            throw FileSystemError(code: errno, operation: "chmod", path: path)
        }
    }

    public func removeFile(_ path: String) throws(FileSystemError) {
        guard unlink(path) == 0 else {
            throw FileSystemError(code: errno, operation: "unlink", path: path)
        }
    }

    public func rename(_ source: String, to destination: String) throws(FileSystemError) {
        guard Glibc.rename(source, destination) == 0 else {
            throw FileSystemError(code: errno, operation: "rename", path: "\(source) -> \(destination)")
        }
    }

    public func syncDirectory(_ path: String) throws(FileSystemError) {
        let descriptor = retryingInterrupts { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard descriptor >= 0 else {
            throw FileSystemError(code: errno, operation: "open directory", path: path)
        }
        defer { Glibc.close(descriptor) }
        guard fsync(descriptor) == 0 else {
            throw FileSystemError(code: errno, operation: "fsync directory", path: path)
        }
    }

    public func contentsOfDirectory(_ path: String) throws(FileSystemError) -> [String] {
        guard let directory = opendir(path) else {
            throw FileSystemError(code: errno, operation: "opendir", path: path)
        }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafePointer(to: entry.pointee.d_name) { pointer in
                pointer.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    public func kind(of path: String) throws(FileSystemError) -> FileKind? {
        var status = stat()
        guard stat(path, &status) == 0 else {
            let code = errno
            if code == ENOENT || code == ENOTDIR { return nil }
            throw FileSystemError(code: code, operation: "stat", path: path)
        }
        switch status.st_mode & S_IFMT {
        case S_IFREG: return .regular
        case S_IFDIR: return .directory
        default: return .other
        }
    }

    public func identity(of path: String) throws(FileSystemError) -> FileIdentity {
        var status = stat()
        guard stat(path, &status) == 0 else {
            throw FileSystemError(code: errno, operation: "stat", path: path)
        }
        return FileIdentity(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
    }
}

/// An open file descriptor. The descriptor never changes after init, and every call on it is a
/// positional system call that needs no lock: hence `@unchecked Sendable`.
final class PosixFileHandle: FileHandle, @unchecked Sendable {
    let path: String
    private let descriptor: Int32
    private let closed = AtomicFlag()

    init(descriptor: Int32, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    deinit { close() }

    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(FileSystemError) -> Int {
        var total = 0
        while total < buffer.count {
            let result = pread(
                descriptor, buffer.baseAddress! + total, buffer.count - total,
                off_t(offset) + off_t(total))
            if result < 0 {
                if errno == EINTR { continue }
                throw FileSystemError(code: errno, operation: "pread", path: path)
            }
            if result == 0 { break }
            total += result
        }
        return total
    }

    func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(FileSystemError) {
        var total = 0
        while total < bytes.count {
            let result = pwrite(
                descriptor, bytes.baseAddress! + total, bytes.count - total,
                off_t(offset) + off_t(total))
            if result < 0 {
                if errno == EINTR { continue }
                throw FileSystemError(code: errno, operation: "pwrite", path: path, byteCountWritten: total)
            }
            // A zero-byte write with bytes left means the device took nothing: treat as full.
            if result == 0 {
                throw FileSystemError(code: ENOSPC, operation: "pwrite", path: path, byteCountWritten: total)
            }
            total += result
        }
    }

    func syncData() throws(FileSystemError) {
        // Never retried, not even on EINTR: after a failed fsync the kernel may have marked the
        // dirty pages clean, so a retry can report success for data that never reached disk.
        guard fdatasync(descriptor) == 0 else {
            throw FileSystemError(code: errno, operation: "fdatasync", path: path)
        }
    }

    func sync() throws(FileSystemError) {
        guard fsync(descriptor) == 0 else {
            throw FileSystemError(code: errno, operation: "fsync", path: path)
        }
    }

    func size() throws(FileSystemError) -> UInt64 {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw FileSystemError(code: errno, operation: "fstat", path: path)
        }
        return UInt64(status.st_size)
    }

    func truncate(toByteCount byteCount: UInt64) throws(FileSystemError) {
        let result = retryingInterrupts { ftruncate(descriptor, off_t(byteCount)) }
        guard result == 0 else {
            throw FileSystemError(code: errno, operation: "ftruncate", path: path)
        }
    }

    func tryLockExclusive() throws(FileSystemError) -> Bool {
        let result = retryingInterrupts { flock(descriptor, LOCK_EX | LOCK_NB) }
        if result == 0 { return true }
        if errno == EWOULDBLOCK { return false }
        throw FileSystemError(code: errno, operation: "flock", path: path)
    }

    func tryLockShared() throws(FileSystemError) -> Bool {
        let result = retryingInterrupts { flock(descriptor, LOCK_SH | LOCK_NB) }
        if result == 0 { return true }
        if errno == EWOULDBLOCK { return false }
        throw FileSystemError(code: errno, operation: "flock", path: path)
    }

    func unlock() throws(FileSystemError) {
        guard retryingInterrupts({ flock(descriptor, LOCK_UN) }) == 0 else {
            throw FileSystemError(code: errno, operation: "flock(LOCK_UN)", path: path)
        }
    }

    func mapShared(byteCount: Int) throws(FileSystemError) -> SharedMapping? {
        precondition(byteCount > 0)
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw FileSystemError(code: errno, operation: "fstat", path: path)
        }
        // A FIFO or a device planted under the name is not mapped (O_NOFOLLOW already refused a
        // symbolic link), nor a second name of another file (a hard link to a segment, say).
        guard status.st_mode & S_IFMT == S_IFREG else {
            throw FileSystemError(code: EINVAL, operation: "mmap (not a regular file)", path: path)
        }
        guard status.st_nlink == 1 else {
            throw FileSystemError(code: EINVAL, operation: "mmap (a file with several names)", path: path)
        }
        // Grown and its blocks allocated before mapping: touching a mapped page past the end of
        // the file is SIGBUS, and so is a first write fault on a hole when the disk is full.
        // `posix_fallocate` never shrinks; two processes growing it at once set the same size.
        let allocated = posix_fallocate(descriptor, 0, off_t(byteCount))
        guard allocated == 0 else {
            throw FileSystemError(code: allocated, operation: "posix_fallocate", path: path)
        }
        let address = mmap(nil, byteCount, PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, 0)
        // MAP_FAILED is ((void *) -1), a macro Swift does not import.
        guard let address, address != UnsafeMutableRawPointer(bitPattern: -1) else {
            throw FileSystemError(code: errno, operation: "mmap", path: path)
        }
        return SharedMapping(address: address, byteCount: byteCount)
    }

    func close() {
        if closed.setOnce() { _ = Glibc.close(descriptor) }
    }
}

/// Runs a system call again while it fails with `EINTR`.
private func retryingInterrupts(_ call: () -> Int32) -> Int32 {
    while true {
        let result = call()
        if result >= 0 || errno != EINTR { return result }
    }
}
