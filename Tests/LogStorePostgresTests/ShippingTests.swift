import Foundation
import LogStore
@testable import LogStorePostgres
import PostgresNIO
import Testing

@Suite(.serialized, .enabled(if: PostgresServer.isAvailable,
                             "PostgreSQL server binaries are missing (apt-get install -y postgresql); CI is not set, so skipped"))
struct ShippingTests {
    @Test func shipSaveMoreShipAgainEqualsReplayAndHistory() async throws {
        try await withPostgresServer { server in
            let directory = temporaryStoreDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let store = try openStore(directory)
            var workload = Workload(seed: 1)
            try workload.save(120, to: store)
            let shipper = PostgresShipper(source: .store(store), configuration: try server.configuration())
            let first = try await shipper.ship()
            #expect(first.transactions == 120)
            try workload.save(80, to: store, author: "widget")
            let second = try await shipper.ship()
            #expect(second.transactions == 200)
            #expect(second.shippedToken == store.currentToken)
            // The consumer bookmark follows each commit.
            #expect(store.historyConsumers.first { $0.name == "postgres" }?.token == store.currentToken)
            await shipper.close()

            try await server.withConnection { connection in
            try await MirrorCheck.tablesEqual(try LogStore.replay(directory: directory), on: connection)
            try await MirrorCheck.changesEqual(try allHistory(directory), on: connection)
            #expect(try await MirrorCheck.shippedToken(on: connection) == store.currentToken)
            // Shipping again ships nothing and changes nothing.
            let again = PostgresShipper(source: .directory(directory), configuration: try server.configuration())
            #expect(try await again.ship().transactions == 0)
            await again.close()
            }
            try store.close()
        }
    }

    @Test func valuesArriveTypedInPostgreSQL() async throws {
        try await withPostgresServer { server in
            let directory = temporaryStoreDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let store = try openStore(directory)
            let start = Date(timeIntervalSince1970: 1_714_557_600.123456)
            let lodging = PersistentIdentifier.temporary(entityName: "Lodging")
            let trip = PersistentIdentifier.temporary(entityName: "Trip")
            let code = UUID()
            let saved = try await store.save(DataStoreSaveChangesRequest(editingState: EditingState(author: nil), inserted: [
                DefaultSnapshot(persistentIdentifier: lodging, values: ["place": .string("Café \"Ø\"\\\n\t🙂")]),
                DefaultSnapshot(persistentIdentifier: trip, values: [
                    "name": .string("Kyoto"), "start": .date(start), "budget": .double(.nan), "rating": .int(.max),
                    "active": .bool(true), "photo": .data(Data([0, 1, 254, 255])), "tags": .array([.string("x,y"), .string("{z}")]),
                    "code": .uuid(code), "lodging": .reference(lodging), "items": .array([]),
                ]),
            ]))
            let shipper = PostgresShipper(source: .store(store), configuration: try server.configuration())
            try await shipper.ship()
            await shipper.close()
            try await server.withConnection { connection in
            let tripKey = saved.remappedIdentifiers[trip]!.primaryKey
            let rows = try await connection.query("""
                SELECT name, start, budget::text, rating, active, photo, tags, code, lodging, items, notes
                FROM "Trip" WHERE id = \(tripKey)
                """, logger: testLogger)
            var found = 0
            for try await (name, date, budget, rating, active, photo, tags, stored, lodgingKey, items, notes) in rows.decode(
                (String, Date, String, Int64, Bool, ByteBuffer, [String], UUID, UUID, [UUID], String?).self) {
                found += 1
                #expect(name == "Kyoto")
                #expect(abs(date.timeIntervalSince(start)) < 0.000_001)
                #expect(budget == "NaN")
                #expect(rating == .max)
                #expect(active)
                #expect(Array(buffer: photo) == [0, 1, 254, 255])
                #expect(tags == ["x,y", "{z}"])
                #expect(stored == code)
                #expect(lodgingKey == saved.remappedIdentifiers[lodging]!.primaryKey)
                #expect(items.isEmpty)
                #expect(notes == nil)
            }
            #expect(found == 1)
            let places = try await connection.query("SELECT place FROM \"Lodging\"", logger: testLogger)
            for try await place in places.decode(String.self) { #expect(place == "Café \"Ø\"\\\n\t🙂") }
            // The change row: author NULL, timestamp to the microsecond, kind, key, attributes.
            let history = try allHistory(directory)
            let changes = try await connection.query("""
                SELECT author, "timestamp", kind, entity, key, attributes FROM logstore_changes ORDER BY change_index
                """, logger: testLogger)
            var kinds: [String] = []
            for try await (author, timestamp, kind, entity, key, attributes) in changes.decode(
                (String?, Date, String, String, UUID, [String]).self) {
                #expect(author == nil)
                #expect(abs(timestamp.timeIntervalSince(history[0].timestamp)) < 0.000_001)
                kinds.append(kind)
                if entity == "Trip" {
                    #expect(key == tripKey)
                    // The store fills the omitted optional `notes` with null.
                    #expect(attributes == ["active", "budget", "code", "items", "lodging", "name", "notes", "photo", "rating",
                                           "start", "tags"])
                }
            }
            #expect(kinds == ["insert", "insert"])
            }
            try store.close()
        }
    }

    @Test func expiredTokenSaysSoThenReseedEndsEqual() async throws {
        try await withPostgresServer { server in
            let directory = temporaryStoreDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            var workload = Workload(seed: 2)
            var store = try openStore(directory)
            try workload.save(40, to: store)
            // Read-only: no bookmark holds history back.
            let first = PostgresShipper(source: .directory(directory), configuration: try server.configuration())
            try await first.ship()
            await first.close()
            try workload.save(30, to: store)
            try store.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>(), force: true)
            try workload.save(10, to: store)
            try store.close()
            store = try openStore(directory)

            let stuck = PostgresShipper(source: .directory(directory), configuration: try server.configuration())
            await #expect {
                try await stuck.ship()
            } throws: { error in
                guard let error = error as? PostgresShippingError else { return false }
                return error.code == .historyExpired && error.resumeToken == store.historyLowWaterMark
                    && error.description.contains("Reseed")
            }
            await stuck.close()

            var configuration = try server.configuration()
            configuration.reseedWhenHistoryIsGone = true
            let reseeding = PostgresShipper(source: .store(store), configuration: configuration)
            let done = try await reseeding.ship()
            #expect(done.seeds == 1)
            #expect(done.transactions == 0) // the state already holds the saves after the deletion
            await reseeding.close()
            try await server.withConnection { connection in
            try await MirrorCheck.tablesEqual(try LogStore.replay(directory: directory), on: connection)
            #expect(try await MirrorCheck.shippedToken(on: connection) == store.currentToken)
            #expect(try await MirrorCheck.count("SELECT count(*) FROM logstore_changes WHERE kind = 'reseed'", on: connection) == 1)
            #expect(try await MirrorCheck.count("SELECT reseeds FROM logstore_shipping", on: connection) == 1)
            }
            try store.close()
        }
    }

    @Test func schemaAdditionMidStreamBecomesAlterTable() async throws {
        try await withPostgresServer { server in
            let directory = temporaryStoreDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            var workload = Workload(seed: 3)
            var store = try openStore(directory)
            try workload.save(30, to: store)
            try store.close()
            // A follower reading the directory while the app moves to schema version 2.
            let shipper = PostgresShipper(source: .directory(directory), configuration: try server.configuration())
            try await shipper.ship()
            store = try openStore(directory, schema: TestSchema.v2())
            workload.hasReviews = true
            try workload.save(30, to: store)
            let progress = try await shipper.ship()
            #expect(progress.transactions == 60)
            await shipper.close()
            try await server.withConnection { connection in
            #expect(try await MirrorCheck.count("""
                SELECT count(*) FROM information_schema.columns WHERE table_name = 'Trip' AND column_name = 'country'
                """, on: connection) == 1)
            #expect(try await MirrorCheck.count("SELECT count(*) FROM \"Review\"", on: connection) > 0)
            try await MirrorCheck.tablesEqual(try LogStore.replay(directory: directory), on: connection)
            try await MirrorCheck.changesEqual(try allHistory(directory), on: connection)
            }
            try store.close()
        }
    }

    @Test func followShipsEachSaveThroughTheLiveTail() async throws {
        try await withPostgresServer { server in
            let directory = temporaryStoreDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let store = try openStore(directory)
            var workload = Workload(seed: 4)
            try workload.save(5, to: store)
            let shipper = PostgresShipper(source: .store(store), configuration: try server.configuration())
            let following = Task { try await shipper.follow() }
            try workload.save(50, to: store)
            let target = store.currentToken
            let deadline = ContinuousClock.now + .seconds(30)
            while await shipper.shippedToken != target, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            following.cancel()
            let progress = try await following.value
            #expect(progress.transactions == 55)
            await shipper.close()
            try await server.withConnection { connection in
            try await MirrorCheck.tablesEqual(try LogStore.replay(directory: directory), on: connection)
            try await MirrorCheck.changesEqual(try allHistory(directory), on: connection)
            }
            try store.close()
        }
    }

    /// A shipper dropped without `close()` (a caller's thrown error, a cancelled task) closes its
    /// connection itself: postgres-nio asserts in debug builds that no connection is deallocated
    /// open, which would end this test process; and PostgreSQL sees the connection go.
    @Test func aShipperDroppedWithoutCloseClosesItsConnection() async throws {
        try await withPostgresServer { server in
            let directory = temporaryStoreDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let store = try openStore(directory)
            var workload = Workload(seed: 6)
            try workload.save(3, to: store)
            try store.close()
            do {
                let shipper = PostgresShipper(source: .directory(directory), configuration: try server.configuration())
                #expect(try await shipper.ship().transactions == 3)
            }
            try await server.withConnection { connection in
                var others: Int64 = -1
                for _ in 0..<600 {
                    others = try await MirrorCheck.count("""
                        SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()
                        """, on: connection)
                    if others == 0 { break }
                    try await Task.sleep(for: .milliseconds(50))
                }
                #expect(others == 0, "the dropped shipper's connection is still open")
            }
        }
    }

    @Test func aSecondStoreIsRefusedInTheSameSchema() async throws {
        try await withPostgresServer { server in
            let first = temporaryStoreDirectory(), second = temporaryStoreDirectory()
            defer { for directory in [first, second] { try? FileManager.default.removeItem(atPath: directory) } }
            for directory in [first, second] {
                let store = try openStore(directory)
                var workload = Workload(seed: 5)
                try workload.save(3, to: store)
                try store.close()
            }
            let a = PostgresShipper(source: .directory(first), configuration: try server.configuration())
            try await a.ship()
            await a.close()
            let b = PostgresShipper(source: .directory(second), configuration: try server.configuration())
            await #expect { try await b.ship() } throws: { ($0 as? PostgresShippingError)?.code == .anotherStore }
            await b.close()
            let c = PostgresShipper(source: .directory(second), configuration: try server.configuration(schema: "second"))
            #expect(try await c.ship().transactions == 3)
            await c.close()
        }
    }
}
