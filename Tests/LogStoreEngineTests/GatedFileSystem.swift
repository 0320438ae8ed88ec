import Foundation
import LogStoreTestSupport
import Synchronization

@testable import LogStoreEngine

/// A FileSystem that forwards to a SimulatedFileSystem, but can park the thread that opens a
/// path matching `gatedSuffix` until `open()` is called.
final class GatedFileSystem: FileSystem, @unchecked Sendable {
    let base: SimulatedFileSystem
    let gatedSuffix: String
    private let condition = NSCondition()
    private var armed = false
    private var parked = false
    init(_ base: SimulatedFileSystem, gatedSuffix: String) {
        self.base = base
        self.gatedSuffix = gatedSuffix
    }
    func arm() {
        condition.lock()
        armed = true
        condition.unlock()
    }
    func waitUntilParked() {
        condition.lock()
        while !parked { condition.wait() }
        condition.unlock()
    }
    func open() {
        condition.lock()
        armed = false
        condition.broadcast()
        condition.unlock()
    }
    func openFile(_ path: String, mode: FileOpenMode) throws(FileSystemError) -> any LogStoreEngine.FileHandle {
        if path.hasSuffix(gatedSuffix) {
            condition.lock()
            if armed {
                parked = true
                condition.broadcast()
                while armed { condition.wait() }
            }
            condition.unlock()
        }
        return try base.openFile(path, mode: mode)
    }
    func createDirectory(_ path: String) throws(FileSystemError) { try base.createDirectory(path) }
    func removeFile(_ path: String) throws(FileSystemError) { try base.removeFile(path) }
    func rename(_ source: String, to destination: String) throws(FileSystemError) {
        try base.rename(source, to: destination)
    }
    func syncDirectory(_ path: String) throws(FileSystemError) { try base.syncDirectory(path) }
    func contentsOfDirectory(_ path: String) throws(FileSystemError) -> [String] { try base.contentsOfDirectory(path) }
    func kind(of path: String) throws(FileSystemError) -> FileKind? { try base.kind(of: path) }
    func identity(of path: String) throws(FileSystemError) -> FileIdentity { try base.identity(of: path) }
}
