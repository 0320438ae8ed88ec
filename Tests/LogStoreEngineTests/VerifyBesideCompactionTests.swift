import Foundation
import LogStoreTestSupport
import Testing

@testable import LogStoreEngine

/// A file system that runs a hook once, right after the first listing of the store directory:
/// what a live writer's history compaction does while `verify` is between listing and reading.
final class ListingHookFileSystem: FileSystem, @unchecked Sendable {
    let base: SimulatedFileSystem
    private let lock = NSLock()
    private var hook: (@Sendable (SimulatedFileSystem) -> Void)?

    init(_ base: SimulatedFileSystem, afterFirstListing hook: @escaping @Sendable (SimulatedFileSystem) -> Void) {
        self.base = base
        self.hook = hook
    }

    func contentsOfDirectory(_ path: String) throws(FileSystemError) -> [String] {
        let names = try base.contentsOfDirectory(path)
        lock.lock()
        let pending = hook
        hook = nil
        lock.unlock()
        pending?(base)
        return names
    }

    func openFile(_ path: String, mode: FileOpenMode) throws(FileSystemError) -> any LogStoreEngine.FileHandle {
        try base.openFile(path, mode: mode)
    }
    func createDirectory(_ path: String) throws(FileSystemError) { try base.createDirectory(path) }
    func removeFile(_ path: String) throws(FileSystemError) { try base.removeFile(path) }
    func rename(_ source: String, to destination: String) throws(FileSystemError) {
        try base.rename(source, to: destination)
    }
    func syncDirectory(_ path: String) throws(FileSystemError) { try base.syncDirectory(path) }
    func kind(of path: String) throws(FileSystemError) -> FileKind? { try base.kind(of: path) }
    func identity(of path: String) throws(FileSystemError) -> FileIdentity { try base.identity(of: path) }
}

/// `verify` beside a live writer (found by the kill test, `KillTests`): files that the writer's
/// history compaction or checkpoint pruning deletes between verify's listing and its reading
/// were reported as corruption ("I/O error … No such file or directory").
@Suite struct VerifyBesideCompactionTests {
    /// A closed log of several segments, with a checkpoint file named for its second record.
    static func store() throws -> (SimulatedFileSystem, bases: [UInt64], oldCheckpoint: String) {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem, segmentByteCountMax: 1024))
        var generator = SeededGenerator(seed: 0x5E6)
        let positions = try (0..<40).map {
            try log.append(payload(number: $0, byteCount: 150, compressible: false, generator: &generator))
        }
        let bases = log.segmentBaseOffsets
        try log.close()
        let oldCheckpoint = LogFileNames.checkpoint(positions[1].endOffset)
        try fileSystem.setBytes(Array("a checkpoint the writer prunes".utf8), at: storePath + "/" + oldCheckpoint)
        #expect(bases.count >= 5)
        return (fileSystem, bases, oldCheckpoint)
    }

    @Test func verifyDoesNotReportFilesDeletedByACompactionBesideItAsCorruption() throws {
        let (fileSystem, bases, oldCheckpoint) = try Self.store()
        // The compaction: its checkpoint at the third segment's base, the old one pruned, the two
        // oldest segments and their indexes deleted.
        let deleted = [LogFileNames.segment(bases[0]), LogFileNames.segment(bases[1])]
        let compacting = ListingHookFileSystem(fileSystem) { base in
            try! base.setBytes(Array("the compaction's checkpoint".utf8), at: storePath + "/" + LogFileNames.checkpoint(bases[2]))
            try! base.removeFile(storePath + "/" + oldCheckpoint)
            for segment in bases[0...1] {
                try! base.removeFile(storePath + "/" + LogFileNames.index(segment))
                try! base.removeFile(storePath + "/" + LogFileNames.segment(segment))
            }
        }
        let report = try Log.verify(directory: storePath, fileSystem: compacting)
        #expect(!report.hasCorruption, "\(report.corruptions)")
        #expect(report.problems.isEmpty, "\(report.problems)")
        #expect(Set(report.vanishedFiles).isSuperset(of: Set(deleted + [oldCheckpoint])), "\(report.vanishedFiles)")
        #expect(report.segmentCount == bases.count - 2)
        #expect(!report.checkpointFiles.contains(oldCheckpoint))
    }

    /// Only a vanished *oldest* run of segments is what compaction does: a segment gone from the
    /// middle still shows, as the segment before it ending short of the next.
    @Test func aSegmentVanishingFromTheMiddleIsStillCorruption() throws {
        let (fileSystem, bases, _) = try Self.store()
        let middle = ListingHookFileSystem(fileSystem) { base in
            try! base.removeFile(storePath + "/" + LogFileNames.segment(bases[2]))
        }
        let report = try Log.verify(directory: storePath, fileSystem: middle)
        #expect(report.vanishedFiles == [LogFileNames.segment(bases[2])])
        #expect(report.corruptions.contains { $0.file == LogFileNames.segment(bases[1]) }, "\(report.problems)")
    }
}
