import Foundation
import LogStore
import PostgresNIO

/// Where and how a ``PostgresShipper`` writes.
///
/// ```swift
/// var configuration = try PostgresShippingConfiguration(url: "postgres://app@127.0.0.1:5432/trips")
/// configuration.schemaName = "trips"          // one PostgreSQL schema per store
/// configuration.reseedWhenHistoryIsGone = true
/// ```
public struct PostgresShippingConfiguration: Sendable {
    /// The connection (postgres-nio's configuration: host and port or a unix socket, user,
    /// password, database, TLS).
    public var connection: PostgresConnection.Configuration
    /// The PostgreSQL schema (namespace) holding the mirror tables, the change table and
    /// `logstore_shipping`. It mirrors exactly one store: shipping a second store into it is refused.
    public var schemaName: String = "public"
    /// The column holding each model's primary key (a uuid) in every mirror table.
    public var primaryKeyColumn: String = "id"
    /// The name of the history consumer (DECISIONS.md D7) registered on a writable store, so that
    /// retention keeps everything not yet shipped. Give each shipper of one store its own name.
    public var consumerName: String = "postgres"
    /// Foreign keys (deferrable, initially deferred) for to-one relationships. Turn them off if the
    /// store's data holds references PostgreSQL cannot (a reference to a model that does not exist).
    public var foreignKeys: Bool = true
    /// When the history after the shipped token is gone (deleted before it was shipped) or does
    /// not match PostgreSQL any more (a store restored from an older copy), copy the store's
    /// current state instead of stopping with ``PostgresShippingError``.
    public var reseedWhenHistoryIsGone: Bool = false
    /// At most this many LogStore transactions per PostgreSQL transaction. A LogStore
    /// transaction is never split; several share one PostgreSQL commit while catching up.
    public var transactionsPerCommitMax: Int = 500
    /// At most this many changes per PostgreSQL transaction (a single larger LogStore
    /// transaction still goes in one, alone).
    public var changesPerCommitMax: Int = 20_000
    /// Models per statement when a (re)seed copies the state.
    public var seedRowsPerStatementMax: Int = 2_000

    /// A configuration for this connection, with the defaults above.
    public init(connection: PostgresConnection.Configuration) {
        self.connection = connection
    }

    /// A configuration from a connection URL:
    /// `postgres://user[:password]@host[:port]/database[?sslmode=disable|require][&host=/socket/dir]`.
    /// A `host` query item naming a directory connects through the unix socket
    /// `<dir>/.s.PGSQL.<port>` (libpq's convention). TLS is off unless `sslmode=require`.
    public init(url: String) throws {
        guard let components = URLComponents(string: url),
              ["postgres", "postgresql"].contains(components.scheme ?? "") else {
            throw PostgresShippingError(.invalidURL, "\(url) is not a postgres:// URL "
                + "(postgres://user:password@host:port/database).")
        }
        let items = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }) { _, last in last }
        let user = components.user.flatMap { $0.removingPercentEncoding } ?? "postgres"
        let password = components.password.flatMap { $0.removingPercentEncoding }
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        let database = path.isEmpty ? nil : path
        let port = components.port ?? 5432
        if let socketDirectory = items["host"], socketDirectory.hasPrefix("/") {
            connection = .init(unixSocketPath: "\(socketDirectory)/.s.PGSQL.\(port)", username: user,
                               password: password, database: database)
        } else {
            let host = components.host.flatMap { $0.isEmpty ? nil : $0 } ?? "127.0.0.1"
            let tls: PostgresConnection.Configuration.TLS
            switch items["sslmode"] {
            case "require", "verify-full", "verify-ca":
                do { tls = .require(try .init(configuration: .makeClientConfiguration())) } catch {
                    throw PostgresShippingError(.invalidURL, "TLS could not be set up for \(url): \(error).")
                }
            default: tls = .disable
            }
            connection = .init(host: host, port: port, username: user, password: password, database: database, tls: tls)
        }
        if let schema = items["schema"], !schema.isEmpty { schemaName = schema }
    }
}

/// Why shipping stopped. ``code`` tells what to do; ``description`` says it in a sentence.
public struct PostgresShippingError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public enum Code: Sendable, Hashable {
        /// The connection URL does not parse.
        case invalidURL
        /// History after the shipped token was deleted before it was shipped (``resumeToken`` is
        /// the store's low-water mark). Reseed: ``PostgresShipper/reseed()``, `--reseed`.
        case historyExpired
        /// PostgreSQL holds a token the store does not (another check at that offset, or an
        /// offset past the store's end: a store restored from an older copy, or a crash-lost
        /// tail). Reseed to make PostgreSQL follow the store again.
        case historyDiverged
        /// The PostgreSQL schema already mirrors another store.
        case anotherStore
        /// PostgreSQL's rows differ from what the shipped history says they are (an update or
        /// delete found no row): something else wrote the mirror tables. Reseed.
        case mirrorDiverged
        /// A name or type PostgreSQL cannot hold as the mirror needs it.
        case unsupportedSchema
        /// The store holds no schema yet (open it once with its models).
        case noSchema
        /// Another shipper moved PostgreSQL's token first; this one wrote nothing and carries on
        /// from that token.
        case anotherShipper
        /// PostgreSQL refused or lost the connection; ``underlying`` is postgres-nio's error.
        /// Nothing of the failed transaction is in PostgreSQL; shipping again resumes.
        case postgres
    }

    /// What went wrong.
    public var code: Code
    /// What happened and what to do, in a sentence or two.
    public var message: String
    /// For ``Code/historyExpired``: the store's low-water mark; shipping can resume after it once
    /// the state is copied.
    public var resumeToken: DefaultHistoryToken?
    /// For ``Code/postgres``: postgres-nio's error (a `PSQLError`, or a transaction error around one).
    public var underlying: (any Error)?

    public init(_ code: Code, _ message: String, resumeToken: DefaultHistoryToken? = nil, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.resumeToken = resumeToken
        self.underlying = underlying
    }

    /// `error` as is, or a postgres-nio error with the server's message in a sentence (a
    /// `PSQLError` describes itself generically so as not to leak data into logs).
    static func described(_ error: any Error) -> any Error {
        guard let psql = error as? PSQLError else { return error }
        var text: String
        if let info = psql.serverInfo, let message = info[.message] {
            text = "PostgreSQL refused a statement: \(message) (SQLSTATE \(info[.sqlState] ?? "?"))"
            if let detail = info[.detail] { text += ": \(detail)" }
            if info[.sqlState] == "23503" {
                text += ". The store holds a reference PostgreSQL cannot: ship without foreign keys "
                    + "(`foreignKeys = false`, `logstore ship --no-foreign-keys`)"
            }
        } else {
            text = "PostgreSQL: \(psql.code)" + (psql.underlying.map { " (\($0))" } ?? "")
        }
        return PostgresShippingError(.postgres, text + ". Nothing of the failed transaction was kept; shipping again resumes.",
                                     underlying: psql)
    }

    public var description: String { message }
}
