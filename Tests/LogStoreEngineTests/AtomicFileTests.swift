import Foundation
import LogStoreTestSupport
import Testing

@testable import LogStoreEngine

/// `AtomicFile`: a file replaced whole or not at all, whatever step fails and whatever a power
/// cut then keeps of the unsynced writes and directory entries.
@Suite struct AtomicFileTests {
    static let path = "/store/store.meta"
    static let old = [UInt8](repeating: 0x0D, count: 5_000)
    static let new = [UInt8](repeating: 0x0E, count: 9_000)

    static func fileSystemWithOldFile() throws -> SimulatedFileSystem {
        let fileSystem = SimulatedFileSystem()
        try fileSystem.createDirectory("/store")
        try fileSystem.syncDirectory("/")
        try AtomicFile.write(old, to: path, fileSystem: fileSystem)
        return fileSystem
    }

    static func contents(_ fileSystem: SimulatedFileSystem) throws -> [UInt8]? {
        guard try fileSystem.kind(of: path) != nil else { return nil }
        let handle = try fileSystem.openFile(path, mode: .readOnly)
        defer { handle.close() }
        return try handle.read(byteCount: Int(try handle.size()), at: 0)
    }

    @Test(arguments: [SimulatedFileSystem.Operation.open, .write, .sync, .rename, .syncDirectory], 0..<10)
    func aFailedStepLeavesTheOldOrTheNewFileWhole(step: SimulatedFileSystem.Operation, seed: Int) throws {
        let fileSystem = try Self.fileSystemWithOldFile()
        fileSystem.injectFault(step, writingByteCount: step == .write ? 4_096 : nil)
        #expect(throws: FileSystemError.self) { try AtomicFile.write(Self.new, to: Self.path, fileSystem: fileSystem) }
        fileSystem.clearFaults()
        // The temporary file is gone at once (unless the rename already moved it into place).
        #expect(try fileSystem.kind(of: Self.path + ".tmp") == nil)
        let cut = fileSystem.powerCut(seed: UInt64(seed))
        let recovered = try Self.contents(cut)
        #expect(recovered == Self.old || recovered == Self.new, "step \(step), seed \(seed)")
        if step != .syncDirectory {
            #expect(recovered == Self.old, "step \(step), seed \(seed): the rename never completed")
        }
    }

    @Test(arguments: 0..<10)
    func aCommittedFileSurvivesAnyPowerCut(seed: Int) throws {
        let fileSystem = try Self.fileSystemWithOldFile()
        try AtomicFile.write(Self.new, to: Self.path, fileSystem: fileSystem)
        #expect(try Self.contents(fileSystem.powerCut(seed: UInt64(seed))) == Self.new)
        #expect(try Self.contents(fileSystem.powerCut(.nothingUnsynced)) == Self.new)
    }

    @Test func aFileWrittenInPiecesKeepsItsHandleOpenAfterCommit() throws {
        let fileSystem = try Self.fileSystemWithOldFile()
        let file = try AtomicFile(path: "/store/segment", fileSystem: fileSystem)
        try file.handle.write(Array("header".utf8), at: 0)
        let handle = try #require(try file.commit(keepOpen: true))
        try handle.write(Array("+record".utf8), at: 6)
        try handle.sync()
        let cut = fileSystem.powerCut(.nothingUnsynced)
        let reopened = try cut.openFile("/store/segment", mode: .readOnly)
        #expect(try reopened.read(byteCount: 13, at: 0) == Array("header+record".utf8))
    }

    @Test func anAbandonedFileLeavesNothing() throws {
        let fileSystem = try Self.fileSystemWithOldFile()
        let file = try AtomicFile(path: "/store/checkpoint", fileSystem: fileSystem)
        try file.handle.write([1, 2, 3], at: 0)
        file.abandon()
        #expect(try fileSystem.contentsOfDirectory("/store").sorted() == ["store.meta"])
    }

    @Test func aRemovalIsDurable() throws {
        let fileSystem = try Self.fileSystemWithOldFile()
        try AtomicFile.removeDurably(Self.path, fileSystem: fileSystem)
        #expect(try Self.contents(fileSystem.powerCut(.nothingUnsynced)) == nil)
    }
}
