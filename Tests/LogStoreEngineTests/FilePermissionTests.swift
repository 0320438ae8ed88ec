import Foundation
import LogStoreTestSupport
import Testing
@testable import LogStoreEngine

/// A new store is readable by its owner only (0600 files, 0700 directories) unless asked to share
/// it with a group.
@Suite struct FilePermissionTests {
    static func mode(_ path: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return (attributes[.posixPermissions] as? Int ?? -1) & 0o7777
    }

    @Test func aNewStoreIsPrivateToItsOwner() throws {
        let temporary = TemporaryDirectory("permissions")
        defer { temporary.remove() }
        let directory = temporary.appending("store")
        let log = try Log.open(directory: directory)
        try log.append(Array("private".utf8))
        try log.close()
        #expect(try Self.mode(directory) == 0o700)
        let names = try FileManager.default.contentsOfDirectory(atPath: directory)
        #expect(names.contains("store.meta") && names.contains("LOCK"))
        for name in names {
            #expect(try Self.mode(directory + "/" + name) == 0o600, "\(name)")
        }
    }

    @Test func aGroupStoreIsSharedWithTheGroup() throws {
        let temporary = TemporaryDirectory("permissions")
        defer { temporary.remove() }
        let directory = temporary.appending("store")
        var options = LogOptions()
        options.fileSystem = PosixFileSystem(permissions: .group)
        let log = try Log.open(directory: directory, options: options)
        try log.append(Array("shared".utf8))
        try log.close()
        #expect(try Self.mode(directory) == 0o2770)
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
            #expect(try Self.mode(directory + "/" + name) == 0o660, "\(name)")
        }
    }
}

/// No file operation follows a symbolic link planted in a store directory out of it.
@Suite struct SymbolicLinkTests {
    @Test func aLockSymlinkIsRefusedAndItsTargetUntouched() throws {
        let temporary = TemporaryDirectory("symlink")
        defer { temporary.remove() }
        let directory = temporary.appending("store")
        try Log.open(directory: directory).close()
        let outside = temporary.appending("precious.txt")
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: outside))
        try FileManager.default.removeItem(atPath: directory + "/LOCK")
        try FileManager.default.createSymbolicLink(atPath: directory + "/LOCK", withDestinationPath: outside)
        #expect(throws: LogError.self) { try Log.open(directory: directory).close() }
        #expect(try String(contentsOfFile: outside, encoding: .utf8) == "keep me")
    }

    @Test func aSegmentSymlinkIsNotWrittenThrough() throws {
        let temporary = TemporaryDirectory("symlink")
        defer { temporary.remove() }
        let directory = temporary.appending("store")
        let log = try Log.open(directory: directory)
        try log.append(Array("one".utf8))
        try log.close()
        let segment = directory + "/00000000000000000000.log"
        let outside = temporary.appending("elsewhere.log")
        try FileManager.default.moveItem(atPath: segment, toPath: outside)
        let before = try Data(contentsOf: URL(fileURLWithPath: outside))
        try FileManager.default.createSymbolicLink(atPath: segment, withDestinationPath: outside)
        #expect(throws: LogError.self) {
            let reopened = try Log.open(directory: directory)
            try reopened.append(Array("two".utf8))
            try reopened.close()
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: outside)) == before)
    }
}
