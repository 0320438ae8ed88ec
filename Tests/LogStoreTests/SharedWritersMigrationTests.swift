import Foundation
import LogStore
import LogStoreEngine
import LogStoreTestSupport
import Synchronization
import Testing

/// The real file system with the directory's identity tagged: a log opened through one tag and
/// a store opened through another stand for two processes (each has its own `flock`s, and the
/// in-process registries of open stores see two directories). An unlink of a path ending with
/// `failingRemoval` fails (EIO) while it is set.
final class TaggedPosixFileSystem: FileSystem, Sendable {
    let base = PosixFileSystem()
    let process: UInt64
    let failingRemoval = Mutex<String?>(nil)

    init(process: UInt64) { self.process = process }

    func openFile(_ path: String, mode: FileOpenMode) throws(FileSystemError) -> any LogStoreEngine.FileHandle {
        try base.openFile(path, mode: mode)
    }
    func createDirectory(_ path: String) throws(FileSystemError) { try base.createDirectory(path) }
    func removeFile(_ path: String) throws(FileSystemError) {
        if let suffix = failingRemoval.withLock({ $0 }), path.hasSuffix(suffix) {
            throw FileSystemError(code: EIO, operation: "unlink", path: path)
        }
        try base.removeFile(path)
    }
    func rename(_ source: String, to destination: String) throws(FileSystemError) {
        try base.rename(source, to: destination)
    }
    func syncDirectory(_ path: String) throws(FileSystemError) { try base.syncDirectory(path) }
    func contentsOfDirectory(_ path: String) throws(FileSystemError) -> [String] { try base.contentsOfDirectory(path) }
    func kind(of path: String) throws(FileSystemError) -> FileKind? { try base.kind(of: path) }
    func identity(of path: String) throws(FileSystemError) -> FileIdentity {
        try ProcessView(base, process: process).identity(of: path)
    }
}

/// B1 (review12): migrations run only in a process that opened the store alone (D11).
@Suite struct SharedWritersMigrationTests {
    static func configuration(_ directory: String, process: UInt64) -> LogStoreConfiguration {
        var configuration = LogStoreConfiguration(
            directory: directory, fileSystem: TaggedPosixFileSystem(process: process))
        configuration.allowsOtherWriters = true
        return configuration
    }

    /// A process that is not alone and whose plan needs a stage refuses to open, saying to
    /// migrate alone; alone, the same open migrates. Seen failing without the fix (the stage
    /// ran beside the other writer).
    @Test func aProcessThatIsNotAloneRefusesToMigrate() throws {
        let temporary = TemporaryDirectory("writers-migration")
        defer { temporary.remove() }
        let directory = temporary.appending("Parts.store")
        let first = try ModelContainer(
            for: PartsV1.models, migrationPlan: PartsPlan.self,
            configuration: Self.configuration(directory, process: 1))
        let part = PartV1()
        part.name = "bolt"
        let context = ModelContext(first)
        context.insert(part)
        try context.save()
        try first.dataStore(as: LogStore.self)!.close()
        // Another writer holds the store open.
        var options = LogOptions()
        options.fileSystem = TaggedPosixFileSystem(process: 2)
        options.allowsOtherWriters = true
        let other = try Log.open(directory: directory, options: options)
        var refused: LogStoreError?
        do {
            _ = try ModelContainer(
                for: PartsV2.models, migrationPlan: PartsPlan.self,
                configuration: Self.configuration(directory, process: 3))
        } catch let error as LogStoreError {
            refused = error
        }
        #expect(refused?.code == .locked)
        #expect(refused?.message.contains("no other process has the store open") == true)
        try other.close()
        // Alone, the same open migrates.
        let alone = try ModelContainer(
            for: PartsV2.models, migrationPlan: PartsPlan.self,
            configuration: Self.configuration(directory, process: 4))
        try alone.dataStore(as: LogStore.self)!.close()
    }
}
