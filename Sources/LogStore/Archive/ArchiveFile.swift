import Foundation
import LogStoreEngine

/// The file work of an ``ArchiveStore``, through the ``FileSystem`` shim (so tests inject power
/// cuts and I/O errors as they do for the log): read the whole file, replace it atomically and
/// durably (temporary file, `fsync`, `rename`, directory `fsync`), remove it.
///
/// What is on disk if power fails between any two steps of ``replace(with:durable:)``: before
/// the rename, the old file (and perhaps a temporary file, which the next open removes); after
/// it, the old or the new file — the directory `fsync` decides which survives, and the save
/// returns only after it. Never a mix: the file is only ever replaced whole.
struct ArchiveFile {
    let path: String
    let fileSystem: any FileSystem

    /// The file's directory.
    var directory: String {
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        return directory.isEmpty ? "." : directory
    }

    /// The whole file, or `nil` when it does not exist.
    func contents() throws(ArchiveStoreError) -> Data? {
        do throws(FileSystemError) {
            guard try fileSystem.kind(of: path) != nil else { return nil }
            let handle = try fileSystem.openFile(path, mode: .readOnly)
            defer { handle.close() }
            // An archive is read whole by design (the WWDC24 store); Int covers any file here.
            let bytes = try handle.read(byteCount: Int(clamping: try handle.size()), at: 0)
            return Data(bytes)
        } catch {
            throw Self.failure(error)
        }
    }

    /// Replaces the file with `bytes`: readers see the old file or the new one, never a mix. With
    /// `durable`, the new file and its directory entry are on disk when this returns.
    func replace(with bytes: Data, durable: Bool) throws(ArchiveStoreError) {
        do throws(FileSystemError) {
            try AtomicFile.write(
                Array(bytes), to: path, temporaryPath: temporaryPath(), durable: durable,
                fileSystem: fileSystem)
        } catch {
            throw Self.failure(error)
        }
    }

    /// Removes the file (a missing file is fine).
    func remove(durable: Bool) throws(ArchiveStoreError) {
        do throws(FileSystemError) {
            guard try fileSystem.kind(of: path) != nil else { return }
            if durable {
                try AtomicFile.removeDurably(path, fileSystem: fileSystem)
            } else {
                try fileSystem.removeFile(path)
            }
        } catch {
            throw Self.failure(error)
        }
    }

    /// Creates the file's directory (and its parents) when missing, syncing each parent after
    /// its new child so a durable save cannot vanish with a directory a power cut forgot.
    func createDirectory() throws(ArchiveStoreError) {
        var current = directory.hasPrefix("/") ? "" : "."
        // Bounded by the path's components.
        for component in directory.split(separator: "/") {
            let parent = current.isEmpty ? "/" : current
            current += "/" + component
            do throws(FileSystemError) {
                switch try fileSystem.kind(of: current) {
                case .directory?: continue
                case .regular?, .other?:
                    throw FileSystemError(code: ErrorCode.notDirectory, operation: "mkdir", path: current)
                case nil:
                    try fileSystem.createDirectory(current)
                    try fileSystem.syncDirectory(parent)
                }
            } catch {
                throw Self.failure(error)
            }
        }
    }

    /// Removes temporary files a crashed save left beside the file (only this file's own).
    func removeTemporaryFiles() {
        let prefix = temporaryPrefix
        let names = (try? fileSystem.contentsOfDirectory(directory)) ?? []
        for name in names where name.hasPrefix(prefix) && name.hasSuffix(".tmp") {
            try? fileSystem.removeFile(directory + "/" + name)
        }
    }

    private var temporaryPrefix: String { "." + URL(fileURLWithPath: path).lastPathComponent + "." }

    private func temporaryPath() -> String {
        directory + "/" + temporaryPrefix + UUID().uuidString + ".tmp"
    }

    private static func failure(_ error: FileSystemError) -> ArchiveStoreError {
        .io(operation: error.operation, path: error.path, errno: error.code)
    }
}
