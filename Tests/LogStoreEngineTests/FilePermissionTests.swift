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
