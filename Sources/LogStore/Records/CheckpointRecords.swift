import Foundation
import LogStoreEngine

// The payloads of a checkpoint file (DECISIONS.md D4; docs/FORMAT.md §9). The file is a record
// file (LogStoreEngine `RecordFileWriter`/`RecordFileReader`, magic `LOGSTCKP`) holding:
//
//     checkpoint = header-record chunk-record* trailer-record
//
// Integers are little-endian, varints unsigned LEB128, strings a varint byte count + UTF-8, a
// token `u8 0` (none) or `u8 1, u64 offset, u32 check` (its store is the header's store UUID).
//
//     header  (0x10): u8 version (1) · [16] store UUID · u64 offset X · token last covered transaction
//                     · varint n, n bytes schema table (the schema record's payload) · varint sequence end
//                     · i64 last timestamp (µs) · token history low-water mark
//                     · varint bookmark count · per bookmark: string name, token, i64 last activity (µs)
//     chunk   (0x11): u8 version (1) · varint entity id · u8 flags (bit 0: the first entry continues the
//                     previous chunk's last row) · varint entry count (≥ 1)
//                     · per entry: [16] primary key, varint sequence, varint value count,
//                       per value: varint attribute id, value (ValueCodec)
//     row counts (0x84, skippable; revision 12): u8 version (1) · varint n · per entity with rows, in
//                     increasing id order: varint entity id, varint row count (≥ 1)
//     trailer (0x12): u8 version (1) · varint entity count · varint row count · varint chunk count

/// A consumer bookmark as a checkpoint (and a bookmark record) keeps it (retention, DECISIONS.md D7).
struct CheckpointBookmark: Sendable, Equatable {
    var name: String
    var token: DefaultHistoryToken?
    var lastActivityMicroseconds: Int64
}

/// The first record of a checkpoint file.
struct CheckpointHeader: Sendable, Equatable {
    static let payloadVersion: UInt8 = 1

    var storeID: UUID
    /// X: the checkpoint holds the state after every record starting before X.
    var offset: UInt64
    /// The newest transaction before X, or `nil` when there is none.
    var lastToken: DefaultHistoryToken?
    var table: SchemaTable
    /// The fold state's next insertion sequence number.
    var sequenceEnd: UInt64
    /// The newest timestamp before X (timestamps never go backwards along the log).
    var lastTimestampMicroseconds: Int64
    /// The history low-water mark L when the checkpoint was written (`nil`: no history deleted).
    var lowWaterMark: DefaultHistoryToken?
    var bookmarks: [CheckpointBookmark]

    func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: 256)
        writer.write(Self.payloadVersion)
        writer.write(bytes: storeID.bytes)
        writer.write(offset)
        Self.write(lastToken, into: &writer)
        writer.writeLengthPrefixed(table.encoded())
        writer.writeVarint(sequenceEnd)
        writer.write(lastTimestampMicroseconds)
        Self.write(lowWaterMark, into: &writer)
        writer.writeVarint(UInt64(bookmarks.count))
        for bookmark in bookmarks {
            writer.writeLengthPrefixed(Array(bookmark.name.utf8))
            Self.write(bookmark.token, into: &writer)
            writer.write(bookmark.lastActivityMicroseconds)
        }
        return writer.bytes
    }

    static func decode(_ bytes: [UInt8]) throws(ByteReaderError) -> CheckpointHeader {
        try ByteReader.read(bytes) { reader throws(ByteReaderError) in
            let version = try reader.readByte()
            guard version == payloadVersion else { throw .malformed("unknown checkpoint header version \(version)") }
            let storeID = UUID(bytes: try reader.readBytes(16))
            let offset: UInt64 = try reader.read()
            let lastToken = try readToken(&reader, storeID: storeID)
            let table: SchemaTable
            do { table = try SchemaTable.decode(try reader.readLengthPrefixed()) } catch {
                throw .malformed("schema table: \(error)")
            }
            let sequenceEnd = try reader.readVarint()
            let lastTimestamp: Int64 = try reader.read()
            let lowWaterMark = try readToken(&reader, storeID: storeID)
            let bookmarkCount = try reader.readVarint()
            guard bookmarkCount <= UInt64(reader.remainingByteCount) else {
                throw .malformed("bookmark count \(bookmarkCount)")
            }
            var bookmarks: [CheckpointBookmark] = []
            for _ in 0..<bookmarkCount {
                let name = try ValueCodec.readString(&reader)
                let token = try readToken(&reader, storeID: storeID)
                bookmarks.append(
                    CheckpointBookmark(name: name, token: token, lastActivityMicroseconds: try reader.read()))
            }
            guard reader.isAtEnd else { throw .malformed("\(reader.remainingByteCount) bytes after the last field") }
            return CheckpointHeader(
                storeID: storeID, offset: offset, lastToken: lastToken, table: table,
                sequenceEnd: sequenceEnd, lastTimestampMicroseconds: lastTimestamp,
                lowWaterMark: lowWaterMark, bookmarks: bookmarks)
        }
    }

    static func write(_ token: DefaultHistoryToken?, into writer: inout ByteWriter) {
        guard let token else {
            writer.write(UInt8(0))
            return
        }
        writer.write(UInt8(1))
        writer.write(token.offset)
        writer.write(token.check)
    }

    static func readToken(_ reader: inout ByteReader, storeID: UUID) throws(ByteReaderError) -> DefaultHistoryToken? {
        switch try reader.readByte() {
        case 0: return nil
        case 1: return DefaultHistoryToken(storeIdentifier: storeID, offset: try reader.read(), check: try reader.read())
        case let tag: throw .malformed("token tag \(tag)")
        }
    }
}

/// The rows of each entity of a checkpoint, stated right after its header so that a reader makes
/// each entity's arrays and primary-key table once at their size. Read without it (a file an
/// older writer wrote), they grow as rows come and are trimmed at the end: the arrays each size
/// left behind were up to 50 MB of free heap after a million-row open (the long soak's reopen).
struct CheckpointRowCounts: Sendable, Equatable {
    static let payloadVersion: UInt8 = 1
    /// The fewest bytes a row's entry takes in a chunk (a 16-byte key, a one-byte sequence and
    /// value count): with LZ4's largest expansion (255), a file of `n` bytes holds at most
    /// `n × 255 / 18` rows — stated counts adding up to more are malformed, not reserved. (What
    /// a reader reserves is bounded tighter, ``reservableRows(fileByteCount:)``.)
    static let entryByteCountMin = 18

    /// The most rows a reader reserves for one entity of a file of `fileByteCount` bytes: a row's
    /// random 16-byte key does not compress, so a real file holds fewer; more rows than this
    /// (a file of rows that compress further) grow as they come. Bounds what a CRC-valid but
    /// lying count can make an open allocate before the trailer refuses it.
    static func reservableRows(fileByteCount: Int) -> Int { max(fileByteCount, 0) / 16 }

    /// Entity id → rows, for the entities with rows.
    var counts: [UInt32: UInt64]

    func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: 8 + 8 * counts.count)
        writer.write(Self.payloadVersion)
        writer.writeVarint(UInt64(counts.count))
        for (id, count) in counts.sorted(by: { $0.key < $1.key }) {
            writer.writeVarint(UInt64(id))
            writer.writeVarint(count)
        }
        return writer.bytes
    }

    /// Decodes and checks the counts: ids of `entities` in increasing order, each count at least 1
    /// and at most what a file of `fileByteCount` bytes can hold.
    static func decode(
        _ payload: UnsafeRawBufferPointer, entities: [UInt32: String], fileByteCount: Int
    ) throws(ByteReaderError) -> CheckpointRowCounts {
        var reader = ByteReader(payload)
        let version = try reader.readByte()
        guard version == payloadVersion else { throw .malformed("unknown row counts version \(version)") }
        let entityCount = try reader.readVarint()
        guard entityCount <= UInt64(reader.remainingByteCount) else { throw .malformed("row counts of \(entityCount) entities") }
        let expanded = UInt64(max(fileByteCount, 0)).multipliedReportingOverflow(by: 255)
        let most = min(
            expanded.overflow ? UInt64.max : expanded.partialValue / UInt64(entryByteCountMin), UInt64(Int.max / 2))
        var counts: [UInt32: UInt64] = [:]
        var previous: UInt64?
        var total: UInt64 = 0
        for _ in 0..<entityCount {
            let id = try reader.readVarint()
            guard previous.map({ id > $0 }) ?? true else {
                throw .malformed("row counts: entity id \(id) after \(previous!), not in increasing order")
            }
            previous = id
            guard id <= UInt64(UInt32.max), entities[UInt32(id)] != nil else {
                throw .malformed("row counts of unknown entity id \(id)")
            }
            let count = try reader.readVarint()
            guard count >= 1, count <= most else {
                throw .malformed("row counts: \(count) rows of entity id \(id) in a file of \(fileByteCount) bytes")
            }
            total += count  // no overflow: both were at most `most` ≤ Int.max / 2
            guard total <= most else {
                throw .malformed("row counts: \(total) rows in all in a file of \(fileByteCount) bytes")
            }
            counts[UInt32(id)] = count
        }
        guard reader.isAtEnd else { throw .malformed("\(reader.remainingByteCount) bytes after the row counts") }
        return CheckpointRowCounts(counts: counts)
    }
}

/// The last record of a checkpoint file: counts that must match what precedes it.
struct CheckpointTrailer: Sendable, Equatable {
    static let payloadVersion: UInt8 = 1

    /// Entities with at least one row (each has one run of consecutive chunks).
    var entityCount: UInt64
    /// Rows (a row split over several chunks counts once).
    var rowCount: UInt64
    var chunkCount: UInt64

    func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: 32)
        writer.write(Self.payloadVersion)
        writer.writeVarint(entityCount)
        writer.writeVarint(rowCount)
        writer.writeVarint(chunkCount)
        return writer.bytes
    }

    static func decode(_ bytes: [UInt8]) throws(ByteReaderError) -> CheckpointTrailer {
        try ByteReader.read(bytes) { reader throws(ByteReaderError) in
            let version = try reader.readByte()
            guard version == payloadVersion else { throw .malformed("unknown checkpoint trailer version \(version)") }
            let trailer = CheckpointTrailer(
                entityCount: try reader.readVarint(), rowCount: try reader.readVarint(),
                chunkCount: try reader.readVarint())
            guard reader.isAtEnd else { throw .malformed("\(reader.remainingByteCount) bytes after the counts") }
            return trailer
        }
    }
}
