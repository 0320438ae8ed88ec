import Foundation

/// The one place LogStore touches files.
///
/// Every `open`, `pread`, `pwrite`, `fdatasync`, `fsync`, `flock`, `rename`, `unlink` and
/// `ftruncate` the engine performs goes through a ``FileSystem`` and the ``FileHandle``s it opens.
/// Production code uses ``PosixFileSystem``; tests swap in a simulated file system that can lose
/// unsynced sectors and directory entries on a simulated power cut and inject I/O errors.
///
/// Paths are plain strings; the engine only builds them by joining a directory path and a file
/// name with `/`.
public protocol FileSystem: Sendable {
    /// Opens (and with ``FileOpenMode/createNew`` or ``FileOpenMode/createOrOpen``, creates) a
    /// regular file. Creating a file does not make its directory entry durable: call
    /// ``syncDirectory(_:)`` on the parent for that.
    func openFile(_ path: String, mode: FileOpenMode) throws(FileSystemError) -> any FileHandle

    /// Creates a directory; succeeds when it already exists.
    func createDirectory(_ path: String) throws(FileSystemError)

    /// Removes a file (`unlink`). The removal is durable only after ``syncDirectory(_:)``.
    func removeFile(_ path: String) throws(FileSystemError)

    /// Atomically replaces `destination` by `source` (`rename`). Durable only after
    /// ``syncDirectory(_:)``.
    func rename(_ source: String, to destination: String) throws(FileSystemError)

    /// Makes the directory's entries (creations, renames, removals) durable (`fsync` on the
    /// directory).
    func syncDirectory(_ path: String) throws(FileSystemError)

    /// The names in a directory, without `.` and `..`, in no particular order.
    func contentsOfDirectory(_ path: String) throws(FileSystemError) -> [String]

    /// What is at `path`, or `nil` when nothing is.
    func kind(of path: String) throws(FileSystemError) -> FileKind?

    /// The device and inode of `path`, used to recognise the same store opened twice.
    func identity(of path: String) throws(FileSystemError) -> FileIdentity
}

/// An open regular file. Positional reads and writes only; no shared file position.
///
/// A handle is closed when ``close()`` is called or when it is deinitialised, whichever is first.
public protocol FileHandle: AnyObject, Sendable {
    /// The path the handle was opened with, for error messages.
    var path: String { get }

    /// Reads up to `buffer.count` bytes at `offset` (`pread`, retried until full or end of
    /// file). Returns the number of bytes read; fewer than asked only at the end of the file.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(FileSystemError) -> Int

    /// Writes all of `bytes` at `offset` (`pwrite`, retried on short writes). On failure the
    /// error's ``FileSystemError/byteCountWritten`` tells how many leading bytes did reach the
    /// file, so the caller can zero them.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(FileSystemError)

    /// `fdatasync`: the file's data, and the metadata needed to read it back, are durable.
    func syncData() throws(FileSystemError)

    /// `fsync`: data and all metadata are durable.
    func sync() throws(FileSystemError)

    /// The file's current size in bytes.
    func size() throws(FileSystemError) -> UInt64

    /// Sets the file's size (`ftruncate`).
    func truncate(toByteCount byteCount: UInt64) throws(FileSystemError)

    /// Tries to take an exclusive `flock` without waiting. Returns `false` when another open
    /// file description holds it. The lock is released when the handle is closed.
    func tryLockExclusive() throws(FileSystemError) -> Bool

    /// Tries to take (or convert the handle's lock to) a shared `flock` without waiting.
    /// Returns `false` when another open file description holds it exclusively.
    func tryLockShared() throws(FileSystemError) -> Bool

    /// Releases this handle's `flock` (`LOCK_UN`).
    func unlock() throws(FileSystemError)

    /// Maps the file's first `byteCount` bytes shared between processes, first growing the file
    /// with zeros to that size when it is smaller (never shrinking it). `nil` where the file system
    /// has no shared mappings (the simulated one): callers then do without (FORMAT.md §10.2,
    /// `WAKE`). The mapping outlives the handle.
    func mapShared(byteCount: Int) throws(FileSystemError) -> SharedMapping?

    /// Closes the handle. Further calls on it are programmer errors.
    func close()
}

extension FileHandle {
    /// File systems without shared locks (the simulated one) refuse stores shared by several
    /// writing processes (``LogOptions/allowsOtherWriters``).
    public func tryLockShared() throws(FileSystemError) -> Bool {
        throw FileSystemError(code: ENOTSUP, operation: "flock(LOCK_SH)", path: path)
    }

    public func unlock() throws(FileSystemError) {
        throw FileSystemError(code: ENOTSUP, operation: "flock(LOCK_UN)", path: path)
    }

    public func mapShared(byteCount: Int) throws(FileSystemError) -> SharedMapping? { nil }
}

/// How ``FileSystem/openFile(_:mode:)`` opens a file. Every mode opens with `O_CLOEXEC`.
public enum FileOpenMode: Sendable, Equatable {
    /// An existing file, for reading only.
    case readOnly
    /// An existing file, for reading and writing.
    case readWrite
    /// A new file for reading and writing; fails with `EEXIST` if the path exists.
    case createNew
    /// The file for reading and writing, created empty if missing.
    case createOrOpen
}

/// What a path names.
public enum FileKind: Sendable, Equatable {
    case regular
    case directory
    case other
}

/// A file's device and inode numbers.
public struct FileIdentity: Sendable, Hashable {
    public var device: UInt64
    public var inode: UInt64

    public init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }
}

/// An error reported by the operating system (or the simulated file system) for one call.
public struct FileSystemError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The `errno` value, for example `EIO` or `ENOSPC`.
    public var code: Int32
    /// The call that failed, for example `"pwrite"`.
    public var operation: String
    /// The path the call was about.
    public var path: String
    /// For a failed write: how many leading bytes reached the file before the failure.
    public var byteCountWritten: Int

    public init(code: Int32, operation: String, path: String, byteCountWritten: Int = 0) {
        self.code = code
        self.operation = operation
        self.path = path
        self.byteCountWritten = byteCountWritten
    }

    /// True for "no space left on device" (`ENOSPC`) and "disk quota exceeded" (`EDQUOT`).
    public var isOutOfSpace: Bool { code == ErrorCode.noSpace || code == ErrorCode.quotaExceeded }

    public var description: String {
        "\(operation) failed on \(path): \(ErrorCode.describe(code)) (errno \(code))"
    }
}

extension FileHandle {
    /// Writes all of `bytes` at `offset`.
    public func write(_ bytes: [UInt8], at offset: UInt64) throws(FileSystemError) {
        let result = bytes.withUnsafeBytes { buffer -> Result<Void, FileSystemError> in
            do throws(FileSystemError) {
                try write(buffer, at: offset)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try result.get()
    }

    /// Reads up to `byteCount` bytes at `offset`; fewer only at the end of the file.
    public func read(byteCount: Int, at offset: UInt64) throws(FileSystemError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: byteCount)
        let result = bytes.withUnsafeMutableBytes { buffer -> Result<Int, FileSystemError> in
            do throws(FileSystemError) { return .success(try read(into: buffer, at: offset)) } catch {
                return .failure(error)
            }
        }
        let count = try result.get()
        if count < byteCount { bytes.removeSubrange(count...) }
        return bytes
    }
}

extension FileHandle {
    /// Writes `bytes[range]` at `offset`.
    public func write(_ bytes: [UInt8], range: Range<Int>, at offset: UInt64) throws(FileSystemError) {
        let result = bytes.withUnsafeBytes { buffer -> Result<Void, FileSystemError> in
            do throws(FileSystemError) {
                try write(UnsafeRawBufferPointer(rebasing: buffer[range]), at: offset)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try result.get()
    }

    /// Reads into `bytes[range]` at `offset`; returns the count read (short only at end of file).
    public func read(into bytes: inout [UInt8], range: Range<Int>, at offset: UInt64) throws(FileSystemError) -> Int {
        let result = bytes.withUnsafeMutableBytes { buffer -> Result<Int, FileSystemError> in
            do throws(FileSystemError) {
                return .success(try read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[range]), at: offset))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }
}
