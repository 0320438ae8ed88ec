import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The POSIX file work of an ``ArchiveStore``: read a whole file, replace it atomically and
/// durably (temporary file, `fsync`, `rename`, directory `fsync`), remove it.
enum ArchiveFile {
    /// The whole file, or `nil` when it does not exist.
    static func contents(of path: String) throws(ArchiveStoreError) -> Data? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw .io(operation: "open", path: path, errno: errno)
        }
        defer { close(fd) }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        // Bounded by the file's size: each pass reads at least one byte or ends.
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw .io(operation: "read", path: path, errno: errno)
            }
            if count == 0 { return data }
            data.append(contentsOf: buffer[0..<count])
        }
    }

    /// Replaces `path` with `bytes`: readers see the old file or the new one, never a mix. With
    /// `durable`, the new file and its directory entry are on disk when this returns.
    static func replace(_ path: String, with bytes: Data, durable: Bool) throws(ArchiveStoreError) {
        let temporary = temporaryPath(for: path)
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .io(operation: "open", path: temporary, errno: errno) }
        do throws(ArchiveStoreError) {
            try writeAll(bytes, to: fd, path: temporary)
            // Never retried: after a failed fsync the pages may be marked clean (DECISIONS.md D2).
            if durable, fsync(fd) != 0 { throw .io(operation: "fsync", path: temporary, errno: errno) }
            let closed = close(fd)
            if closed != 0 { throw .io(operation: "close", path: temporary, errno: errno) }
        } catch {
            _ = close(fd)
            unlink(temporary)
            throw error
        }
        if rename(temporary, path) != 0 {
            let code = errno
            unlink(temporary)
            throw .io(operation: "rename", path: path, errno: code)
        }
        if durable { try syncDirectory(of: path) }
    }

    /// Removes the file (a missing file is fine).
    static func remove(_ path: String, durable: Bool) throws(ArchiveStoreError) {
        if unlink(path) != 0 {
            guard errno == ENOENT else { throw .io(operation: "unlink", path: path, errno: errno) }
            return
        }
        if durable { try syncDirectory(of: path) }
    }

    /// Creates the file's directory (and its parents) when missing, syncing each parent after
    /// its new child so a durable save cannot vanish with a directory a power cut forgot.
    static func createDirectory(of path: String) throws(ArchiveStoreError) {
        let directory = directory(of: path)
        var current = directory.hasPrefix("/") ? "" : "."
        for component in directory.split(separator: "/") {
            current += "/" + component
            if mkdir(current, 0o755) != 0 {
                guard errno == EEXIST else { throw .io(operation: "mkdir", path: current, errno: errno) }
                continue
            }
            try syncDirectory(of: current)
        }
    }

    /// Removes temporary files a crashed save left beside `path` (only this file's own).
    static func removeTemporaryFiles(for path: String) {
        let directory = directory(of: path)
        let prefix = temporaryPrefix(for: path)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        for name in names where name.hasPrefix(prefix) && name.hasSuffix(".tmp") {
            unlink(directory + "/" + name)
        }
    }

    static func directory(of path: String) -> String {
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        return directory.isEmpty ? "." : directory
    }

    private static func temporaryPrefix(for path: String) -> String {
        "." + URL(fileURLWithPath: path).lastPathComponent + "."
    }

    private static func temporaryPath(for path: String) -> String {
        directory(of: path) + "/" + temporaryPrefix(for: path) + UUID().uuidString + ".tmp"
    }

    private static func writeAll(_ bytes: Data, to fd: Int32, path: String) throws(ArchiveStoreError) {
        let failure: Int32? = bytes.withUnsafeBytes { buffer in
            var written = 0
            // Bounded by the byte count: each pass writes at least one byte or fails.
            while written < buffer.count {
                let count = write(fd, buffer.baseAddress! + written, buffer.count - written)
                if count < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                written += count
            }
            return nil
        }
        if let failure { throw .io(operation: "write", path: path, errno: failure) }
    }

    private static func syncDirectory(of path: String) throws(ArchiveStoreError) {
        let directory = directory(of: path)
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw .io(operation: "open", path: directory, errno: errno) }
        defer { close(fd) }
        if fsync(fd) != 0 { throw .io(operation: "fsync", path: directory, errno: errno) }
    }
}
