import Foundation
import LogStoreEngine
import Testing

@testable import LogStore

/// Replay folds a transaction record as it decodes it (`TransactionRecord.Decoder.fold`), without
/// making the record's changes; history and the writers' catch-up decode it (`decode`). The two
/// read one grammar and must agree: the same state from the same record, and a refusal of the same
/// malformed records.
@Suite struct TransactionFoldTests {
    static let oldSchema = Schema([
        Schema.Entity(
            "Trip",
            attributes: [
                .init("name", .string), .init("rating", .int, isOptional: true),
                .init("old", .string, isOptional: true),
            ]),
        Schema.Entity("Bin", attributes: [.init("label", .string)]),
    ])
    /// `old` and `Bin` removed: records written before still read, without them.
    static let newSchema = Schema([
        Schema.Entity(
            "Trip", attributes: [.init("name", .string), .init("rating", .int, isOptional: true)])
    ])

    static let store = UUID().uuidString
    static func trip(_ key: UInt8) -> PersistentIdentifier {
        .permanent(
            for: store, entityName: "Trip",
            primaryKey: UUID(uuid: (key, 0, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 0)))
    }

    /// A record with every kind of change, repeated values, a change of an entity removed since
    /// and a value of an attribute removed since (when read with the new table).
    static func record(table: SchemaTable, payloadVersion: UInt8 = 2) -> [UInt8] {
        let bin = PersistentIdentifier.permanent(for: store, entityName: "Bin", primaryKey: UUID())
        return TransactionRecord(
            schemaVersion: table.version, author: "widget", timestampMicroseconds: 1_234_567,
            processIdentifier: "host:42:session",
            changes: [
                .insert(trip(1), ["name": .string("Paris"), "rating": .int(4), "old": .string("x")]),
                .insert(trip(2), ["name": .string("Rome")]),
                .insert(bin, ["label": .string("b")]),
                .update(trip(1), ["rating": .int(5), "old": .null]),
                .update(trip(9), ["name": .string("nobody")]),
                .delete(trip(2), tombstone: ["name": .string("Rome")]),
                .insert(trip(3), ["name": .string("Oslo"), "rating": .null]),
                .update(trip(1), ["name": .string("Paris, again")]),
                .delete(bin, tombstone: [:]),
            ]
        ).encoded(table: table, payloadVersion: payloadVersion)
    }

    static func tables() throws -> (old: SchemaTable, new: SchemaTable) {
        let old = try #require(try SchemaTable().extended(toCover: oldSchema)).table
        let new = try #require(
            try old.migrated(to: newSchema, versionIdentifier: nil, allowsRemovals: true)
        ).table
        return (old, new)
    }

    static func decodedThenApplied(_ bytes: [UInt8], table: SchemaTable, to state: FoldState) throws -> FoldState {
        var state = state
        let record = try TransactionRecord.Decoder(table: table, storeIdentifier: store).decode(bytes)
        for change in record.changes { state.apply(change) }
        return state
    }

    static func folded(_ bytes: [UInt8], table: SchemaTable, to state: FoldState) throws -> (FoldState, Int64) {
        var state = state
        var scratch: TransactionRecord.Decoder.Values = []
        let timestamp = try TransactionRecord.Decoder(table: table, storeIdentifier: store)
            .fold(bytes, into: &state, scratch: &scratch)
        return (state, timestamp)
    }

    /// A shared store's catch-up walk (``TransactionRecord/Decoder/forEachChange(_:scratch:_:)``),
    /// its changes made into dictionaries to compare with `decode`'s.
    static func walked(_ bytes: [UInt8], table: SchemaTable) throws -> ([ResolvedChange], Int64) {
        var scratch: TransactionRecord.Decoder.Values = []
        var changes: [ResolvedChange] = []
        let timestamp = try bytes.withUnsafeBytes { buffer in
            try TransactionRecord.Decoder(table: table, storeIdentifier: store).forEachChange(buffer, scratch: &scratch) {
                kind, identifier, values in
                var dictionary: [String: AttributeValue] = [:]
                for (name, value) in values { dictionary[name] = value }
                switch kind {
                case .insert: changes.append(.insert(identifier, dictionary))
                case .update: changes.append(.update(identifier, dictionary))
                case .delete: changes.append(.delete(identifier, tombstone: dictionary))
                }
            }
        }
        return (changes, timestamp)
    }

    static func same(_ lhs: FoldState, _ rhs: FoldState) -> Bool {
        lhs.entities == rhs.entities && lhs.sequenceEnd == rhs.sequenceEnd
    }

    @Test("folding a record gives the state its decoded changes give, with either table", arguments: [UInt8(1), 2])
    func foldEqualsDecodeThenApply(payloadVersion: UInt8) throws {
        let (old, new) = try Self.tables()
        let bytes = Self.record(table: old, payloadVersion: payloadVersion)
        var start = FoldState()
        start.apply(.insert(Self.trip(7), ["name": .string("before")]))
        for table in [old, new] {
            let expected = try Self.decodedThenApplied(bytes, table: table, to: start)
            let (folded, timestamp) = try Self.folded(bytes, table: table, to: start)
            #expect(Self.same(folded, expected))
            #expect(timestamp == 1_234_567)
            // The catch-up walk hands on the changes `decode` makes, in order.
            let decoded = try TransactionRecord.Decoder(table: table, storeIdentifier: Self.store).decode(bytes)
            let (walked, walkedTimestamp) = try Self.walked(bytes, table: table)
            #expect(walked == decoded.changes)
            #expect(walkedTimestamp == 1_234_567)
        }
        // What the new table leaves out is really left out, and the rest is there.
        let (folded, _) = try Self.folded(bytes, table: new, to: start)
        #expect(folded.count(of: "Bin") == 0)
        #expect(folded.row(Self.trip(1))?.values == ["name": .string("Paris, again"), "rating": .int(5)])
        #expect(folded.row(Self.trip(2)) == nil)
        #expect(folded.row(Self.trip(3))?.values == ["name": .string("Oslo"), "rating": .null])
        #expect(folded.rows(of: "Trip").map(\.0) == [Self.trip(7), Self.trip(1), Self.trip(3)].map(\.primaryKey))
    }

    @Test("a record cut short anywhere, or with a byte changed, is refused by both or read alike", arguments: [UInt8(1), 2])
    func malformedRecordsAreRefusedByBoth(payloadVersion: UInt8) throws {
        let (old, _) = try Self.tables()
        let bytes = Self.record(table: old, payloadVersion: payloadVersion)
        for length in 0..<bytes.count {
            let cut = Array(bytes[..<length])
            #expect(throws: ByteReaderError.self) { try Self.decodedThenApplied(cut, table: old, to: FoldState()) }
            #expect(throws: ByteReaderError.self) { try Self.folded(cut, table: old, to: FoldState()) }
            #expect(throws: ByteReaderError.self) { try Self.walked(cut, table: old) }
        }
        var refusedByBoth = 0
        for position in bytes.indices {
            for flip: UInt8 in [0x01, 0x80, 0xFF] {
                var changed = bytes
                changed[position] ^= flip
                let decoded = try? Self.decodedThenApplied(changed, table: old, to: FoldState())
                let folded = try? Self.folded(changed, table: old, to: FoldState()).0
                let walked = try? Self.walked(changed, table: old).0
                #expect(
                    walked == (try? TransactionRecord.Decoder(table: old, storeIdentifier: Self.store).decode(changed))?.changes,
                    "the catch-up walk and decode disagree: byte \(position) ^ \(flip)")
                switch (decoded, folded) {
                case (let decoded?, let folded?): #expect(Self.same(decoded, folded), "byte \(position) ^ \(flip)")
                case (nil, nil): refusedByBoth += 1
                case (nil, _?): Issue.record("fold accepted what decode refused: byte \(position) ^ \(flip)")
                case (_?, nil): Issue.record("fold refused what decode read: byte \(position) ^ \(flip)")
                }
            }
        }
        #expect(refusedByBoth > 0)
    }

    @Test("a process identifier that is not UTF-8 is refused by replay's fold as by decoding", arguments: [UInt8(1), 2])
    func processIdentifierNotUTF8IsRefusedByBoth(payloadVersion: UInt8) throws {
        let (old, _) = try Self.tables()
        var bytes = Self.record(table: old, payloadVersion: payloadVersion)
        // Version 1: version · table version · has author · "widget" · timestamp · process
        // identifier length. Version 2: version · shape byte count · table version · has author ·
        // "widget" · process identifier length.
        let processStart =
            payloadVersion == 1
            ? 1 + 1 + 1 + 1 + "widget".utf8.count + 8 + 1 : 1 + 1 + 1 + 1 + 1 + "widget".utf8.count + 1
        #expect(Array(bytes[processStart..<processStart + 4]) == Array("host".utf8))
        bytes[processStart + 1] = 0xC3  // a lead byte followed by ASCII: not UTF-8
        #expect(throws: ByteReaderError.self) { try Self.decodedThenApplied(bytes, table: old, to: FoldState()) }
        #expect(throws: ByteReaderError.self) { try Self.folded(bytes, table: old, to: FoldState()) }
    }

    @Test("an attribute named twice in one change: the later value wins, in both paths")
    func repeatedAttributeLaterValueWins() throws {
        let (old, _) = try Self.tables()
        let trip = try #require(old.entity(named: "Trip"))
        let name = try #require(trip.attributes.first { $0.name == "name" }).id
        let rating = try #require(trip.attributes.first { $0.name == "rating" }).id
        // The encoder never writes this (a values dictionary has each name once); a record
        // written by hand to the grammar does.
        var writer = ByteWriter(capacity: 128)
        writer.write(UInt8(1))
        writer.writeVarint(UInt64(old.version))
        writer.write(UInt8(0))
        writer.write(Int64(7))
        writer.writeLengthPrefixed(Array("p".utf8))
        writer.writeVarint(2)
        for (kind, values) in [
            (UInt8(1), [(name, AttributeValue.string("first")), (rating, .int(1)), (name, .string("second"))]),
            (UInt8(2), [(rating, AttributeValue.int(2)), (rating, .int(3))]),
        ] {
            writer.write(kind)
            writer.writeVarint(UInt64(trip.id))
            writer.write(bytes: Self.trip(1).primaryKey.bytes)
            writer.writeVarint(UInt64(values.count))
            for (attribute, value) in values {
                writer.writeVarint(UInt64(attribute))
                ValueCodec.write(value, into: &writer, entityIDs: ["Trip": trip.id])
            }
        }
        let expected = try Self.decodedThenApplied(writer.bytes, table: old, to: FoldState())
        let (folded, timestamp) = try Self.folded(writer.bytes, table: old, to: FoldState())
        #expect(timestamp == 7)
        #expect(Self.same(folded, expected))
        #expect(folded.row(Self.trip(1))?.values == ["name": .string("second"), "rating": .int(3)])
    }
}
