import LogStoreEngine

/// One process's view of a file system that several processes, simulated in one test process,
/// share: the same files, bytes and `flock`s (a lock belongs to the handle, as to an open file
/// description), but the directory identities tagged with `process`, so this process's registry
/// of open stores (one per device and inode) takes two views for two processes. On a
/// ``SimulatedFileSystem`` a power cut of the shared file system is a power cut of every process.
public final class ProcessView: FileSystem, Sendable {
    public let base: any FileSystem
    public let process: UInt64

    public init(_ base: any FileSystem, process: UInt64) {
        precondition(process > 0 && process < 1 << 15, "a small process number, 0 being the untagged view")
        self.base = base
        self.process = process
    }

    public func openFile(_ path: String, mode: FileOpenMode) throws(FileSystemError) -> any FileHandle {
        try base.openFile(path, mode: mode)
    }
    public func createDirectory(_ path: String) throws(FileSystemError) { try base.createDirectory(path) }
    public func removeFile(_ path: String) throws(FileSystemError) { try base.removeFile(path) }
    public func rename(_ source: String, to destination: String) throws(FileSystemError) {
        try base.rename(source, to: destination)
    }
    public func syncDirectory(_ path: String) throws(FileSystemError) { try base.syncDirectory(path) }
    public func contentsOfDirectory(_ path: String) throws(FileSystemError) -> [String] {
        try base.contentsOfDirectory(path)
    }
    public func kind(of path: String) throws(FileSystemError) -> FileKind? { try base.kind(of: path) }
    public func identity(of path: String) throws(FileSystemError) -> FileIdentity {
        var identity = try base.identity(of: path)
        identity.inode ^= process << 48
        return identity
    }
}
