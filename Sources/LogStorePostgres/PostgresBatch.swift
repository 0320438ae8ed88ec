import Foundation
import LogStore
import Logging
import PostgresNIO

/// The rows one PostgreSQL transaction writes for consecutive LogStore transactions: their
/// changes for the change table, and their net effect on each mirror table.
///
/// Changes to one model within the batch fold into one operation (an insert then updates is one
/// insert; an insert then a delete is nothing), so each entity costs at most three set-based
/// statements (`DELETE … = ANY`, `INSERT … jsonb_populate_recordset`, `UPDATE … FROM`) however
/// many changes it has. Order between models does not matter: nothing but the primary key is
/// unique in the mirror, and foreign keys are checked at commit.
struct PostgresBatch {
    /// One model's net change over the batch.
    enum NetChange {
        case insert([String: AttributeValue])
        case update([String: AttributeValue])
        case delete
        /// Deleted, then inserted again under the same key (only a reseeded store can do this).
        case replace([String: AttributeValue])
        /// Inserted and deleted within the batch: PostgreSQL never sees it.
        case none
    }

    struct Entity {
        var order: [UUID] = []
        var changes: [UUID: NetChange] = [:]
    }

    private(set) var entities: [String: Entity] = [:]
    private(set) var entityOrder: [String] = []
    /// The change table's rows as one JSON array (for `jsonb_to_recordset`).
    private(set) var changeRowsJSON = "["
    private(set) var changeCount = 0
    private(set) var transactionCount = 0

    init(_ transactions: [DefaultHistoryTransaction]) throws {
        for transaction in transactions { try add(transaction) }
        changeRowsJSON += "]"
    }

    private mutating func add(_ transaction: DefaultHistoryTransaction) throws {
        transactionCount += 1
        let common: [(String, String)] = [
            ("token_offset", String(transaction.token.offset)),
            ("token", transaction.token.jsonString),
            ("author", transaction.author.map { json(string: $0) } ?? "null"),
            ("timestamp", "\"" + PostgresJSON.timestamp(transaction.timestamp) + "\""),
            ("process", json(string: transaction.processIdentifier)),
        ]
        for (index, change) in transaction.changes.enumerated() {
            let identifier = change.changedPersistentIdentifier
            let (kind, values): (String, [String: AttributeValue]) = switch change {
            case let .insert(insert): ("insert", insert.values)
            case let .update(update): ("update", update.values)
            case let .delete(delete): ("delete", delete.tombstoneValues)
            }
            if changeCount > 0 { changeRowsJSON += "," }
            changeCount += 1
            var row = "{"
            for (key, json) in common { row += "\"\(key)\":\(json)," }
            row += "\"change_index\":\(index),\"kind\":\"\(kind)\",\"entity\":\(json(string: identifier.entityName)),"
            row += "\"key\":\"\(identifier.primaryKey.uuidString)\",\"attributes\":["
            row += values.keys.sorted().map { json(string: $0) }.joined(separator: ",")
            row += "],\"values\":"
            PostgresJSON.appendObject(values, to: &row)
            row += "}"
            changeRowsJSON += row
            try fold(change, into: identifier)
        }
    }

    private func json(string: String) -> String {
        var out = ""
        PostgresJSON.appendString(string, to: &out)
        return out
    }

    private mutating func fold(_ change: HistoryChange, into identifier: PersistentIdentifier) throws {
        let key = identifier.primaryKey
        if entities[identifier.entityName] == nil { entityOrder.append(identifier.entityName) }
        var entity = entities[identifier.entityName, default: Entity()]
        let previous = entity.changes[key]
        if previous == nil { entity.order.append(key) }
        let next: NetChange
        switch (previous, change) {
        case let (nil, .insert(insert)), let (.none?, .insert(insert)): next = .insert(insert.values)
        case let (nil, .update(update)): next = .update(update.values)
        case (nil, .delete): next = .delete
        case let (.insert(values)?, .update(update)): next = .insert(values.merging(update.values) { $1 })
        case (.insert?, .delete): next = .none
        case let (.update(values)?, .update(update)): next = .update(values.merging(update.values) { $1 })
        case (.update?, .delete): next = .delete
        case let (.delete?, .insert(insert)): next = .replace(insert.values)
        case let (.replace(values)?, .update(update)): next = .replace(values.merging(update.values) { $1 })
        case (.replace?, .delete): next = .delete
        default:
            throw PostgresShippingError(.mirrorDiverged, "The history changes \(identifier) in an impossible order "
                + "(\(String(describing: previous)) then \(change)); nothing was written.")
        }
        entity.changes[key] = next
        entities[identifier.entityName] = entity
    }

    // MARK: Writing

    /// Writes the change rows and each entity's net changes. Runs inside the caller's transaction.
    func write(to connection: PostgresConnection, mirror: PostgresMirror, logger: Logger) async throws {
        if changeCount > 0 {
            try await connection.query("""
                INSERT INTO \(unescaped: mirror.changeTable)
                    (token_offset, change_index, token, author, "timestamp", process, kind, entity, key, attributes, "values")
                SELECT token_offset, change_index, token, author, "timestamp", process, kind, entity, key, attributes, "values"
                FROM jsonb_to_recordset(\(changeRowsJSON)::jsonb) AS x(token_offset bigint, change_index integer,
                    token jsonb, author text, "timestamp" timestamptz, process text, kind text, entity text, key uuid,
                    attributes text[], "values" jsonb)
                """, logger: logger)
        }
        for name in entityOrder {
            try await write(entities[name]!, of: name, to: connection, mirror: mirror, logger: logger)
        }
    }

    private func write(_ entity: Entity, of name: String, to connection: PostgresConnection, mirror: PostgresMirror,
                       logger: Logger) async throws {
        let table = mirror.table(name)
        let key = PostgresMirror.quoted(mirror.primaryKeyColumn)
        var deleted: [UUID] = []
        var inserted: [(UUID, [String: AttributeValue])] = []
        var updated: [(UUID, [String: AttributeValue])] = []
        for primaryKey in entity.order {
            switch entity.changes[primaryKey]! {
            case let .insert(values): inserted.append((primaryKey, values))
            case let .update(values): updated.append((primaryKey, values))
            case .delete: deleted.append(primaryKey)
            case let .replace(values):
                deleted.append(primaryKey)
                inserted.append((primaryKey, values))
            case .none: break
            }
        }
        if !deleted.isEmpty {
            let rows = try await connection.query("""
                DELETE FROM \(unescaped: table) WHERE \(unescaped: key) = ANY(\(deleted)) RETURNING 1
                """, logger: logger)
            try await expect(rows, count: deleted.count, "delete", name)
        }
        if !inserted.isEmpty {
            try await connection.query("""
                INSERT INTO \(unescaped: table) SELECT * FROM jsonb_populate_recordset(NULL::\(unescaped: table), \
                \(Self.rowsJSON(inserted, primaryKeyColumn: mirror.primaryKeyColumn))::jsonb)
                """, logger: logger)
        }
        if !updated.isEmpty {
            var columns: Set<String> = []
            for (_, values) in updated { columns.formUnion(values.keys) }
            let assignments = columns.sorted().map { column in
                let quoted = PostgresMirror.quoted(column)
                let literal = "'" + column.replacingOccurrences(of: "'", with: "''") + "'"
                return "\(quoted) = CASE WHEN u.v ? \(literal) THEN (u.p).\(quoted) ELSE r.\(quoted) END"
            }
            var json = "["
            for (index, (primaryKey, values)) in updated.enumerated() {
                if index > 0 { json += "," }
                json += "{\"k\":\"\(primaryKey.uuidString)\",\"v\":"
                PostgresJSON.appendObject(values, to: &json)
                json += "}"
            }
            json += "]"
            let rows = try await connection.query("""
                UPDATE \(unescaped: table) AS r SET \(unescaped: assignments.joined(separator: ", "))
                FROM (SELECT x.k, x.v, jsonb_populate_record(NULL::\(unescaped: table), x.v) AS p
                      FROM jsonb_to_recordset(\(json)::jsonb) AS x(k uuid, v jsonb)) AS u
                WHERE r.\(unescaped: key) = u.k RETURNING 1
                """, logger: logger)
            try await expect(rows, count: updated.count, "update", name)
        }
    }

    /// `[{"<primary key column>":"<uuid>", "<attribute>": value, …}, …]`.
    static func rowsJSON(_ rows: some Collection<(UUID, [String: AttributeValue])>, primaryKeyColumn: String) -> String {
        var json = "["
        var keyJSON = ""
        PostgresJSON.appendString(primaryKeyColumn, to: &keyJSON)
        for (index, (primaryKey, values)) in rows.enumerated() {
            if index > 0 { json += "," }
            var rowValues = values
            rowValues[primaryKeyColumn] = nil
            PostgresJSON.appendObject(rowValues, extra: [(primaryKeyColumn, "\"\(primaryKey.uuidString)\"")], to: &json)
        }
        return json + "]"
    }

    private func expect(_ rows: PostgresRowSequence, count: Int, _ what: String, _ entity: String) async throws {
        var found = 0
        for try await _ in rows { found += 1 }
        guard found == count else {
            throw PostgresShippingError(.mirrorDiverged, "PostgreSQL's \(entity) table differs from the store: "
                + "\(count - found) of \(count) rows to \(what) are missing (something else wrote it). Reseed.")
        }
    }
}
