import Foundation
import Logging
import LogStore
@testable import LogStorePostgres
import PostgresNIO
import Testing

/// The test schema: every value type, a to-one and a to-many relationship, and (version 2) a new
/// attribute and a new entity for the schema-addition test.
enum TestSchema {
    static func v1() -> Schema {
        Schema([
            Schema.Entity("Trip", attributes: [
                .init("name", .string), .init("start", .date), .init("budget", .double), .init("rating", .int),
                .init("active", .bool), .init("photo", .data, isOptional: true), .init("tags", .array(.string)),
                .init("notes", .string, isOptional: true), .init("code", .uuid, isOptional: true),
            ], relationships: [
                .init("lodging", destination: "Lodging"),
                .init("items", destination: "Item", isToMany: true),
            ]),
            Schema.Entity("Item", attributes: [.init("title", .string), .init("done", .bool)],
                          relationships: [.init("trip", destination: "Trip")]),
            Schema.Entity("Lodging", attributes: [.init("place", .string)]),
        ])
    }

    /// Version 2: `Trip.country` (optional) and a `Review` entity referring to trips.
    static func v2() -> Schema {
        var schema = v1()
        schema.entities[0].attributes.append(.init("country", .string, isOptional: true))
        schema.entities.append(Schema.Entity("Review", attributes: [.init("stars", .int), .init("text", .string)],
                                             relationships: [.init("trip", destination: "Trip")]))
        return schema
    }
}

/// Saves a seeded random mix of inserts, updates and deletes (with nullified references).
struct Workload {
    var random: SeededRandom
    var live: [String: [PersistentIdentifier]] = [:]
    var hasReviews = false
    /// Deletes cost the store a scan for references to nullify; the large measurement store skips them.
    var deletes = true

    init(seed: UInt64) { random = SeededRandom(seed: seed) }

    mutating func save(_ count: Int, to store: LogStore, author: String? = "app") throws {
        for _ in 0..<count {
            for (_, permanent) in try store.save(nextRequest(author: author)).remappedIdentifiers {
                live[permanent.entityName, default: []].append(permanent)
            }
        }
    }

    mutating func nextRequest(author: String?) -> DataStoreSaveChangesRequest<DefaultSnapshot> {
        var request = DataStoreSaveChangesRequest<DefaultSnapshot>(editingState: EditingState(author: author))
        let lodging = PersistentIdentifier.temporary(entityName: "Lodging")
        request.inserted.append(DefaultSnapshot(persistentIdentifier: lodging,
                                                values: ["place": .string("Inn \(random.next(1000)) \"ü\"\n")]))
        let trip = PersistentIdentifier.temporary(entityName: "Trip")
        var values: [String: AttributeValue] = [
            "name": .string("Trip \(random.next(1_000_000))"),
            "start": .date(Date(timeIntervalSince1970: 1_700_000_000 + Double(random.next(10_000_000)) / 7)),
            "budget": .double(Double(random.next(100_000)) / 3), "rating": .int(Int64(random.next(11)) - 5),
            "active": .bool(random.next(2) == 0), "tags": .array([.string("a"), .string("b \(random.next(9))")]),
            "lodging": .reference(lodging), "items": .array(live["Item"].map { Array($0.suffix(2)).map(AttributeValue.reference) } ?? []),
        ]
        if random.next(3) == 0 { values["photo"] = .data(Data((0..<random.next(40)).map { UInt8($0 * 7 % 256) })) }
        if random.next(2) == 0 { values["notes"] = .string("note \(random.next(100))") }
        if random.next(4) == 0 { values["code"] = .uuid(UUID()) }
        if hasReviews, random.next(3) == 0 { values["country"] = .string("PT") }
        request.inserted.append(DefaultSnapshot(persistentIdentifier: trip, values: values))
        request.inserted.append(DefaultSnapshot(persistentIdentifier: .temporary(entityName: "Item"),
                                                values: ["title": .string("see \(random.next(99))"), "done": .bool(false),
                                                         "trip": .reference(trip)]))
        if hasReviews, let trips = live["Trip"], !trips.isEmpty {
            request.inserted.append(DefaultSnapshot(persistentIdentifier: .temporary(entityName: "Review"),
                                                    values: ["stars": .int(Int64(random.next(5))), "text": .string("ok"),
                                                             "trip": .reference(trips[random.next(trips.count)])]))
        }
        if let trips = live["Trip"], !trips.isEmpty {
            let target = trips[random.next(trips.count)]
            var changed: [String: AttributeValue] = ["budget": .double(Double(random.next(1000)) + 0.25)]
            if random.next(2) == 0 { changed["notes"] = random.next(2) == 0 ? .null : .string("updated \(random.next(50))") }
            if hasReviews { changed["country"] = .string("ES") }
            request.updated.append(DefaultSnapshot(persistentIdentifier: target, values: changed))
        }
        for entity in ["Item", "Lodging", "Trip"] where deletes && random.next(4) == 0 {
            guard let count = live[entity]?.count, count > 3 else { continue }
            // Swap-remove in place: no copy of the list per save.
            let index = random.next(count)
            live[entity]!.swapAt(index, count - 1)
            let victim = live[entity]!.removeLast()
            if request.updated.contains(where: { $0.persistentIdentifier == victim }) { continue }
            request.deleted.append(DefaultSnapshot(persistentIdentifier: victim, values: [:]))
        }
        return request
    }
}

/// SplitMix64: fixed-seed, reproducible.
struct SeededRandom {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next(_ upperBound: Int) -> Int {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476C_E484_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return Int((z ^ (z >> 31)) % UInt64(max(1, upperBound)))
    }
}

func temporaryStoreDirectory() -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("logstore-ship-\(UUID().uuidString)").path
}

func openStore(_ directory: String, schema: Schema = TestSchema.v1(), retention: HistoryRetention? = nil) throws -> LogStore {
    var configuration = LogStoreConfiguration(schema: schema, directory: directory)
    if let retention { configuration.historyRetention = retention }
    return try LogStore(configuration)
}

let testLogger = Logger(label: "LogStorePostgresTests")

/// What PostgreSQL holds for a store, compared with what LogStore says it should.
enum MirrorCheck {
    /// The mirror tables hold exactly `state`'s models (row for row, value for value, via
    /// PostgreSQL's own equality on the typed columns), and nothing else.
    static func tablesEqual(_ state: StoreState, on connection: PostgresConnection, schema: String = "public") async throws {
        try await tablesEqual(state.entities.map { entity in
            (name: entity.name, rows: entity.rows.map { ($0.persistentIdentifier.primaryKey, $0.values) })
        }, on: connection, schema: schema)
    }

    /// The mirror tables hold exactly these models per entity (name, then primary key and values).
    static func tablesEqual(_ entities: [(name: String, rows: [(UUID, [String: AttributeValue])])],
                            on connection: PostgresConnection, schema: String = "public") async throws {
        let mirror = PostgresMirror(configuration: {
            var configuration = PostgresShippingConfiguration(connection: connection.configurationPlaceholder)
            configuration.schemaName = schema
            return configuration
        }())
        for entity in entities {
            let table = mirror.table(entity.name)
            let expected = PostgresBatch.rowsJSON(entity.rows, primaryKeyColumn: "id")
            let rows = try await connection.query("""
                WITH expected AS (SELECT * FROM jsonb_populate_recordset(NULL::\(unescaped: table), \(expected)::jsonb))
                SELECT (SELECT count(*) FROM (SELECT * FROM expected EXCEPT ALL SELECT * FROM \(unescaped: table)) a),
                       (SELECT count(*) FROM (SELECT * FROM \(unescaped: table) EXCEPT ALL SELECT * FROM expected) b),
                       (SELECT count(*) FROM \(unescaped: table))
                """, logger: testLogger)
            for try await (missing, extra, count) in rows.decode((Int64, Int64, Int64).self) {
                #expect(missing == 0 && extra == 0, "\(entity.name): \(missing) rows missing in PostgreSQL, \(extra) extra")
                #expect(count == Int64(entity.rows.count), "\(entity.name): \(count) rows, the store has \(entity.rows.count)")
            }
        }
    }

    /// `logstore_changes` (without reseed rows) is exactly `history`'s changes, in order.
    static func changesEqual(_ history: [DefaultHistoryTransaction], on connection: PostgresConnection,
                             schema: String = "public") async throws {
        try await changesEqual(expectedRowsJSON: try PostgresBatch(history).changeRowsJSON, on: connection, schema: schema)
    }

    /// `logstore_changes` (without reseed rows) is exactly the rows of `expected`, a JSON array of
    /// objects with the change table's columns.
    static func changesEqual(expectedRowsJSON expected: String, on connection: PostgresConnection,
                             schema: String = "public") async throws {
        let table = PostgresMirror.quoted(schema) + ".logstore_changes"
        let rows = try await connection.query("""
            WITH expected AS (SELECT * FROM jsonb_to_recordset(\(expected)::jsonb) AS x(token_offset bigint,
                    change_index integer, token jsonb, author text, "timestamp" timestamptz, process text, kind text,
                    entity text, key uuid, attributes text[], "values" jsonb)),
                 actual AS (SELECT token_offset, change_index, token, author, "timestamp", process, kind, entity, key,
                    attributes, "values" FROM \(unescaped: table) WHERE kind <> 'reseed')
            SELECT (SELECT count(*) FROM (SELECT * FROM expected EXCEPT ALL SELECT * FROM actual) a),
                   (SELECT count(*) FROM (SELECT * FROM actual EXCEPT ALL SELECT * FROM expected) b)
            """, logger: testLogger)
        for try await (missing, extra) in rows.decode((Int64, Int64).self) {
            #expect(missing == 0 && extra == 0, "logstore_changes: \(missing) changes missing, \(extra) extra or twice")
        }
    }

    /// The token `logstore_shipping` holds for the store.
    static func shippedToken(on connection: PostgresConnection, schema: String = "public") async throws -> DefaultHistoryToken? {
        let table = PostgresMirror.quoted(schema) + ".logstore_shipping"
        guard try await count("SELECT count(*) FROM pg_class WHERE oid = to_regclass('\(table)')", on: connection) == 1 else {
            return nil
        }
        let rows = try await connection.query(
            "SELECT token::text FROM \(unescaped: PostgresMirror.quoted(schema)).logstore_shipping", logger: testLogger)
        var token: DefaultHistoryToken?
        for try await text in rows.decode(String?.self) {
            token = try text.map { try JSONDecoder().decode(DefaultHistoryToken.self, from: Data($0.utf8)) }
        }
        return token
    }

    static func count(_ sql: String, on connection: PostgresConnection) async throws -> Int64 {
        let rows = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: testLogger)
        for try await value in rows.decode(Int64.self) { return value }
        return -1
    }
}

extension PostgresConnection {
    /// Only the schema name of a configuration matters to ``PostgresMirror``'s table names.
    var configurationPlaceholder: PostgresConnection.Configuration {
        .init(host: "unused", username: "unused", password: nil, database: nil, tls: .disable)
    }
}

/// All history of the store in `directory` (read-only).
func allHistory(_ directory: String) throws -> [DefaultHistoryTransaction] {
    try LogStore.fetchHistory(directory: directory, HistoryDescriptor<DefaultHistoryTransaction>())
}
