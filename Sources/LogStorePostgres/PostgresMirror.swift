import Foundation
import LogStore
import Logging
import PostgresNIO

/// The PostgreSQL side's layout: one table per entity of the stored schema, the change table
/// `logstore_changes` and the shipping state `logstore_shipping`, all in one PostgreSQL schema.
///
/// DDL is idempotent (`IF NOT EXISTS`) and runs in its own transaction before the rows that need
/// it: a column added early is harmless (NULL until a transaction sets it), and a crash between
/// the two leaves nothing the next run does not expect.
struct PostgresMirror: Sendable {
    let schemaName: String
    let primaryKeyColumn: String
    let foreignKeys: Bool
    /// Entity → its columns as PostgreSQL has them (attribute names), after the last sync.
    private(set) var columns: [String: Set<String>] = [:]
    /// The stored schema the tables were last brought up to.
    private(set) var schema = Schema([Schema.Entity]())

    /// PostgreSQL truncates longer identifiers silently, which could merge two names.
    static let identifierByteCountMax = 63

    init(configuration: PostgresShippingConfiguration) {
        schemaName = configuration.schemaName
        primaryKeyColumn = configuration.primaryKeyColumn
        foreignKeys = configuration.foreignKeys
    }

    // MARK: Names

    static func quoted(_ identifier: String) -> String {
        "\"" + identifier.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }

    /// `"schema"."name"`.
    func table(_ name: String) -> String { Self.quoted(schemaName) + "." + Self.quoted(name) }
    var shippingTable: String { table("logstore_shipping") }
    var changeTable: String { table("logstore_changes") }

    /// Whether every entity and attribute the transactions name has its table and column.
    func covers(_ transactions: [DefaultHistoryTransaction]) -> Bool {
        for transaction in transactions {
            for change in transaction.changes {
                let entity = change.changedPersistentIdentifier.entityName
                guard let known = columns[entity] else { return false }
                switch change {
                case let .insert(insert): if !insert.values.keys.allSatisfy(known.contains) { return false }
                case let .update(update): if !update.values.keys.allSatisfy(known.contains) { return false }
                case .delete: break
                }
            }
        }
        return true
    }

    // MARK: Types

    /// The column type of a LogStore value type: scalars map one to one, references are the
    /// target's uuid primary key, arrays of scalars (and to-many relationships) are PostgreSQL
    /// arrays, arrays of arrays are jsonb.
    static func columnType(_ type: ValueType) -> String {
        switch type {
        case .bool: "boolean"
        case .int: "bigint"
        case .double: "double precision"
        case .string: "text"
        case .data: "bytea"
        case .date: "timestamptz"
        case .uuid, .reference: "uuid"
        case let .array(element):
            if case .array = element { "jsonb" } else { columnType(element) + "[]" }
        }
    }

    // MARK: DDL

    /// Creates the schema, `logstore_shipping` and `logstore_changes` if missing.
    func createShippingTables(on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.query(PostgresQuery(unsafeSQL: "CREATE SCHEMA IF NOT EXISTS \(Self.quoted(schemaName))"),
                                   logger: logger)
        try await connection.query(PostgresQuery(unsafeSQL: """
            CREATE TABLE IF NOT EXISTS \(shippingTable) (
                store uuid PRIMARY KEY,
                token jsonb,
                token_offset bigint,
                transactions bigint NOT NULL DEFAULT 0,
                changes bigint NOT NULL DEFAULT 0,
                reseeds integer NOT NULL DEFAULT 0,
                updated_at timestamptz NOT NULL DEFAULT now()
            )
            """), logger: logger)
        try await connection.query(PostgresQuery(unsafeSQL: """
            CREATE TABLE IF NOT EXISTS \(changeTable) (
                token_offset bigint NOT NULL,
                change_index integer NOT NULL,
                token jsonb NOT NULL,
                author text,
                "timestamp" timestamptz NOT NULL,
                process text NOT NULL,
                kind text NOT NULL CHECK (kind IN ('insert', 'update', 'delete', 'reseed')),
                entity text,
                key uuid,
                attributes text[] NOT NULL,
                "values" jsonb NOT NULL,
                PRIMARY KEY (token_offset, change_index)
            )
            """), logger: logger)
    }

    /// Brings the mirror tables up to `schema`: missing tables are created, missing columns added
    /// (`ALTER TABLE … ADD COLUMN`), missing foreign keys added; then reads the columns back.
    mutating func sync(to schema: Schema, on connection: PostgresConnection, logger: Logger) async throws {
        try check(schema)
        var existing = try await readColumns(on: connection, logger: logger)
        var statements: [String] = []
        for entity in schema.entities {
            if let present = existing[entity.name] {
                for property in entity.properties where !present.contains(property.name) {
                    statements.append("ALTER TABLE \(table(entity.name)) ADD COLUMN IF NOT EXISTS "
                        + "\(Self.quoted(property.name)) \(Self.columnType(property.valueType))")
                }
            } else {
                let columnList = [Self.quoted(primaryKeyColumn) + " uuid PRIMARY KEY"]
                    + entity.properties.map { Self.quoted($0.name) + " " + Self.columnType($0.valueType) }
                statements.append("CREATE TABLE IF NOT EXISTS \(table(entity.name)) (\(columnList.joined(separator: ", ")))")
            }
            existing[entity.name, default: []].formUnion(entity.properties.map(\.name))
        }
        if foreignKeys {
            let constraints = try await readForeignKeys(on: connection, logger: logger)
            for entity in schema.entities {
                for relationship in entity.relationships where !relationship.isToMany {
                    guard schema.entity(named: relationship.destination) != nil else { continue }
                    let name = Self.constraintName(entity: entity.name, attribute: relationship.name)
                    guard !constraints.contains(name) else { continue }
                    statements.append("ALTER TABLE \(table(entity.name)) ADD CONSTRAINT \(Self.quoted(name)) "
                        + "FOREIGN KEY (\(Self.quoted(relationship.name))) REFERENCES "
                        + "\(table(relationship.destination)) (\(Self.quoted(primaryKeyColumn))) "
                        + "DEFERRABLE INITIALLY DEFERRED")
                }
            }
        }
        if !statements.isEmpty {
            try await connection.query("BEGIN", logger: logger)
            do {
                for statement in statements {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
                try await connection.query("COMMIT", logger: logger)
            } catch {
                _ = try? await connection.query("ROLLBACK", logger: logger)
                throw error
            }
            logger.debug("PostgreSQL mirror schema updated", metadata: ["statements": "\(statements.count)"])
        }
        columns = existing.filter { name, _ in schema.entity(named: name) != nil }
        self.schema = schema
    }

    /// Names PostgreSQL would truncate, and an attribute named like the primary key column.
    private func check(_ schema: Schema) throws {
        for name in [schemaName, primaryKeyColumn] + schema.entities.flatMap({ [$0.name] + $0.properties.map(\.name) })
            where name.utf8.count > Self.identifierByteCountMax || name.isEmpty || name.contains("\u{0}") {
            throw PostgresShippingError(.unsupportedSchema, "The name \"\(name)\" cannot be a PostgreSQL identifier "
                + "(1 to \(Self.identifierByteCountMax) bytes, no NUL).")
        }
        for entity in schema.entities where entity.property(named: primaryKeyColumn) != nil {
            throw PostgresShippingError(.unsupportedSchema, "\(entity.name) has a property named \"\(primaryKeyColumn)\", "
                + "the primary key column's name: choose another `primaryKeyColumn`.")
        }
        for entity in schema.entities where ["logstore_shipping", "logstore_changes"].contains(entity.name) {
            throw PostgresShippingError(.unsupportedSchema, "The entity \(entity.name) has the name of a shipping table.")
        }
    }

    /// `<Entity>_<attribute>_fkey`, or a hash of it when that would be too long.
    static func constraintName(entity: String, attribute: String) -> String {
        let name = "\(entity)_\(attribute)_fkey"
        guard name.utf8.count > identifierByteCountMax else { return name }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325 // FNV-1a
        for byte in name.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return "logstore_fkey_" + String(hash, radix: 16)
    }

    private func readColumns(on connection: PostgresConnection, logger: Logger) async throws -> [String: Set<String>] {
        let rows = try await connection.query("""
            SELECT table_name::text, column_name::text FROM information_schema.columns WHERE table_schema = \(schemaName)
            """, logger: logger)
        var result: [String: Set<String>] = [:]
        for try await (table, column) in rows.decode((String, String).self) where column != primaryKeyColumn {
            result[table, default: []].insert(column)
        }
        // A table whose only column is the primary key.
        let tables = try await connection.query("""
            SELECT table_name::text FROM information_schema.tables WHERE table_schema = \(schemaName)
            """, logger: logger)
        for try await table in tables.decode(String.self) where result[table] == nil { result[table] = [] }
        result["logstore_shipping"] = nil
        result["logstore_changes"] = nil
        return result
    }

    private func readForeignKeys(on connection: PostgresConnection, logger: Logger) async throws -> Set<String> {
        let rows = try await connection.query("""
            SELECT c.conname::text FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
            WHERE n.nspname = \(schemaName) AND c.contype = 'f'
            """, logger: logger)
        var names: Set<String> = []
        for try await name in rows.decode(String.self) { names.insert(name) }
        return names
    }
}
