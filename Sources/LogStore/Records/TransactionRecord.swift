import Foundation
import LogStoreEngine

/// The payload of a transaction record: who saved, when, and the resolved changes in order.
///
/// ```
/// u8 payload version (1) · varint schema table version · u8 has author [+ string author]
/// · i64 timestamp (µs since 1970, never decreasing along the log) · string process identifier
/// · varint change count · per change: u8 kind (1 insert, 2 update, 3 delete) · varint entity id
///   · 16-byte primary key · varint value count · per value: varint attribute id, value
/// ```
struct TransactionRecord: Sendable, Equatable {
    var schemaVersion: UInt32
    var author: String?
    var timestampMicroseconds: Int64
    var processIdentifier: String
    var changes: [ResolvedChange]

    func encoded(table: SchemaTable) -> [UInt8] {
        let entityIDs = Dictionary(uniqueKeysWithValues: table.entities.map { ($0.name, $0.id) })
        var writer = ByteWriter(capacity: 64 + changes.count * 48)
        writer.write(UInt8(1))
        writer.writeVarint(UInt64(schemaVersion))
        if let author {
            writer.write(UInt8(1))
            writer.writeLengthPrefixed(Array(author.utf8))
        } else {
            writer.write(UInt8(0))
        }
        writer.write(timestampMicroseconds)
        writer.writeLengthPrefixed(Array(processIdentifier.utf8))
        writer.writeVarint(UInt64(changes.count))
        for change in changes {
            let (kind, identifier, values): (UInt8, PersistentIdentifier, [String: AttributeValue]) =
                switch change {
                case .insert(let identifier, let values): (1, identifier, values)
                case .update(let identifier, let values): (2, identifier, values)
                case .delete(let identifier, let tombstone): (3, identifier, tombstone)
                }
            let entity = table.entity(named: identifier.entityName)!
            writer.write(kind)
            writer.writeVarint(UInt64(entity.id))
            writer.write(bytes: identifier.primaryKey.bytes)
            writer.writeVarint(UInt64(values.count))
            // Attribute order follows the table, so equal saves encode to equal bytes.
            for attribute in entity.attributes {
                guard let value = values[attribute.name] else { continue }
                writer.writeVarint(UInt64(attribute.id))
                ValueCodec.write(value, into: &writer, entityIDs: entityIDs)
            }
        }
        return writer.bytes
    }

    /// The author and timestamp alone, read from the start of the payload without decoding the
    /// changes (history filters on author read only this much).
    static func decodePrefix(_ bytes: [UInt8]) throws(ByteReaderError) -> (
        author: String?, timestampMicroseconds: Int64
    ) {
        let prefix = try decodeHeader(bytes, processIdentifier: false)
        return (prefix.author, prefix.timestampMicroseconds)
    }

    /// Whether `matches` accepts the author's UTF-8 bytes, read where they are in the payload
    /// (`nil`: no author), without making a String or an array: a history author filter compares
    /// bytes first, for every record it passes over. The bytes are valid only during the call.
    static func authorMatches(
        _ bytes: [UInt8], _ matches: (UnsafeRawBufferPointer?) -> Bool
    ) throws(ByteReaderError) -> Bool {
        try ByteReader.withBytes(bytes) { buffer throws(ByteReaderError) in try authorMatches(buffer, matches) }
    }

    /// The same, over a payload read in place (``LogStoreEngine/LogRecordView``).
    static func authorMatches(
        _ bytes: UnsafeRawBufferPointer, _ matches: (UnsafeRawBufferPointer?) -> Bool
    ) throws(ByteReaderError) -> Bool {
        var reader = ByteReader(bytes)
        guard try reader.readByte() == 1 else { throw .malformed("unknown transaction payload version") }
        _ = try reader.readVarint()
        return matches(try reader.readByte() == 1 ? try reader.readLengthPrefixedInPlace() : nil)
    }

    /// Everything before the changes: schema version, author, timestamp and (when asked) the
    /// process identifier.
    static func decodeHeader(_ bytes: [UInt8], processIdentifier: Bool) throws(ByteReaderError)
        -> (schemaVersion: UInt32, author: String?, timestampMicroseconds: Int64, processIdentifier: String)
    {
        try ByteReader.read(bytes) { reader throws(ByteReaderError) in
            guard try reader.readByte() == 1 else { throw .malformed("unknown transaction payload version") }
            let schemaVersion = UInt32(truncatingIfNeeded: try reader.readVarint())
            let author = try reader.readByte() == 1 ? try ValueCodec.readString(&reader) : nil
            let timestamp: Int64 = try reader.read()
            let process = processIdentifier ? try ValueCodec.readString(&reader) : ""
            return (schemaVersion, author, timestamp, process)
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
                var dictionary: [String: AttributeValue] = [:]
                for (name, value) in values { dictionary[name] = value }
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
        /// ``TransactionRecord``: replay's path (no dictionary and no ``ResolvedChange`` per
        /// change, no process identifier string). Returns the record's timestamp. It refuses
        /// exactly what ``decode(_:readsProcessIdentifier:)`` refuses.
        ///
        /// A malformed record throws after the changes before the fault were applied: the caller
        /// discards `state` then (a replay that throws returns nothing). `scratch` is reused from
        /// record to record.
        func fold(_ bytes: [UInt8], into state: inout FoldState, scratch: inout Values) throws(ByteReaderError)
            -> Int64
        {
            try ByteReader.withBytes(bytes) { bytes throws(ByteReaderError) in
                try fold(bytes, into: &state, scratch: &scratch)
            }
        }

        /// ``fold(_:into:scratch:)`` of a payload read in place (``LogRecordView``).
        func fold(
            _ bytes: UnsafeRawBufferPointer, into state: inout FoldState, scratch: inout Values
        ) throws(ByteReaderError) -> Int64 {
            let header = try walk(bytes, readsProcessIdentifier: false, scratch: &scratch) {
                _ throws(ByteReaderError) in
            } change: { kind, entityName, primaryKey, values throws(ByteReaderError) in
                switch kind {
                case .insert:
                    var dictionary: [String: AttributeValue] = [:]
                    dictionary.reserveCapacity(values.count)
                    for (name, value) in values { dictionary[name] = value }
                    state.insert(entityName: entityName, primaryKey: primaryKey, values: dictionary)
                case .update: state.update(entityName: entityName, primaryKey: primaryKey, values: values)
                case .delete: state.delete(entityName: entityName, primaryKey: primaryKey)
                }
            }
            return header.timestampMicroseconds
        }

        /// A change's values in record order (a buffer reused from change to change).
        typealias Values = [(key: String, value: AttributeValue)]

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
            scratch: inout Values,
            changeCount announce: (Int) throws(ByteReaderError) -> Void,
            change: (
                _ kind: ChangeKind, _ entityName: String, _ primaryKey: UUID,
                _ values: Values.SubSequence
            ) throws(ByteReaderError) -> Void
        ) throws(ByteReaderError) -> (
            schemaVersion: UInt32, author: String?, timestampMicroseconds: Int64, processIdentifier: String
        ) {
            let lookups = lookups
            let table = lookups.table
            let storeIdentifier = lookups.storeIdentifier
            let entityNames = lookups.entityNames
            var reader = ByteReader(bytes)
            do {
                guard try reader.readByte() == 1 else { throw .malformed("unknown transaction payload version") }
                let schemaVersion = UInt32(truncatingIfNeeded: try reader.readVarint())
                guard schemaVersion <= table.version else {
                    throw .malformed("encoded with schema table version \(schemaVersion), newer than \(table.version)")
                }
                let author = try reader.readByte() == 1 ? try ValueCodec.readString(&reader) : nil
                let timestamp: Int64 = try reader.read()
                let process: String
                if readsProcessIdentifier {
                    process = try ValueCodec.readString(&reader)
                } else {
                    try ValueCodec.skipString(&reader)
                    process = ""
                }
                let changeCount = try reader.readVarint()
                guard changeCount <= UInt64(reader.remainingByteCount) else {
                    throw .malformed("change count \(changeCount)")
                }
                try announce(Int(changeCount))
                for _ in 0..<changeCount {
                    let kind = try reader.readByte()
                    let entityID = UInt32(truncatingIfNeeded: try reader.readVarint())
                    guard let entity = lookups.entity(entityID) else {
                        guard lookups.retiredEntityIDs.contains(entityID) else {
                            throw .malformed("unknown entity id \(entityID)")
                        }
                        // A change of an entity removed since: read past it.
                        try reader.skip(16)
                        let valueCount = try reader.readVarint()
                        guard valueCount <= UInt64(reader.remainingByteCount) else {
                            throw .malformed("value count \(valueCount)")
                        }
                        for _ in 0..<valueCount {
                            _ = try reader.readVarint()
                            _ = try ValueCodec.read(&reader, entityNames: entityNames, storeIdentifier: storeIdentifier)
                        }
                        guard (1...3).contains(kind) else { throw .malformed("unknown change kind \(kind)") }
                        continue
                    }
                    let primaryKey = try reader.readUUID()
                    let valueCount = try reader.readVarint()
                    guard valueCount <= UInt64(reader.remainingByteCount) else {
                        throw .malformed("value count \(valueCount)")
                    }
                    scratch.removeAll(keepingCapacity: true)
                    for _ in 0..<valueCount {
                        let attributeID = UInt32(truncatingIfNeeded: try reader.readVarint())
                        guard let attribute = entity.attributeIDs.firstIndex(of: attributeID) else {
                            guard lookups.retiredAttributeIDs.contains(attributeID) else {
                                throw .malformed("unknown attribute id \(attributeID) of \(entity.name)")
                            }
                            // An attribute removed since: its value is left out.
                            _ = try ValueCodec.read(&reader, entityNames: entityNames, storeIdentifier: storeIdentifier)
                            continue
                        }
                        scratch.append(
                            (
                                entity.attributeNames[attribute],
                                try ValueCodec.read(&reader, entityNames: entityNames, storeIdentifier: storeIdentifier)
                            ))
                    }
                    guard let changeKind = ChangeKind(rawValue: kind) else {
                        throw .malformed("unknown change kind \(kind)")
                    }
                    try change(changeKind, entity.name, primaryKey, scratch[...])
                }
                guard reader.isAtEnd else {
                    throw .malformed("\(reader.remainingByteCount) bytes after the last change")
                }
                return (schemaVersion, author, timestamp, process)
            }
        }
    }
}
