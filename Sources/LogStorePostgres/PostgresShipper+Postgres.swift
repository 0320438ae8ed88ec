import Foundation
import LogStore
import Logging
import PostgresNIO

extension PostgresShipper {
    /// Connects (once), creates the shipping tables, claims the PostgreSQL schema for this store,
    /// reads the shipped token and brings the mirror tables up to the stored schema.
    func connectIfNeeded() async throws {
        guard connection == nil else { return }
        let storeID = try source.storeIdentifier()
        let connection = try await PostgresConnection.connect(
            configuration: configuration.connection, id: Self.connectionCounter.next(), logger: logger)
        do {
            try await mirror.createShippingTables(on: connection, logger: logger)
            try await connection.query("""
                INSERT INTO \(unescaped: mirror.shippingTable) (store) VALUES (\(storeID)) ON CONFLICT DO NOTHING
                """, logger: logger)
            let rows = try await connection.query("SELECT store, token::text FROM \(unescaped: mirror.shippingTable)",
                                                  logger: logger)
            var token: String?
            for try await (store, text) in rows.decode((UUID, String?).self) {
                guard store == storeID else {
                    throw PostgresShippingError(.anotherStore, "The PostgreSQL schema \(configuration.schemaName) already "
                        + "mirrors the store \(store.uuidString); ship \(storeID.uuidString) into another schema.")
                }
                token = text
            }
            shipped = try token.map { try JSONDecoder().decode(DefaultHistoryToken.self, from: Data($0.utf8)) }
            self.connection = connection
            self.storeID = storeID
            progress.shippedToken = shipped
            try await syncSchema()
        } catch {
            self.connection = nil
            try? await connection.close()
            throw error
        }
    }

    /// Brings the mirror tables up to the stored schema (new tables, `ALTER TABLE … ADD COLUMN`).
    func syncSchema() async throws {
        guard let connection else { return }
        guard let schema = try source.storedSchema() else {
            throw PostgresShippingError(.noSchema, "The store at \(source.directory) holds no schema yet "
                + "(open it once with its models); there is nothing to mirror.")
        }
        var updated = mirror
        try await updated.sync(to: schema, on: connection, logger: logger)
        mirror = updated
    }

    /// Runs `body` and moves the shipped token to `token` in one PostgreSQL transaction. The
    /// token moves only from the value this shipper read: a second shipper that got there first
    /// makes this one roll back and carry on from the token it finds.
    func commit(through token: DefaultHistoryToken?, transactions: Int, changes: Int, reseed: Bool = false,
                _ body: (PostgresConnection) async throws -> Void) async throws {
        guard let connection, let storeID else { preconditionFailure("commit before connect") }
        let previousOffset = shipped.map { Int64($0.offset) }
        try await connection.query("BEGIN", logger: logger)
        do {
            let moved = try await connection.query("""
                UPDATE \(unescaped: mirror.shippingTable) SET token = \(token?.jsonString)::jsonb,
                    token_offset = \(token.map { Int64($0.offset) }), transactions = transactions + \(transactions),
                    changes = changes + \(changes), reseeds = reseeds + \(reseed ? 1 : 0), updated_at = now()
                WHERE store = \(storeID) AND token_offset IS NOT DISTINCT FROM \(previousOffset) RETURNING 1
                """, logger: logger)
            var movedCount = 0
            for try await _ in moved { movedCount += 1 }
            guard movedCount == 1 else { throw ConcurrentShipper() }
            try await body(connection)
            try await connection.query("COMMIT", logger: logger)
        } catch is ConcurrentShipper {
            try await connection.query("ROLLBACK", logger: logger)
            try await reloadShippedToken()
            throw PostgresShippingError(.anotherShipper, "Another shipper moved PostgreSQL's token of this store to "
                + "\(shipped?.jsonString ?? "nothing") meanwhile; nothing was written by this one.")
        } catch {
            // A failed COMMIT has an unknown outcome: drop the connection; the next run reads the token.
            _ = try? await connection.query("ROLLBACK", logger: logger)
            await close()
            throw error
        }
        shipped = token
        progress.shippedToken = token
    }

    func reloadShippedToken() async throws {
        guard let connection, let storeID else { return }
        let rows = try await connection.query(
            "SELECT token::text FROM \(unescaped: mirror.shippingTable) WHERE store = \(storeID)", logger: logger)
        var token: String?
        for try await text in rows.decode(String?.self) { token = text }
        shipped = try token.map { try JSONDecoder().decode(DefaultHistoryToken.self, from: Data($0.utf8)) }
        progress.shippedToken = shipped
    }

    /// Copies the store's current state over the mirror tables and moves the token to the
    /// state's last transaction, in one PostgreSQL transaction; then continues from there.
    func seedFromState(reason: String) async throws {
        // Hold history from now on before reading the state: its last token then stays retained.
        if source.keepsBookmark { try register(after: nil) }
        let state = try source.currentState()
        try await syncSchema()
        logger.notice("Seeding PostgreSQL from the store's state", metadata: [
            "reason": "\(reason)", "through": "\(state.lastToken?.jsonString ?? "nothing")",
        ])
        let tables = state.entities.filter { mirror.columns[$0.name] != nil }.map { mirror.table($0.name) }
        var rowCount = 0
        try await commit(through: state.lastToken, transactions: 0, changes: 0, reseed: true) { connection in
            if !tables.isEmpty {
                try await connection.query(PostgresQuery(unsafeSQL: "TRUNCATE \(tables.joined(separator: ", "))"),
                                           logger: self.logger)
            }
            for entity in state.entities where self.mirror.columns[entity.name] != nil {
                rowCount += entity.rows.count
                try await self.insertSeedRows(entity, on: connection)
            }
            // History PostgreSQL has and the store does not (a store restored from an older copy)
            // is not history any more; nothing is past the state when history merely expired.
            try await connection.query("""
                DELETE FROM \(unescaped: self.mirror.changeTable) WHERE token_offset > \(state.lastToken.map { Int64($0.offset) } ?? -1)
                """, logger: self.logger)
            if let token = state.lastToken {
                try await connection.query("""
                    INSERT INTO \(unescaped: self.mirror.changeTable)
                        (token_offset, change_index, token, author, "timestamp", process, kind, attributes, "values")
                    VALUES (\(Int64(token.offset)), -1, \(token.jsonString)::jsonb, NULL, now(), \(LogStore.processIdentifier),
                            'reseed', '{}', \(#"{"reason":"# + Self.jsonString(reason) + "}")::jsonb)
                    ON CONFLICT DO NOTHING
                    """, logger: self.logger)
            }
        }
        progress.seeds += 1
        progress.seededRows += rowCount
        if source.keepsBookmark, let token = state.lastToken { try acknowledge(token) }
    }

    private func insertSeedRows(_ entity: StoreState.Entity, on connection: PostgresConnection) async throws {
        let table = mirror.table(entity.name)
        let chunkSize = max(1, configuration.seedRowsPerStatementMax)
        var start = 0
        while start < entity.rows.count {
            let chunk = entity.rows[start..<min(start + chunkSize, entity.rows.count)]
            let json = PostgresBatch.rowsJSON(chunk.map { ($0.persistentIdentifier.primaryKey, $0.values) },
                                              primaryKeyColumn: mirror.primaryKeyColumn)
            try await connection.query("""
                INSERT INTO \(unescaped: table) SELECT * FROM jsonb_populate_recordset(NULL::\(unescaped: table), \(json)::jsonb)
                """, logger: logger)
            start += chunkSize
        }
    }

    static func jsonString(_ text: String) -> String {
        var out = ""
        PostgresJSON.appendString(text, to: &out)
        return out
    }
}

/// The token was not where this shipper read it.
struct ConcurrentShipper: Error {}
