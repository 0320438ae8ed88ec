import Foundation
import LogStoreEngine

/// The binary encoding of attribute values and value types inside transaction, schema and
/// checkpoint records. A tag byte, then the value:
///
/// ```
/// 0 null · 1 false · 2 true · 3 int (zig-zag varint) · 4 double (8 bytes) · 5 string (varint
/// length + UTF-8) · 6 data (varint length + bytes) · 7 date (8-byte Double, seconds since 2001)
/// · 8 uuid (16 bytes) · 9 reference (varint entity id + 16-byte primary key) · 10 array (varint
/// count + values)
/// ```
enum ValueCodec {
    /// Arrays nest at most this deep (a named limit; no recursion without one).
    static let nestingDepthMax = 8

    static func write(
        _ value: AttributeValue, into writer: inout ByteWriter, entityIDs: [String: UInt32], depth: Int = 0
    ) {
        precondition(depth <= nestingDepthMax, "attribute values nest at most \(nestingDepthMax) deep")
        switch value {
        case .null: writer.write(UInt8(0))
        case .bool(let flag): writer.write(UInt8(flag ? 2 : 1))
        case .int(let number):
            writer.write(UInt8(3))
            writer.writeSignedVarint(number)
        case .double(let number):
            writer.write(UInt8(4))
            writer.write(number.bitPattern)
        case .string(let text):
            writer.write(UInt8(5))
            writer.writeLengthPrefixed(Array(text.utf8))
        case .data(let bytes):
            writer.write(UInt8(6))
            writer.writeLengthPrefixed(Array(bytes))
        case .date(let date):
            writer.write(UInt8(7))
            writer.write(date.timeIntervalSinceReferenceDate.bitPattern)
        case .uuid(let uuid):
            writer.write(UInt8(8))
            writer.write(bytes: uuid.bytes)
        case .reference(let identifier):
            writer.write(UInt8(9))
            writer.writeVarint(UInt64(entityIDs[identifier.entityName]!))
            writer.write(bytes: identifier.primaryKey.bytes)
        case .array(let values):
            writer.write(UInt8(10))
            writer.writeVarint(UInt64(values.count))
            for element in values { write(element, into: &writer, entityIDs: entityIDs, depth: depth + 1) }
        }
    }

    static func read(
        _ reader: inout ByteReader, entityNames: [UInt32: String], storeIdentifier: String,
        depth: Int = 0
    ) throws(ByteReaderError) -> AttributeValue {
        guard depth <= nestingDepthMax else { throw .malformed("values nest deeper than \(nestingDepthMax)") }
        switch try reader.readByte() {
        case 0: return .null
        case 1: return .bool(false)
        case 2: return .bool(true)
        case 3: return .int(try reader.readSignedVarint())
        case 4: return .double(Double(bitPattern: try reader.read()))
        case 5: return .string(try readString(&reader))
        case 6: return .data(Data(try reader.readLengthPrefixed()))
        case 7: return .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: try reader.read())))
        case 8: return .uuid(try reader.readUUID())
        case 9:
            let entityID = UInt32(truncatingIfNeeded: try reader.readVarint())
            guard let entityName = entityNames[entityID] else {
                throw .malformed("reference to unknown entity id \(entityID)")
            }
            return .reference(
                .permanent(
                    for: storeIdentifier, entityName: entityName,
                    primaryKey: try reader.readUUID()))
        case 10:
            let count = try reader.readVarint()
            // Every element takes at least one byte: a count beyond what is left is malformed.
            guard count <= UInt64(reader.remainingByteCount) else { throw .malformed("array count \(count)") }
            var values: [AttributeValue] = []
            values.reserveCapacity(Int(count))
            for _ in 0..<count {
                values.append(
                    try read(&reader, entityNames: entityNames, storeIdentifier: storeIdentifier, depth: depth + 1))
            }
            return .array(values)
        case let tag: throw .malformed("unknown value tag \(tag)")
        }
    }

    /// Reads past a string, checking that it is UTF-8 as ``readString(_:)`` does, without making
    /// it (replay skips the process identifier, but refuses what history would refuse).
    static func skipString(_ reader: inout ByteReader) throws(ByteReaderError) {
        let bytes = try reader.readLengthPrefixedInPlace()
        guard bytes.allSatisfy({ $0 < 0x80 }) || String(validating: bytes, as: UTF8.self) != nil else {
            throw .malformed("string is not UTF-8")
        }
    }

    static func readString(_ reader: inout ByteReader) throws(ByteReaderError) -> String {
        // Read in place: no array per string (it was an allocation and a free per value).
        let bytes = try reader.readLengthPrefixedInPlace()
        // ASCII (nearly every stored string) is valid UTF-8 as it stands: decode it without the
        // validating initializer, which is not specialised here and looked up generic metadata on
        // every call (8 % of a replay). Anything else is validated.
        if bytes.allSatisfy({ $0 < 0x80 }) { return String(decoding: bytes, as: UTF8.self) }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw .malformed("string is not UTF-8") }
        return text
    }

    /// Value types: 1 bool · 2 int · 3 double · 4 string · 5 data · 6 date · 7 uuid ·
    /// 8 reference (entity name) · 9 array (element type).
    static func write(_ valueType: ValueType, into writer: inout ByteWriter, table: SchemaTable?) {
        switch valueType {
        case .bool: writer.write(UInt8(1))
        case .int: writer.write(UInt8(2))
        case .double: writer.write(UInt8(3))
        case .string: writer.write(UInt8(4))
        case .data: writer.write(UInt8(5))
        case .date: writer.write(UInt8(6))
        case .uuid: writer.write(UInt8(7))
        case .reference(let entity):
            writer.write(UInt8(8))
            writer.writeLengthPrefixed(Array(entity.utf8))
        case .array(let element):
            writer.write(UInt8(9))
            write(element, into: &writer, table: table)
        }
    }

    static func readValueType(_ reader: inout ByteReader, depth: Int = 0) throws(ByteReaderError) -> ValueType {
        guard depth <= nestingDepthMax else { throw .malformed("value types nest deeper than \(nestingDepthMax)") }
        switch try reader.readByte() {
        case 1: return .bool
        case 2: return .int
        case 3: return .double
        case 4: return .string
        case 5: return .data
        case 6: return .date
        case 7: return .uuid
        case 8: return .reference(try readString(&reader))
        case 9: return .array(try readValueType(&reader, depth: depth + 1))
        case let tag: throw .malformed("unknown value type tag \(tag)")
        }
    }
}
