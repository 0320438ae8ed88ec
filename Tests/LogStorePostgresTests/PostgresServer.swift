import Foundation
import Logging
import LogStorePostgres
import PostgresNIO
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A real PostgreSQL server for one test: `initdb` into a temporary directory, `pg_ctl start` on
/// 127.0.0.1 with a free port and a unix socket in that directory, one database; stopped and
/// deleted by ``stop()``. The server refuses to run as root, so as root every server command runs
/// as the `postgres` user (`runuser -u postgres --`) on a directory chowned to it.
///
/// Missing binaries skip the tests (``isAvailable``) unless `CI` is set: then they fail.
final class PostgresServer: Sendable {
    /// `LOGSTORE_PG_BIN`, else Debian's newest `/usr/lib/postgresql/<version>/bin` (15 on this machine).
    static let binDirectory: String = {
        if let directory = ProcessInfo.processInfo.environment["LOGSTORE_PG_BIN"] { return directory }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        let newest = versions.compactMap(Int.init).sorted().last { version in
            FileManager.default.isExecutableFile(atPath: "/usr/lib/postgresql/\(version)/bin/initdb")
        }
        return "/usr/lib/postgresql/\(newest ?? 15)/bin"
    }()
    static var binariesExist: Bool {
        ["initdb", "pg_ctl", "postgres"].allSatisfy { FileManager.default.isExecutableFile(atPath: "\(binDirectory)/\($0)") }
    }
    static var underCI: Bool { ["1", "true", "yes"].contains(ProcessInfo.processInfo.environment["CI"]?.lowercased() ?? "") }
    /// Run the tests when the binaries exist, or under CI (where their absence is a failure).
    static var isAvailable: Bool { binariesExist || underCI }

    let directory: String
    let port: Int
    let database = "logstore_test"
    var url: String { "postgres://postgres@127.0.0.1:\(port)/\(database)" }

    /// Starts a server; `durable: false` turns fsync off (tests kill the shipper, never the server).
    static func start(durable: Bool = false) throws -> PostgresServer {
        guard binariesExist else {
            throw ServerError("PostgreSQL server binaries are missing in \(binDirectory) (apt-get install -y postgresql, "
                + "or set LOGSTORE_PG_BIN); CI is set, so this fails instead of skipping.")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("logstore-pg-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let server = PostgresServer(directory: directory, port: try freePort())
        do {
            if getuid() == 0 { try run("/bin/chown", ["-R", "postgres:postgres", directory]) }
            try server.runAsServerUser("initdb", ["-D", "\(directory)/data", "-U", "postgres", "--auth=trust", "-E", "UTF8",
                                                  "--no-sync"])
            var options = "-p \(server.port) -k \(directory) -c listen_addresses=127.0.0.1 -c max_connections=40"
            if !durable { options += " -c fsync=off -c full_page_writes=off" }
            try server.runAsServerUser("pg_ctl", ["-D", "\(directory)/data", "-l", "\(directory)/server.log", "-w", "-t", "60",
                                                  "-o", options, "start"])
            try server.runAsServerUser("createdb", ["-h", directory, "-p", String(server.port), "-U", "postgres", server.database])
        } catch {
            server.stop()
            throw error
        }
        return server
    }

    private init(directory: String, port: Int) {
        self.directory = directory
        self.port = port
    }

    /// Stops the server (immediate mode) and deletes its directory.
    func stop() {
        try? runAsServerUser("pg_ctl", ["-D", "\(directory)/data", "-m", "immediate", "-w", "stop"])
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A shipping configuration for this server's database, in the PostgreSQL schema `schema`.
    func configuration(schema: String = "public") throws -> PostgresShippingConfiguration {
        var configuration = try PostgresShippingConfiguration(url: url)
        configuration.schemaName = schema
        return configuration
    }

    /// Runs `body` with a connection of the test's own (to check what PostgreSQL holds), closed
    /// whatever happens (postgres-nio asserts that connections are closed).
    func withConnection<T>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        let connection = try await PostgresConnection.connect(configuration: try configuration().connection, id: 9_000,
                                                              logger: Logger(label: "test"))
        do {
            let result = try await body(connection)
            try await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
    }

    private func runAsServerUser(_ tool: String, _ arguments: [String]) throws {
        let path = "\(Self.binDirectory)/\(tool)"
        if getuid() == 0 {
            try Self.run("/usr/sbin/runuser", ["-u", "postgres", "--", path] + arguments)
        } else {
            try Self.run(path, arguments)
        }
    }

    /// posix_spawn and waitpid, not Foundation's `Process`: on Linux it learns of the exit through
    /// a socket the child inherits, and the server `pg_ctl` starts inherits it too, so
    /// `waitUntilExit` would wait for the server to stop.
    private static func run(_ executable: String, _ arguments: [String]) throws {
        let outputPath = FileManager.default.temporaryDirectory.appendingPathComponent("logstore-pg-\(UUID().uuidString).out").path
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard spawned == 0 else { throw ServerError("could not start \(executable): error \(spawned)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let exitCode = (status >> 8) & 0xFF
        guard status & 0x7F == 0, exitCode == 0 else {
            let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
            throw ServerError("\(executable) \(arguments.joined(separator: " ")) failed (status \(status)): \(text)")
        }
    }

    /// A port nothing listens on right now (bind to 0, read it back, close).
    private static func freePort() throws -> Int {
        let socketDescriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socketDescriptor >= 0 else { throw ServerError("socket() failed") }
        defer { close(socketDescriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                bind(socketDescriptor, address, length) == 0 && getsockname(socketDescriptor, address, &length) == 0
            }
        }
        guard bound else { throw ServerError("could not bind a free port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

struct ServerError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Runs `body` with a fresh server, stopped and deleted afterwards whatever happens.
func withPostgresServer<T>(durable: Bool = false, _ body: (PostgresServer) async throws -> T) async throws -> T {
    let server = try PostgresServer.start(durable: durable)
    do {
        let result = try await body(server)
        server.stop()
        return result
    } catch {
        server.stop()
        throw error
    }
}
