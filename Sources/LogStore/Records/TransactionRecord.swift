import Foundation
import LogStoreEngine

/// The payload of a transaction record: who saved, when, and the resolved changes in order
/// (docs/FORMAT.md §6.9).
///
/// Version 2 (written since issue 13's last step) puts the parts that repeat from save to save
/// — ids, tags, lengths, author, process identifier — together in a **shape**, the values' bytes
/// after it in the **data** (the timestamp first), and every 16-byte key last:
///
/// ```
/// u8 2 · varint shape byte count · shape · data · keys
/// shape: varint schema table version · u8 has author (0 or 1) [+ string author]
///   · string process identifier · varint change count · varint key count
///   · per change: u8 kind (1 insert, 2 update, 3 delete) · varint entity id · varint value count
///     · per value: varint attribute id, the value's shape (``ValueCodec``)
/// data: i64 timestamp (µs since 1970, never decreasing along the log) · each value's data in order
/// keys: 16 bytes per key — each change's primary key, then its values' UUIDs and references —
///   in the order the shape names them (key count × 16 bytes, to the payload's end)
/// ```
///
/// Version 1 (read, and written only on request) holds the same fields in one stream:
///
/// ```
/// u8 1 · varint schema table version · u8 has author [+ string author] · i64 timestamp
/// · string process identifier · varint change count · per change: u8 kind · varint entity id
/// · 16-byte primary key · varint value count · per value: varint attribute id, value
/// ```
struct TransactionRecord: Sendable, Equatable {
    var schemaVersion: UInt32
    var author: String?
    var timestampMicroseconds: Int64
    var processIdentifier: String
    var changes: [ResolvedChange]

    /// The payload versions this build reads; it writes the newest.
    static let payloadVersions: ClosedRange<UInt8> = 1...2

    func encoded(table: SchemaTable, payloadVersion: UInt8 = payloadVersions.upperBound) -> [UInt8] {
        var buffers = EncodingBuffers()
        return encoded(table: table, payloadVersion: payloadVersion, reusing: &buffers)
    }

    /// The buffers a payload is encoded in, kept by a store from one save to the next (under its
    /// lock): each save made and freed five arrays before (three streams, the shape's head and
    /// the payload). The payload returned shares the last one's storage until the next encoding
    /// (which then finds it shared, and takes a new buffer: the payload returned never changes).
    struct EncodingBuffers {
        var streams = SplitPayloadWriter(changeCount: 1)
        var head = ByteWriter(capacity: 64)
        var payload = ByteWriter(capacity: 256)

        /// A buffer grown past this by a large save is let go as soon as that save is encoded:
        /// a store keeps at most five of this size between saves.
        static let keptByteCountMax = 256 * 1024

        /// Before an encoding of `changeCount` changes: the payload emptied (the streams were at
        /// the last one's ``end()``), and room for them (the sizes
        /// ``SplitPayloadWriter/init(changeCount:)`` reserves).
        mutating func begin(changeCount: Int) {
            assert(streams.shape.count + streams.data.count + streams.keys.count + head.count == 0, "not emptied")
            payload.reset(keepingCapacityUpTo: Self.keptByteCountMax)
            let room = SplitPayloadWriter.capacities(forChangeCount: changeCount)
            streams.shape.reserve(room.shape)
            streams.data.reserve(room.data)
            streams.keys.reserve(room.keys)
        }

        /// After an encoding: the streams emptied, and whatever grew past the bound let go (the
        /// payload's storage stays with the payload returned).
        mutating func end() {
            streams.shape.reset(keepingCapacityUpTo: Self.keptByteCountMax)
            streams.data.reset(keepingCapacityUpTo: Self.keptByteCountMax)
            streams.keys.reset(keepingCapacityUpTo: Self.keptByteCountMax)
            head.reset(keepingCapacityUpTo: Self.keptByteCountMax)
            if payload.capacity > Self.keptByteCountMax { payload = ByteWriter(capacity: 256) }
        }
    }

    /// ``encoded(table:payloadVersion:)`` in `buffers` (version 2; version 1, for tests and
    /// fixtures, encodes in a writer of its own).
    func encoded(
        table: SchemaTable, payloadVersion: UInt8 = payloadVersions.upperBound, reusing buffers: inout EncodingBuffers
    ) -> [UInt8] {
        precondition(Self.payloadVersions.contains(payloadVersion), "payload version \(payloadVersion)")
        // Read only to encode references: a save that holds none makes no dictionary of them.
        let holdsReferences = changes.contains { change in
            switch change {
            case .insert(_, let values), .update(_, let values), .delete(_, let values):
                values.values.contains(where: \.holdsReferences)
            }
        }
        let entityIDs = holdsReferences ? Dictionary(uniqueKeysWithValues: table.entities.map { ($0.name, $0.id) }) : [:]
        if payloadVersion == 1 {
            var writer = ByteWriter(capacity: 64 + processIdentifier.utf8.count + changes.count * 48)
            writer.write(payloadVersion)
            writer.writeVarint(UInt64(schemaVersion))
            writeAuthor(into: &writer)
            writer.write(timestampMicroseconds)
            writer.writeLengthPrefixed(processIdentifier.utf8)
            writer.writeVarint(UInt64(changes.count))
            writeChanges(into: &writer, table: table, entityIDs: entityIDs)
            return writer.bytes
        }
        buffers.begin(changeCount: changes.count)
        defer { buffers.end() }
        buffers.streams.data.write(timestampMicroseconds)
        writeChanges(into: &buffers.streams, table: table, entityIDs: entityIDs)
        // The shape's head (what comes before the changes) is known only now: the key count.
        buffers.head.writeVarint(UInt64(schemaVersion))
        writeAuthor(into: &buffers.head)
        buffers.head.writeLengthPrefixed(processIdentifier.utf8)
        buffers.head.writeVarint(UInt64(changes.count))
        assert(buffers.streams.keys.count % 16 == 0, "keys are 16 bytes each")
        buffers.head.writeVarint(UInt64(buffers.streams.keys.count / 16))
        let shapeByteCount = buffers.head.count + buffers.streams.shape.count
        buffers.payload.reserve(11 + shapeByteCount + buffers.streams.data.count + buffers.streams.keys.count)
        buffers.payload.write(payloadVersion)
        buffers.payload.writeVarint(UInt64(shapeByteCount))
        buffers.payload.write(bytes: buffers.head.bytes)
        buffers.payload.write(bytes: buffers.streams.shape.bytes)
        buffers.payload.write(bytes: buffers.streams.data.bytes)
        buffers.payload.write(bytes: buffers.streams.keys.bytes)
        return buffers.payload.bytes
    }

    private func writeAuthor(into writer: inout ByteWriter) {
        if let author {
            writer.write(UInt8(1))
            writer.writeLengthPrefixed(author.utf8)
        } else {
            writer.write(UInt8(0))
        }
    }

    /// Each change through `sink`: one stream (version 1) or three (version 2) — the same calls.
    private func writeChanges(into sink: inout some ValueSink, table: SchemaTable, entityIDs: [String: UInt32]) {
        for change in changes {
            let (kind, identifier, values): (UInt8, PersistentIdentifier, [String: AttributeValue]) =
                switch change {
                case .insert(let identifier, let values): (1, identifier, values)
                case .update(let identifier, let values): (2, identifier, values)
                case .delete(let identifier, let tombstone): (3, identifier, tombstone)
                }
            let entity = table.entity(named: identifier.entityName)!
            sink.writeShape(kind)
            sink.writeShapeVarint(UInt64(entity.id))
            sink.writeKey(identifier.primaryKey)
            sink.writeShapeVarint(UInt64(values.count))
            // Attribute order follows the table, so equal saves encode to equal bytes.
            for attribute in entity.attributes {
                guard let value = values[attribute.name] else { continue }
                sink.writeShapeVarint(UInt64(attribute.id))
                ValueCodec.write(value, into: &sink, entityIDs: entityIDs)
            }
        }
    }

    /// Everything before the changes, read in place; the changes are read from `body`.
    struct Header {
        var schemaVersion: UInt32
        /// The author's UTF-8 bytes (`nil`: no author), not yet checked to be UTF-8.
        var author: UnsafeRawBufferPointer?
        var timestampMicroseconds: Int64
        /// The process identifier's bytes, not yet checked to be UTF-8.
        var processIdentifier: UnsafeRawBufferPointer
        var changeCount: Int
        var body: Body

        /// Where the changes are: one stream (version 1) or three (version 2).
        enum Body {
            case single(ByteReader)
            case split(SplitPayloadReader)
        }

        /// Reads a payload's header; the bytes must outlive it.
        init(_ bytes: UnsafeRawBufferPointer) throws(ByteReaderError) {
            let prefix = try Prefix(bytes)
            schemaVersion = prefix.schemaVersion
            author = prefix.author
            switch prefix.version {
            case 1:
                var reader = prefix.reader
                timestampMicroseconds = try reader.read()
                processIdentifier = try reader.readLengthPrefixedInPlace()
                let count = try reader.readVarint()
                guard count <= UInt64(reader.remainingByteCount) else { throw .malformed("change count \(count)") }
                changeCount = Int(count)
                body = .single(reader)
            default:  // 2: `Prefix` refuses every other version
                var shape = prefix.reader
                var reader = prefix.rest
                processIdentifier = try shape.readLengthPrefixedInPlace()
                let count = try shape.readVarint()
                // Each change's kind is a byte of the shape, and its primary key one of the keys.
                guard count <= UInt64(shape.remainingByteCount) else { throw .malformed("change count \(count)") }
                changeCount = Int(count)
                let keyCount = try shape.readVarint()
                guard keyCount >= count, keyCount <= UInt64(reader.remainingByteCount) / 16 else {
                    throw .malformed("key count \(keyCount)")
                }
                let dataByteCount = reader.remainingByteCount - Int(keyCount) * 16
                var data = ByteReader(try reader.readBytesInPlace(dataByteCount))
                timestampMicroseconds = try data.read()
                let keys = ByteReader(try reader.readBytesInPlace(Int(keyCount) * 16))
                body = .split(SplitPayloadReader(shape: shape, data: data, keys: keys))
            }
        }

        /// A payload read through its author (what a history author filter needs, and where
        /// every header read starts): the version, the schema table version, the author, the
        /// reader positioned after them — the payload's (version 1) or the shape's (version 2) —
        /// and, in version 2, the rest of the payload after the shape.
        struct Prefix {
            let version: UInt8
            let schemaVersion: UInt32
            let author: UnsafeRawBufferPointer?
            let reader: ByteReader
            let rest: ByteReader

            init(_ bytes: UnsafeRawBufferPointer) throws(ByteReaderError) {
                var payload = ByteReader(bytes)
                version = try payload.readByte()
                switch version {
                case 1:
                    var reader = payload
                    schemaVersion = UInt32(truncatingIfNeeded: try reader.readVarint())
                    // Version 1 reads any byte but 1 as "no author" (it never wrote another).
                    author = try reader.readByte() == 1 ? try reader.readLengthPrefixedInPlace() : nil
                    self.reader = reader
                    rest = ByteReader(UnsafeRawBufferPointer(start: nil, count: 0))
                case 2:
                    var shape = ByteReader(try payload.readLengthPrefixedInPlace())
                    schemaVersion = UInt32(truncatingIfNeeded: try shape.readVarint())
                    switch try shape.readByte() {
                    case 0: author = nil
                    case 1: author = try shape.readLengthPrefixedInPlace()
                    case let flag: throw .malformed("has-author byte \(flag)")
                    }
                    reader = shape
                    rest = payload
                default:
                    throw unknownVersion(version)
                }
            }
        }
    }

    /// A payload version this build does not read: a newer one names itself as newer.
    static func unknownVersion(_ version: UInt8) -> ByteReaderError {
        version > payloadVersions.upperBound
            ? .malformed(
                "transaction payload version \(version), newer than this build reads (up to \(payloadVersions.upperBound))")
            : .malformed("unknown transaction payload version \(version)")
    }

    /// The author and timestamp alone, read from the start of the payload without decoding the
    /// changes (history filters on author read only this much).
    static func decodePrefix(_ bytes: [UInt8]) throws(ByteReaderError) -> (
        author: String?, timestampMicroseconds: Int64
    ) {
        try ByteReader.withBytes(bytes) { bytes throws(ByteReaderError) in
            let header = try Header(bytes)
            return (try header.author.map(ValueCodec.string), header.timestampMicroseconds)
        }
    }

    /// Whether `matches` accepts the author's UTF-8 bytes, read where they are in the payload
    /// (`nil`: no author), without making a String or an array: a history author filter compares
    /// bytes first, for every record it passes over. The bytes are valid only during the call.
    static func authorMatches(
        _ bytes: [UInt8], _ matches: (UnsafeRawBufferPointer?) -> Bool
    ) throws(ByteReaderError) -> Bool {
        try ByteReader.withBytes(bytes) { buffer throws(ByteReaderError) in try authorMatches(buffer, matches) }
    }

    /// The same, over a payload read in place (``LogStoreEngine/LogRecordView``). Reads no further
    /// than the author.
    static func authorMatches(
        _ bytes: UnsafeRawBufferPointer, _ matches: (UnsafeRawBufferPointer?) -> Bool
    ) throws(ByteReaderError) -> Bool {
        matches(try Header.Prefix(bytes).author)
    }

    /// Everything before the changes: schema version, author, timestamp and (when asked) the
    /// process identifier.
    /// What a history read takes from a transaction's header (``decodeHeader(_:processIdentifier:)``).
    typealias HeaderFields = (schemaVersion: UInt32, author: String?, timestampMicroseconds: Int64, processIdentifier: String)

    static func decodeHeader(_ bytes: [UInt8], processIdentifier: Bool) throws(ByteReaderError) -> HeaderFields {
        var strings = RepeatedStrings()
        return try decodeHeader(bytes, processIdentifier: processIdentifier, strings: &strings)
    }

    /// ``decodeHeader(_:processIdentifier:)`` for a run of records: `strings` keeps the author and
    /// process identifier decoded last, so records repeating them (a run of one process's saves)
    /// make no new strings — what a history fetch spent most of its header decoding on.
    static func decodeHeader(_ bytes: [UInt8], processIdentifier: Bool, strings: inout RepeatedStrings)
        throws(ByteReaderError) -> HeaderFields
    {
        try ByteReader.withBytes(bytes) { bytes throws(ByteReaderError) in
            try decodeHeader(bytes, processIdentifier: processIdentifier, strings: &strings)
        }
    }

    /// The same, over a payload read in place (``LogStoreEngine/LogRecordView``).
    static func decodeHeader(_ bytes: UnsafeRawBufferPointer, processIdentifier: Bool, strings: inout RepeatedStrings)
        throws(ByteReaderError) -> HeaderFields
    {
        let header = try Header(bytes)
        let author = try header.author.map { bytes throws(ByteReaderError) in try strings.author(bytes) }
        return (
            header.schemaVersion, author, header.timestampMicroseconds,
            processIdentifier ? try strings.processIdentifier(header.processIdentifier) : ""
        )
    }

    /// The author and process identifier strings decoded last, with their bytes (see
    /// ``decodeHeader(_:processIdentifier:strings:)``): the last two of each, so that two that
    /// alternate (an app and its widget saving in turn) are not decoded again at every switch.
    struct RepeatedStrings {
        private var authors = Recent()
        private var processIdentifiers = Recent()

        mutating func author(_ bytes: UnsafeRawBufferPointer) throws(ByteReaderError) -> String {
            try authors.string(bytes)
        }

        mutating func processIdentifier(_ bytes: UnsafeRawBufferPointer) throws(ByteReaderError) -> String {
            try processIdentifiers.string(bytes)
        }

        /// The last two strings of one kind, with their bytes, the most recent first.
        private struct Recent {
            private var lastBytes: [UInt8] = []
            private var last = ""
            private var previousBytes: [UInt8] = []
            private var previous = ""

            mutating func string(_ bytes: UnsafeRawBufferPointer) throws(ByteReaderError) -> String {
                if lastBytes.hasSameBytes(as: bytes) { return last }
                if previousBytes.hasSameBytes(as: bytes) {
                    swap(&last, &previous)
                    swap(&lastBytes, &previousBytes)
                    return last
                }
                // Decoded (and checked) before it is kept: bytes that are not UTF-8 are never reused.
                let string = try ValueCodec.string(bytes)
                previous = last
                previousBytes = lastBytes
                last = string
                lastBytes = Array(bytes)
                return string
            }
        }
    }

    static func decode(_ bytes: [UInt8], table: SchemaTable, storeIdentifier: String) throws(ByteReaderError)
        -> TransactionRecord
    {
        try Decoder(table: table, storeIdentifier: storeIdentifier).decode(bytes)
    }

    /// Decodes transaction records of one schema table: its lookups are built once, not per
    /// record (replay decodes a million records with the same table), and held in one class
    /// instance, so a decoder costs one retain to copy (its four dictionaries and sets, copied
    /// per record, were 5 % of a replay).
    struct Decoder {
        /// The lookups of one table, built once.
        private final class Lookups: Sendable {
            let table: SchemaTable
            let storeIdentifier: String
            let entityNames: [UInt32: String]
            /// Live entities and their ids, side by side (a scan of a few ids, no hashing).
            let entityIDs: [UInt32]
            let entities: [Entity]
            /// Ids a migration removed (entities, and attributes of live entities): a record older
            /// than the removal is read without them (history read with the newest table).
            let retiredEntityIDs: Set<UInt32>
            let retiredAttributeIDs: Set<UInt32>

            /// A live entity's name and its attributes' ids and names, side by side (a scan of
            /// a few ids, with no attribute copied out).
            struct Entity: Sendable {
                let name: String
                let attributeIDs: [UInt32]
                let attributeNames: [String]
            }

            init(table: SchemaTable, storeIdentifier: String) {
                self.table = table
                self.storeIdentifier = storeIdentifier
                entityNames = Dictionary(
                    (table.entities + table.retiredEntities).map { ($0.id, $0.name) },
                    uniquingKeysWith: { live, _ in live })
                entityIDs = table.entities.map(\.id)
                entities = table.entities.map {
                    Entity(
                        name: $0.name, attributeIDs: $0.attributes.map(\.id), attributeNames: $0.attributes.map(\.name))
                }
                retiredEntityIDs = Set(table.retiredEntities.map(\.id))
                retiredAttributeIDs = Set(table.retiredAttributes.map(\.id))
            }

            func entity(_ id: UInt32) -> Entity? {
                entityIDs.firstIndex(of: id).map { entities[$0] }
            }
        }

        private let lookups: Lookups
        var table: SchemaTable { lookups.table }

        init(table: SchemaTable, storeIdentifier: String) {
            lookups = Lookups(table: table, storeIdentifier: storeIdentifier)
        }

        /// The record; without `readsProcessIdentifier` its process identifier is left empty
        /// (still checked to be UTF-8): the writers' catch-up has no use for it.
        func decode(_ bytes: [UInt8], readsProcessIdentifier: Bool = true) throws(ByteReaderError) -> TransactionRecord
        {
            try ByteReader.withBytes(bytes) { bytes throws(ByteReaderError) in
                try decode(bytes, readsProcessIdentifier: readsProcessIdentifier)
            }
        }

        /// ``decode(_:readsProcessIdentifier:)`` of a payload read in place.
        func decode(_ bytes: UnsafeRawBufferPointer, readsProcessIdentifier: Bool = true) throws(ByteReaderError)
            -> TransactionRecord
        {
            let storeIdentifier = lookups.storeIdentifier
            var changes: [ResolvedChange] = []
            var scratch: Values = []
            let header = try walk(bytes, readsProcessIdentifier: readsProcessIdentifier, scratch: &scratch) {
                count throws(ByteReaderError) in
                changes.reserveCapacity(count)
            } change: { kind, entityName, primaryKey, values throws(ByteReaderError) in
                let identifier = PersistentIdentifier.permanent(
                    for: storeIdentifier, entityName: entityName, primaryKey: primaryKey)
                let dictionary = Self.dictionary(values)
                switch kind {
                case .insert: changes.append(.insert(identifier, dictionary))
                case .update: changes.append(.update(identifier, dictionary))
                case .delete: changes.append(.delete(identifier, tombstone: dictionary))
                }
            }
            return TransactionRecord(
                schemaVersion: header.schemaVersion, author: header.author,
                timestampMicroseconds: header.timestampMicroseconds,
                processIdentifier: header.processIdentifier, changes: changes)
        }

        /// Applies a record's changes to `state` as they are read, without making a
        /// ``TransactionRecord``: replay's path (no ``ResolvedChange`` per change, values go
        /// straight into the row, no process identifier string). Returns the record's timestamp. It refuses
        /// exactly what ``decode(_:readsProcessIdentifier:)`` refuses.
        ///
        /// A malformed record throws after the changes before the fault were applied: the caller
        /// discards `state` then (a replay that throws returns nothing). `scratch` is reused from
        /// record to record.
        /// With `strings`, a string value equal to one decoded shortly before shares its storage.
        func fold(
            _ bytes: [UInt8], into state: inout FoldState, scratch: inout Values, strings: StringInterner? = nil
        ) throws(ByteReaderError) -> Int64 {
            try ByteReader.withBytes(bytes) { bytes throws(ByteReaderError) in
                try fold(bytes, into: &state, scratch: &scratch, strings: strings)
            }
        }

        /// ``fold(_:into:scratch:strings:)`` of a payload read in place (``LogRecordView``).
        func fold(
            _ bytes: UnsafeRawBufferPointer, into state: inout FoldState, scratch: inout Values,
            strings: StringInterner? = nil
        ) throws(ByteReaderError) -> Int64 {
            let header = try walk(bytes, readsProcessIdentifier: false, scratch: &scratch, strings: strings) {
                _ throws(ByteReaderError) in
            } change: { kind, entityName, primaryKey, values throws(ByteReaderError) in
                switch kind {
                case .insert: state.insert(entityName: entityName, primaryKey: primaryKey, values: values)
                case .update: state.update(entityName: entityName, primaryKey: primaryKey, values: values)
                case .delete: state.delete(entityName: entityName, primaryKey: primaryKey)
                }
            }
            return header.timestampMicroseconds
        }

        /// Hands each change of a payload read in place to `change` as it is read — its kind, its
        /// model's identifier and its values in record order (in `scratch`, valid during the call)
        /// — without making a ``TransactionRecord`` or a dictionary per change: a writer's
        /// catch-up fold of other processes' records. Returns the record's timestamp; refuses
        /// exactly what ``decode(_:readsProcessIdentifier:)`` refuses (after the changes before
        /// the fault were handed on).
        func forEachChange(
            _ bytes: UnsafeRawBufferPointer, scratch: inout Values,
            _ change: (ChangeKind, PersistentIdentifier, Values.SubSequence) throws(ByteReaderError) -> Void
        ) throws(ByteReaderError) -> Int64 {
            let storeIdentifier = lookups.storeIdentifier
            let header = try walk(bytes, readsProcessIdentifier: false, scratch: &scratch) {
                _ throws(ByteReaderError) in
            } change: { kind, entityName, primaryKey, values throws(ByteReaderError) in
                try change(
                    kind, .permanent(for: storeIdentifier, entityName: entityName, primaryKey: primaryKey), values)
            }
            return header.timestampMicroseconds
        }

        /// A change's values in record order (a buffer reused from change to change).
        typealias Values = [(key: String, value: AttributeValue)]

        /// A change as ``forEachChange(_:scratch:_:)`` handed it on, its values kept as a range
        /// of a buffer of them (a writer's catch-up fold collects a record's before applying it).
        typealias ReadChange = (kind: ChangeKind, identifier: PersistentIdentifier, values: Range<Int>)

        /// A change's values by name, a later value of one name winning. (Made with room for all:
        /// grown one by one, a Trip's six values rehashed three times.)
        static func dictionary(_ values: some Collection<(key: String, value: AttributeValue)>) -> [String: AttributeValue] {
            var dictionary = [String: AttributeValue](minimumCapacity: values.count)
            for (name, value) in values { dictionary[name] = value }
            return dictionary
        }

        enum ChangeKind: UInt8 {
            case insert = 1
            case update = 2
            case delete = 3
        }

        /// Reads a payload (the grammar above): the header, then each change of a live entity,
        /// handed to `change` with its values in record order (`scratch` holds them; a value of
        /// an attribute removed since is left out, a change of an entity removed since is read
        /// past). `changeCount` is told the number of changes first.
        private func walk(
            _ bytes: UnsafeRawBufferPointer, readsProcessIdentifier: Bool,
            scratch: inout Values, strings: StringInterner? = nil,
            changeCount announce: (Int) throws(ByteReaderError) -> Void,
            change: (
                _ kind: ChangeKind, _ entityName: String, _ primaryKey: UUID,
                _ values: Values.SubSequence
            ) throws(ByteReaderError) -> Void
        ) throws(ByteReaderError) -> (
            schemaVersion: UInt32, author: String?, timestampMicroseconds: Int64, processIdentifier: String
        ) {
            let lookups = lookups
            let header = try Header(bytes)
            guard header.schemaVersion <= lookups.table.version else {
                throw .malformed(
                    "encoded with schema table version \(header.schemaVersion), newer than \(lookups.table.version)")
            }
            let author = try header.author.map(ValueCodec.string)
            let process: String
            if readsProcessIdentifier {
                process = try ValueCodec.string(header.processIdentifier)
            } else {
                try ValueCodec.checkUTF8(header.processIdentifier)
                process = ""
            }
            try announce(header.changeCount)
            switch header.body {
            case .single(var reader):
                try walkChanges(&reader, count: header.changeCount, scratch: &scratch, strings: strings, change: change)
                guard reader.isAtEnd else {
                    throw .malformed("\(reader.remainingByteCount) bytes after the last change")
                }
            case .split(var streams):
                try walkChanges(&streams, count: header.changeCount, scratch: &scratch, strings: strings, change: change)
                // Three checks, not a loop over an array of the streams: this runs for every record
                // a replay folds.
                if !streams.shape.isAtEnd { throw Self.leftOver(streams.shape, "shape") }
                if !streams.data.isAtEnd { throw Self.leftOver(streams.data, "data") }
                if !streams.keys.isAtEnd { throw Self.leftOver(streams.keys, "keys") }
            }
            return (header.schemaVersion, author, header.timestampMicroseconds, process)
        }

        private static func leftOver(_ stream: ByteReader, _ name: String) -> ByteReaderError {
            .malformed("\(stream.remainingByteCount) bytes of the \(name) after the last change")
        }

        /// Reads `count` changes from `source` (either layout: the same reads), each of a live
        /// entity handed to `change`.
        private func walkChanges(
            _ source: inout some ValueSource, count: Int, scratch: inout Values, strings: StringInterner?,
            change: (
                _ kind: ChangeKind, _ entityName: String, _ primaryKey: UUID,
                _ values: Values.SubSequence
            ) throws(ByteReaderError) -> Void
        ) throws(ByteReaderError) {
            let lookups = lookups
            let storeIdentifier = lookups.storeIdentifier
            let entityNames = lookups.entityNames
            for _ in 0..<count {
                let kind = try source.readShapeByte()
                let entityID = UInt32(truncatingIfNeeded: try source.readShapeVarint())
                guard let entity = lookups.entity(entityID) else {
                    guard lookups.retiredEntityIDs.contains(entityID) else {
                        throw .malformed("unknown entity id \(entityID)")
                    }
                    // A change of an entity removed since: read past it.
                    _ = try source.readKey()
                    let valueCount = try source.readShapeVarint()
                    guard valueCount <= UInt64(source.shapeRemainingByteCount) else {
                        throw .malformed("value count \(valueCount)")
                    }
                    for _ in 0..<valueCount {
                        _ = try source.readShapeVarint()
                        _ = try ValueCodec.read(&source, entityNames: entityNames, storeIdentifier: storeIdentifier)
                    }
                    guard (1...3).contains(kind) else { throw .malformed("unknown change kind \(kind)") }
                    continue
                }
                let primaryKey = try source.readKey()
                let valueCount = try source.readShapeVarint()
                // Each value's attribute id and tag are in the shape.
                guard valueCount <= UInt64(source.shapeRemainingByteCount) else {
                    throw .malformed("value count \(valueCount)")
                }
                scratch.removeAll(keepingCapacity: true)
                for _ in 0..<valueCount {
                    let attributeID = UInt32(truncatingIfNeeded: try source.readShapeVarint())
                    guard let attribute = entity.attributeIDs.firstIndex(of: attributeID) else {
                        guard lookups.retiredAttributeIDs.contains(attributeID) else {
                            throw .malformed("unknown attribute id \(attributeID) of \(entity.name)")
                        }
                        // An attribute removed since: its value is left out.
                        _ = try ValueCodec.read(&source, entityNames: entityNames, storeIdentifier: storeIdentifier)
                        continue
                    }
                    scratch.append(
                        (
                            entity.attributeNames[attribute],
                            try ValueCodec.read(
                                &source, entityNames: entityNames, storeIdentifier: storeIdentifier, strings: strings)
                        ))
                }
                guard let changeKind = ChangeKind(rawValue: kind) else {
                    throw .malformed("unknown change kind \(kind)")
                }
                try change(changeKind, entity.name, primaryKey, scratch[...])
            }
        }
    }
}
