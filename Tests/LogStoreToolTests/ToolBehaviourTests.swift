import Foundation
import LogStore
import LogStoreEngine
import LogStoreTestSupport
import SampleTrips
import Testing

#if canImport(Glibc)
    import Glibc
#endif

@testable import LogStoreCommands

/// Exit codes and one-sentence errors for bad input, the writer's lock named when busy, repair's
/// backup and --yes rule, and `history --follow` seeing another process's saves — each through
/// the real executable.
@Suite struct ToolBehaviourTests {
    /// Every failure is one line on standard error starting with `logstore:`, never a trap.
    static func expectOneSentence(_ run: ToolRun, sourceLocation: SourceLocation = #_sourceLocation) {
        let lines = run.stderr.split(separator: "\n")
        #expect(lines.count == 1, "stderr: \(run.stderr)", sourceLocation: sourceLocation)
        #expect(run.stderr.hasPrefix("logstore: "), "stderr: \(run.stderr)", sourceLocation: sourceLocation)
        #expect(!run.stderr.contains("Fatal error"), sourceLocation: sourceLocation)
        #expect(run.stdout.isEmpty, "stdout: \(run.stdout)", sourceLocation: sourceLocation)
    }

    static let readCommands = ["inspect", "verify", "replay", "history", "dump", "export"]

    @Test func badPathsAreOneSentenceAndExitCodeFour() throws {
        let scratch = TemporaryDirectory("bad")
        try FileManager.default.createDirectory(atPath: scratch.path, withIntermediateDirectories: true)
        let file = scratch.path + "/a-file"
        _ = FileManager.default.createFile(atPath: file, contents: Data("hello".utf8))
        let empty = scratch.path + "/empty"
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: false)
        for path in [scratch.path + "/missing", file, empty] {
            for command in Self.readCommands + ["compact"] {
                let arguments = command == "compact" ? [command, path, "--keep-age", "1d"] : [command, path]
                let run = try Tool.run(arguments)
                #expect(run.status == 4, "\(arguments): \(run.status) \(run.stderr)")
                Self.expectOneSentence(run)
            }
        }
        // A directory that is not a store is not made one.
        #expect(try FileManager.default.contentsOfDirectory(atPath: empty).isEmpty)
    }

    @Test func aNewerFormatVersionIsExitCodeFour() throws {
        let fixture = try Fixture()
        // store.meta's format version (FORMAT.md §4: u32 at byte 8) made 99, its CRC (bytes
        // 60..<64, CRC32C of 0..<60) recomputed: a store of a newer format.
        let meta = fixture.directory + "/store.meta"
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: meta)))
        bytes[8] = 99
        let crc = CRC32C.checksum(bytes[0..<60])
        for index in 0..<4 { bytes[60 + index] = UInt8(truncatingIfNeeded: crc >> (8 * UInt32(index))) }
        try Data(bytes).write(to: URL(fileURLWithPath: meta))
        for command in Self.readCommands + ["repair"] {
            let run = try Tool.run([command, fixture.directory])
            #expect(run.status == 4, "\(command): \(run.status) \(run.stderr)")
            Self.expectOneSentence(run)
            #expect(run.stderr.contains("newer"), "\(command): \(run.stderr)")
        }
    }

    @Test func malformedPositionsAreUsageErrors() throws {
        let fixture = try Fixture()
        for arguments in [
            ["history", fixture.directory, "--after", #"{"v":1,"store":"x""#],
            ["history", fixture.directory, "--after", "twelve"],
            ["replay", fixture.directory, "--until", "{nope"],
            ["compact", fixture.directory, "--through", "{}"],
            ["dump", fixture.directory, "--limit", "-1"],
        ] {
            let run = try Tool.run(arguments)
            #expect(run.status == 64, "\(arguments): \(run.status) \(run.stderr)")
            #expect(!run.stderr.contains("Fatal error"))
        }
    }

    @Test func aDamagedStoreIsDamageFound() throws {
        let fixture = try Fixture()
        try fixture.damageFirstTransaction()
        let verify = try Tool.run(["verify", fixture.directory])
        #expect(verify.status == 1)
        #expect(verify.stdout.contains("corruption: 00000000000000000000.log"))
        for command in ["inspect", "replay", "history", "dump", "export"] {
            let run = try Tool.run([command, fixture.directory])
            // Stops at the damage: says the output is cut short, and exits with code 1.
            #expect(run.status == 1, "\(command): \(run.status) \(run.stderr) \(run.stdout.prefix(300))")
            #expect(run.stderr.contains("logstore: "))
            #expect(run.stderr.contains("cut short") && run.stderr.contains("damage"), "\(command): \(run.stderr)")
            #expect(!run.stderr.contains("Fatal error"))
        }
        let json = try Tool.run(["replay", fixture.directory, "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
        #expect((object?["cutShort"] as? [String: Any])?["offset"] as? Int == Int(fixture.tokens[0].offset))
    }

    @Test func repairCopiesAsideAndNeedsYesOffATerminal() throws {
        let fixture = try Fixture()
        try fixture.damageFirstTransaction()
        let segment = fixture.directory + "/00000000000000000000.log"
        let damaged = try Data(contentsOf: URL(fileURLWithPath: segment))
        // Standard input is not a terminal: refused without --yes, nothing changed.
        let refused = try Tool.run(["repair", fixture.directory])
        #expect(refused.status == 64)
        #expect(refused.stderr.contains("--yes"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: segment)) == damaged)

        let backupDirectory = TemporaryDirectory("backup")
        let backup = backupDirectory.path
        let repaired = try Tool.run(["repair", fixture.directory, "--yes", "--backup", backup])
        #expect(repaired.status == 0, "\(repaired.stderr)")
        #expect(repaired.stdout.contains("Copied "))
        #expect(repaired.stdout.contains("dropped: "))
        #expect(repaired.stdout.contains("The log now ends at offset"))
        // The copy is the damaged store as it was.
        #expect(try Data(contentsOf: URL(fileURLWithPath: backup + "/00000000000000000000.log")) == damaged)
        #expect(FileManager.default.fileExists(atPath: backup + "/store.meta"))
        #expect(!FileManager.default.fileExists(atPath: backup + "/LOCK"))
        try Golden.check("repair", repaired.stdout, directories: [backup, fixture.directory])
        let verify = try Tool.run(["verify", fixture.directory])
        #expect(verify.status == 0, "\(verify.stdout)")
        // Nothing left to repair: nothing copied.
        let again = try Tool.run(["repair", fixture.directory, "--yes"])
        #expect(again.status == 0 && again.stdout.hasPrefix("Nothing to repair"))
    }

    @Test func writeCommandsRefuseABusyStoreAndNameTheHolder() throws {
        let fixture = try Fixture()
        let me = getpid()
        // This process opens the store for writing: compact, import's target, demo refuse.
        let configuration = LogStoreConfiguration(directory: fixture.directory)
        let container = try ModelContainer(for: sampleTripsModels, configuration: configuration)
        for arguments in [
            ["compact", fixture.directory, "--keep-age", "1d"],
            ["demo", fixture.directory],
        ] {
            let run = try Tool.run(arguments)
            #expect(run.status == 3, "\(arguments): \(run.status) \(run.stderr)")
            Self.expectOneSentence(run)
            #expect(run.stderr.contains("The writer's lock is held by process \(me) ("), "\(run.stderr)")
        }
        // Read commands run beside the writer.
        let inspect = try Tool.run(["inspect", fixture.directory])
        #expect(inspect.status == 0)
        #expect(inspect.stdout.contains("Writer         process \(me) ("))
        #expect(try Tool.run(["history", fixture.directory]).status == 0)
        try container.dataStore(as: LogStore.self)!.close()

        // repair, on a damaged store whose LOCK another holder has taken.
        try fixture.damageFirstTransaction()
        // O_CLOEXEC: the processes other tests spawn meanwhile must not inherit the lock.
        let lock = open(fixture.directory + "/LOCK", O_RDWR | O_CLOEXEC)
        #expect(lock >= 0)
        defer { close(lock) }
        #expect(flock(lock, LOCK_EX | LOCK_NB) == 0)
        let repair = try Tool.run(["repair", fixture.directory, "--yes"])
        #expect(repair.status == 3, "\(repair.stderr)")
        #expect(repair.stderr.contains("process \(me) ("))
        let siblings = try FileManager.default.contentsOfDirectory(
            atPath: (fixture.directory as NSString).deletingLastPathComponent)
        #expect(!siblings.contains { $0.contains(".repair-") }, "nothing copied while busy")
    }

    @Test func lockHolderParsesProcLocks() {
        let text = """
            1: POSIX  ADVISORY  WRITE 77 00:2f:999 0 EOF
            2: FLOCK  ADVISORY  WRITE 4242 08:01:123456 0 EOF
            2: -> FLOCK  ADVISORY  WRITE 5151 08:01:123456 0 EOF
            """
        #expect(LockHolder.holder(inLocks: text, major: 8, minor: 1, inode: 123_456) == 4242)
        #expect(LockHolder.holder(inLocks: text, major: 8, minor: 2, inode: 123_456) == nil)
        #expect(LockHolder.holder(inLocks: text, major: 0, minor: 0x2f, inode: 999) == nil)  // POSIX, not flock
    }

    @Test func followPrintsAnotherProcesssSaves() throws {
        let fixture = try Fixture()
        let scratch = TemporaryDirectory("follow")
        try FileManager.default.createDirectory(atPath: scratch.path, withIntermediateDirectories: true)
        let (child, out, err) = try Tool.start(
            ["history", fixture.directory, "--follow", "--after", fixture.tokens[3].json, "--limit", "2", "--json"],
            scratch: scratch.path)
        defer { if child.isRunning { child.terminate() } }
        // This process is the other one: it saves two trips while the child follows.
        let tokens = try fixture.store.saveTrips(["late", "later"])
        // Waits for the child to print its two lines and exit (--limit 2); bounded, not timed.
        let deadline = Date().addingTimeInterval(120)
        while child.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        #expect(!child.isRunning, "history --follow did not print the two saves")
        let lines = try String(contentsOfFile: out, encoding: .utf8).split(separator: "\n")
        let printed = try lines.map { try JSONDecoder().decode(ToolGoldenTests.TokenLine.self, from: Data($0.utf8)).token }
        #expect(printed == tokens, "stderr: \((try? String(contentsOfFile: err, encoding: .utf8)) ?? "")")
        #expect(child.terminationStatus == 0)
    }
}
