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

    /// Whether the payload names an author, and the author's UTF-8 bytes (without making a
    /// String: a history author filter compares bytes first).
    static func authorBytes(_ bytes: [UInt8]) throws(ByteReaderError) -> [UInt8]? {
        try ByteReader.read(bytes) { reader throws(ByteReaderError) in
            guard try reader.readByte() == 1 else { throw .malformed("unknown transaction payload version") }
            _ = try reader.readVarint()
            return try reader.readByte() == 1 ? try reader.readLengthPrefixed() : nil
        }
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
    /// record (replay decodes a million records with the same table).
    struct Decoder {
        let table: SchemaTable
        let storeIdentifier: String
        let entityNames: [UInt32: String]
        let entitiesByID: [UInt32: SchemaTable.Entity]
        /// Ids a migration removed (entities, and attributes of live entities): a record older
        /// than the removal is read without them (history read with the newest table).
        let retiredEntityIDs: Set<UInt32>
        let retiredAttributeIDs: Set<UInt32>

        init(table: SchemaTable, storeIdentifier: String) {
            self.table = table
            self.storeIdentifier = storeIdentifier
            entityNames = Dictionary(
                (table.entities + table.retiredEntities).map { ($0.id, $0.name) }, uniquingKeysWith: { live, _ in live })
            entitiesByID = Dictionary(uniqueKeysWithValues: table.entities.map { ($0.id, $0) })
            retiredEntityIDs = Set(table.retiredEntities.map(\.id))
            retiredAttributeIDs = Set(table.retiredAttributes.map(\.id))
        }

        func decode(_ bytes: [UInt8]) throws(ByteReaderError) -> TransactionRecord {
            let table = table
            let storeIdentifier = storeIdentifier
            let entityNames = entityNames
            let entitiesByID = entitiesByID
            let retiredEntityIDs = retiredEntityIDs
            let retiredAttributeIDs = retiredAttributeIDs
            return try ByteReader.read(bytes) { reader throws(ByteReaderError) in
                guard try reader.readByte() == 1 else { throw .malformed("unknown transaction payload version") }
                let schemaVersion = UInt32(truncatingIfNeeded: try reader.readVarint())
                guard schemaVersion <= table.version else {
                    throw .malformed("encoded with schema table version \(schemaVersion), newer than \(table.version)")
                }
                let author = try reader.readByte() == 1 ? try ValueCodec.readString(&reader) : nil
                let timestamp: Int64 = try reader.read()
                let process = try ValueCodec.readString(&reader)
                let changeCount = try reader.readVarint()
                guard changeCount <= UInt64(reader.remainingByteCount) else {
                    throw .malformed("change count \(changeCount)")
                }
                var changes: [ResolvedChange] = []
                changes.reserveCapacity(Int(changeCount))
                for _ in 0..<changeCount {
                    let kind = try reader.readByte()
                    let entityID = UInt32(truncatingIfNeeded: try reader.readVarint())
                    guard let entity = entitiesByID[entityID] else {
                        guard retiredEntityIDs.contains(entityID) else { throw .malformed("unknown entity id \(entityID)") }
                        // A change of an entity removed since: read past it.
                        _ = try reader.readBytes(16)
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
                    let identifier = PersistentIdentifier.permanent(
                        for: storeIdentifier, entityName: entity.name,
                        primaryKey: UUID(bytes: try reader.readBytes(16)))
                    let valueCount = try reader.readVarint()
                    guard valueCount <= UInt64(reader.remainingByteCount) else {
                        throw .malformed("value count \(valueCount)")
                    }
                    var values: [String: AttributeValue] = [:]
                    for _ in 0..<valueCount {
                        let attributeID = UInt32(truncatingIfNeeded: try reader.readVarint())
                        guard let attribute = entity.attributes.first(where: { $0.id == attributeID }) else {
                            guard retiredAttributeIDs.contains(attributeID) else {
                                throw .malformed("unknown attribute id \(attributeID) of \(entity.name)")
                            }
                            // An attribute removed since: its value is left out.
                            _ = try ValueCodec.read(&reader, entityNames: entityNames, storeIdentifier: storeIdentifier)
                            continue
                        }
                        values[attribute.name] = try ValueCodec.read(
                            &reader, entityNames: entityNames, storeIdentifier: storeIdentifier)
                    }
                    switch kind {
                    case 1: changes.append(.insert(identifier, values))
                    case 2: changes.append(.update(identifier, values))
                    case 3: changes.append(.delete(identifier, tombstone: values))
                    default: throw .malformed("unknown change kind \(kind)")
                    }
                }
                guard reader.isAtEnd else {
                    throw .malformed("\(reader.remainingByteCount) bytes after the last change")
                }
                return TransactionRecord(
                    schemaVersion: schemaVersion, author: author, timestampMicroseconds: timestamp,
                    processIdentifier: process, changes: changes)
            }
        }
    }
}
