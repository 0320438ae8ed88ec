import Foundation
import LogStoreEngine

/// The binary encoding of attribute values inside transaction, schema and checkpoint records. A
/// tag byte, then the value:
///
/// ```
/// 0 null · 1 false · 2 true · 3 int (zig-zag varint) · 4 double (8 bytes) · 5 string (varint
/// length + UTF-8) · 6 data (varint length + bytes) · 7 date (8-byte Double, seconds since 2001)
/// · 8 uuid (16 bytes) · 9 reference (varint entity id + 16-byte primary key) · 10 array (varint
/// count + values)
/// ```
///
/// Written to one stream (a ``ByteWriter``: checkpoints, schema records, transaction payload
/// version 1) the parts follow each other as above. Transaction payload version 2 splits them over
/// three streams (``SplitPayloadWriter``, docs/FORMAT.md §6.9): the **shape** — tags, lengths,
/// counts, entity ids — the **data** — integers, doubles, dates, string and data bytes — and the
/// **keys** — UUIDs and references' primary keys, 16 bytes each. A save's shape repeats from save
/// to save and its keys are random, so apart they compress (against the segment dictionary) where
/// interleaved they did not.
enum ValueCodec {
    /// Arrays nest at most this deep (a named limit; no recursion without one).
    static let nestingDepthMax = 8

    static func write(
        _ value: AttributeValue, into writer: inout some ValueSink, entityIDs: [String: UInt32], depth: Int = 0
    ) {
        precondition(depth <= nestingDepthMax, "attribute values nest at most \(nestingDepthMax) deep")
        switch value {
        case .null: writer.writeShape(UInt8(0))
        case .bool(let flag): writer.writeShape(UInt8(flag ? 2 : 1))
        case .int(let number):
            writer.writeShape(UInt8(3))
            writer.writeDataSignedVarint(number)
        case .double(let number):
            writer.writeShape(UInt8(4))
            writer.writeData(number.bitPattern)
        case .string(let text):
            writer.writeShape(UInt8(5))
            writer.writeDataBytes(text.utf8)
        case .data(let bytes):
            writer.writeShape(UInt8(6))
            writer.writeDataBytes(bytes)
        case .date(let date):
            writer.writeShape(UInt8(7))
            writer.writeData(date.timeIntervalSinceReferenceDate.bitPattern)
        case .uuid(let uuid):
            writer.writeShape(UInt8(8))
            writer.writeKey(uuid)
        case .reference(let identifier):
            writer.writeShape(UInt8(9))
            writer.writeShapeVarint(UInt64(entityIDs[identifier.entityName]!))
            writer.writeKey(identifier.primaryKey)
        case .array(let values):
            writer.writeShape(UInt8(10))
            writer.writeShapeVarint(UInt64(values.count))
            for element in values { write(element, into: &writer, entityIDs: entityIDs, depth: depth + 1) }
        }
    }

    /// The value `reader` holds next. With `strings`, a string equal to one decoded shortly
    /// before shares its storage (``StringInterner``): decodes whose values stay in rows.
    static func read(
        _ reader: inout some ValueSource, entityNames: [UInt32: String], storeIdentifier: String,
        strings: StringInterner? = nil, depth: Int = 0
    ) throws(ByteReaderError) -> AttributeValue {
        guard depth <= nestingDepthMax else { throw .malformed("values nest deeper than \(nestingDepthMax)") }
        switch try reader.readShapeByte() {
        case 0: return .null
        case 1: return .bool(false)
        case 2: return .bool(true)
        case 3: return .int(try reader.readDataSignedVarint())
        case 4: return .double(Double(bitPattern: try reader.readData(UInt64.self)))
        case 5:
            let bytes = try reader.readDataBytes()
            if let strings { return .string(try strings.string(bytes)) }
            return .string(try string(bytes))
        case 6: return .data(Data(try reader.readDataBytes()))
        case 7: return .date(Date(timeIntervalSinceReferenceDate: Double(bitPattern: try reader.readData(UInt64.self))))
        case 8: return .uuid(try reader.readKey())
        case 9:
            let entityID = UInt32(truncatingIfNeeded: try reader.readShapeVarint())
            guard let entityName = entityNames[entityID] else {
                throw .malformed("reference to unknown entity id \(entityID)")
            }
            return .reference(
                .permanent(
                    for: storeIdentifier, entityName: entityName,
                    primaryKey: try reader.readKey()))
        case 10:
            let count = try reader.readShapeVarint()
            // Every element's tag takes a byte of the shape: a count beyond what is left is malformed.
            guard count <= UInt64(reader.shapeRemainingByteCount) else { throw .malformed("array count \(count)") }
            var values: [AttributeValue] = []
            values.reserveCapacity(Int(count))
            for _ in 0..<count {
                values.append(
                    try read(
                        &reader, entityNames: entityNames, storeIdentifier: storeIdentifier, strings: strings,
                        depth: depth + 1))
            }
            return .array(values)
        case let tag: throw .malformed("unknown value tag \(tag)")
        }
    }

    /// Checks that `bytes` are UTF-8 as ``string(_:)`` does, without making a String (replay
    /// passes over the process identifier, but refuses what history would refuse).
    static func checkUTF8(_ bytes: UnsafeRawBufferPointer) throws(ByteReaderError) {
        guard bytes.allSatisfy({ $0 < 0x80 }) || String(validating: bytes, as: UTF8.self) != nil else {
            throw .malformed("string is not UTF-8")
        }
    }

    static func readString(_ reader: inout ByteReader) throws(ByteReaderError) -> String {
        // Read in place: no array per string (it was an allocation and a free per value).
        try string(reader.readLengthPrefixedInPlace())
    }

    /// UTF-8 bytes as a String; anything but UTF-8 is malformed.
    static func string(_ bytes: UnsafeRawBufferPointer) throws(ByteReaderError) -> String {
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

/// Where ``ValueCodec`` writes a value's parts: the shape (tags, lengths, counts, entity ids), the
/// data (numbers, dates, bytes) and the keys (16-byte UUIDs and primary keys).
protocol ValueSink {
    mutating func writeShape(_ byte: UInt8)
    mutating func writeShapeVarint(_ value: UInt64)
    mutating func writeData<T: FixedWidthInteger>(_ value: T)
    mutating func writeDataSignedVarint(_ value: Int64)
    /// The byte count to the shape, the bytes to the data.
    mutating func writeDataBytes(_ bytes: some Collection<UInt8>)
    mutating func writeKey(_ key: UUID)
}

/// Where ``ValueCodec`` reads a value's parts from (the same three as ``ValueSink``).
protocol ValueSource {
    mutating func readShapeByte() throws(ByteReaderError) -> UInt8
    mutating func readShapeVarint() throws(ByteReaderError) -> UInt64
    mutating func readData<T: FixedWidthInteger>(_: T.Type) throws(ByteReaderError) -> T
    mutating func readDataSignedVarint() throws(ByteReaderError) -> Int64
    /// A byte count from the shape, then that many bytes of the data, in place.
    mutating func readDataBytes() throws(ByteReaderError) -> UnsafeRawBufferPointer
    mutating func readKey() throws(ByteReaderError) -> UUID
    /// What is left of the shape (a count of values, each with a tag, cannot exceed it).
    var shapeRemainingByteCount: Int { get }
}

/// One stream: every part in place, in order.
extension ByteWriter: ValueSink {
    mutating func writeShape(_ byte: UInt8) { write(byte) }
    mutating func writeShapeVarint(_ value: UInt64) { writeVarint(value) }
    mutating func writeData<T: FixedWidthInteger>(_ value: T) { write(value) }
    mutating func writeDataSignedVarint(_ value: Int64) { writeSignedVarint(value) }
    mutating func writeDataBytes(_ bytes: some Collection<UInt8>) { writeLengthPrefixed(bytes) }
    mutating func writeKey(_ key: UUID) { key.withBytes { write(bytes: $0) } }
}

/// One stream: every part in place, in order.
extension ByteReader: ValueSource {
    @inline(__always) mutating func readShapeByte() throws(ByteReaderError) -> UInt8 { try readByte() }
    @inline(__always) mutating func readShapeVarint() throws(ByteReaderError) -> UInt64 { try readVarint() }
    @inline(__always) mutating func readData<T: FixedWidthInteger>(_: T.Type) throws(ByteReaderError) -> T {
        try read(T.self)
    }
    @inline(__always) mutating func readDataSignedVarint() throws(ByteReaderError) -> Int64 {
        try readSignedVarint()
    }
    @inline(__always) mutating func readDataBytes() throws(ByteReaderError) -> UnsafeRawBufferPointer {
        try readLengthPrefixedInPlace()
    }
    @inline(__always) mutating func readKey() throws(ByteReaderError) -> UUID { try readUUID() }
    var shapeRemainingByteCount: Int { remainingByteCount }
}

/// Three streams (transaction payload version 2, docs/FORMAT.md §6.9).
struct SplitPayloadWriter: ValueSink {
    var shape: ByteWriter
    var data: ByteWriter
    var keys: ByteWriter

    /// Room for `changeCount` changes of a few values each (a one-model save: ~30, ~40 and 16 bytes).
    init(changeCount: Int) {
        let room = Self.capacities(forChangeCount: changeCount)
        shape = ByteWriter(capacity: room.shape)
        data = ByteWriter(capacity: room.data)
        keys = ByteWriter(capacity: room.keys)
    }

    /// The room each stream starts with for `changeCount` changes.
    static func capacities(forChangeCount changeCount: Int) -> (shape: Int, data: Int, keys: Int) {
        (16 + changeCount * 24, 16 + changeCount * 48, 16 * max(1, changeCount))
    }

    mutating func writeShape(_ byte: UInt8) { shape.write(byte) }
    mutating func writeShapeVarint(_ value: UInt64) { shape.writeVarint(value) }
    mutating func writeData<T: FixedWidthInteger>(_ value: T) { data.write(value) }
    mutating func writeDataSignedVarint(_ value: Int64) { data.writeSignedVarint(value) }
    mutating func writeDataBytes(_ bytes: some Collection<UInt8>) {
        shape.writeVarint(UInt64(bytes.count))
        data.write(bytes: bytes)
    }
    mutating func writeKey(_ key: UUID) { key.withBytes { keys.write(bytes: $0) } }
}

/// Three streams (transaction payload version 2, docs/FORMAT.md §6.9), each read in order.
struct SplitPayloadReader: ValueSource {
    var shape: ByteReader
    var data: ByteReader
    var keys: ByteReader

    @inline(__always) mutating func readShapeByte() throws(ByteReaderError) -> UInt8 { try shape.readByte() }
    @inline(__always) mutating func readShapeVarint() throws(ByteReaderError) -> UInt64 { try shape.readVarint() }
    @inline(__always) mutating func readData<T: FixedWidthInteger>(_: T.Type) throws(ByteReaderError) -> T {
        try data.read(T.self)
    }
    @inline(__always) mutating func readDataSignedVarint() throws(ByteReaderError) -> Int64 {
        try data.readSignedVarint()
    }
    @inline(__always) mutating func readDataBytes() throws(ByteReaderError) -> UnsafeRawBufferPointer {
        // `readBytesInPlace` checks the count against what the data holds.
        try data.readBytesInPlace(Int(clamping: try shape.readVarint()))
    }
    @inline(__always) mutating func readKey() throws(ByteReaderError) -> UUID { try keys.readUUID() }
    var shapeRemainingByteCount: Int { shape.remainingByteCount }
}
