/// A file created whole or not at all, through the ``FileSystem`` shim: written under a temporary
/// name, `fsync`ed, renamed into place, and the directory `fsync`ed (DECISIONS.md D1/D2: "new
/// files: temp + fsync + rename + directory fsync").
///
/// What is on disk if power fails between any two steps: before the rename, the old state (and
/// perhaps the temporary file, which the next open removes); between the rename and the
/// directory `fsync`, the old or the new file, whole; after ``commit()`` returns, the new file.
/// The file's own `fsync` comes before the rename, so the name never points at unwritten bytes.
///
/// ```swift
/// try AtomicFile.write(meta.encoded(), to: "/var/lib/store/store.meta", fileSystem: fileSystem)
/// ```
///
/// For a file written in pieces (a checkpoint, a new segment whose handle stays open), make an
/// `AtomicFile`, write through ``handle``, then ``commit()`` (or ``abandon()``).
public final class AtomicFile {
    /// The final path.
    public let path: String
    /// Where the bytes are written until ``commit()``.
    public let temporaryPath: String
    private let fileSystem: any FileSystem
    private var openHandle: (any FileHandle)?
    private var isFinished = false

    /// Creates the temporary file (`path` + `.tmp` unless given; a leftover one from a crash is
    /// replaced) for writing.
    public init(path: String, temporaryPath: String? = nil, fileSystem: any FileSystem) throws(FileSystemError) {
        self.path = path
        self.temporaryPath = temporaryPath ?? path + FormatConstants.temporaryFileExtension
        self.fileSystem = fileSystem
        if (try? fileSystem.kind(of: self.temporaryPath)) != nil { try fileSystem.removeFile(self.temporaryPath) }
        openHandle = try fileSystem.openFile(self.temporaryPath, mode: .createNew)
    }

    deinit { abandon() }

    /// The temporary file's handle, for writes before ``commit()``.
    public var handle: any FileHandle {
        guard let openHandle else { preconditionFailure("AtomicFile \(path): written to after commit or abandon") }
        return openHandle
    }

    /// Makes the file durable under its final name: `fsync`, rename, directory `fsync` (with
    /// `durable` false: only the rename, for caches that are rebuilt when lost). Returns the
    /// handle, still open on the renamed file, when `keepOpen`; otherwise closes it. On failure
    /// the temporary file is removed; if the directory `fsync` failed, the file may or may not
    /// survive a crash (the caller reports the error; it never retries an fsync, D2).
    @discardableResult
    public func commit(durable: Bool = true, keepOpen: Bool = false) throws(FileSystemError) -> (any FileHandle)? {
        let handle = self.handle
        do throws(FileSystemError) {
            if durable { try handle.sync() }
            try fileSystem.rename(temporaryPath, to: path)
            isFinished = true
            if durable { try fileSystem.syncDirectory(Self.directory(of: path)) }
        } catch {
            abandon()
            throw error
        }
        if keepOpen {
            openHandle = nil
            return handle
        }
        handle.close()
        openHandle = nil
        return nil
    }

    /// Closes and removes the temporary file (nothing more once committed).
    public func abandon() {
        openHandle?.close()
        openHandle = nil
        if !isFinished {
            isFinished = true
            try? fileSystem.removeFile(temporaryPath)
        }
    }

    /// Writes `bytes` as the whole new content of `path`, atomically (and durably unless
    /// `durable` is false).
    public static func write(
        _ bytes: [UInt8], to path: String, temporaryPath: String? = nil, durable: Bool = true,
        fileSystem: any FileSystem
    ) throws(FileSystemError) {
        let file = try AtomicFile(path: path, temporaryPath: temporaryPath, fileSystem: fileSystem)
        do throws(FileSystemError) { try file.handle.write(bytes, at: 0) } catch {
            file.abandon()
            throw error
        }
        try file.commit(durable: durable)
    }

    /// Removes `path` and `fsync`s its directory, so the removal survives a crash.
    public static func removeDurably(_ path: String, fileSystem: any FileSystem) throws(FileSystemError) {
        try fileSystem.removeFile(path)
        try fileSystem.syncDirectory(directory(of: path))
    }

    /// The directory part of `path` ("." for a bare name).
    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
