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
//     trailer (0x12): u8 version (1) · varint entity count · varint row count · varint chunk count

/// A consumer bookmark as a checkpoint (and a bookmark record) keeps it (retention, DECISIONS.md D7).
struct CheckpointBookmark: Sendable, Equatable {
    var name: String
    var token: HistoryToken?
    var lastActivityMicroseconds: Int64
}

/// The first record of a checkpoint file.
struct CheckpointHeader: Sendable, Equatable {
    static let payloadVersion: UInt8 = 1

    var storeID: UUID
    /// X: the checkpoint holds the state after every record starting before X.
    var offset: UInt64
    /// The newest transaction before X, or `nil` when there is none.
    var lastToken: HistoryToken?
    var table: SchemaTable
    /// The fold state's next insertion sequence number.
    var sequenceEnd: UInt64
    /// The newest timestamp before X (timestamps never go backwards along the log).
    var lastTimestampMicroseconds: Int64
    /// The history low-water mark L when the checkpoint was written (`nil`: no history deleted).
    var lowWaterMark: HistoryToken?
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
            guard bookmarkCount <= UInt64(reader.remainingByteCount) else { throw .malformed("bookmark count \(bookmarkCount)") }
            var bookmarks: [CheckpointBookmark] = []
            for _ in 0..<bookmarkCount {
                let name = try ValueCodec.readString(&reader)
                let token = try readToken(&reader, storeID: storeID)
                bookmarks.append(CheckpointBookmark(name: name, token: token, lastActivityMicroseconds: try reader.read()))
            }
            guard reader.isAtEnd else { throw .malformed("\(reader.remainingByteCount) bytes after the last field") }
            return CheckpointHeader(storeID: storeID, offset: offset, lastToken: lastToken, table: table,
                                    sequenceEnd: sequenceEnd, lastTimestampMicroseconds: lastTimestamp,
                                    lowWaterMark: lowWaterMark, bookmarks: bookmarks)
        }
    }

    static func write(_ token: HistoryToken?, into writer: inout ByteWriter) {
        guard let token else {
            writer.write(UInt8(0))
            return
        }
        writer.write(UInt8(1))
        writer.write(token.offset)
        writer.write(token.check)
    }

    static func readToken(_ reader: inout ByteReader, storeID: UUID) throws(ByteReaderError) -> HistoryToken? {
        switch try reader.readByte() {
        case 0: return nil
        case 1: return HistoryToken(storeIdentifier: storeID, offset: try reader.read(), check: try reader.read())
        case let tag: throw .malformed("token tag \(tag)")
        }
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
            let trailer = CheckpointTrailer(entityCount: try reader.readVarint(), rowCount: try reader.readVarint(),
                                            chunkCount: try reader.readVarint())
            guard reader.isAtEnd else { throw .malformed("\(reader.remainingByteCount) bytes after the counts") }
            return trailer
        }
    }
}

/// Turns a state into checkpoint record payloads, chunk by chunk, handing each to `emit` as soon
/// as it is complete (so a checkpoint never needs the whole file in memory).
struct CheckpointEncoder {
    static let chunkVersion: UInt8 = 1
    /// Rows are packed into a chunk until its payload would pass this (default 1 MiB uncompressed,
    /// well under the 16 MiB record limit). A single larger row gets a chunk of its own.
    var chunkByteCountTarget = 1024 * 1024
    /// A row whose entry is larger than this is split by attributes over consecutive chunks.
    var entryByteCountMax = FormatConstants.recordByteCountMax - 64

    /// The state cannot be written (a value larger than a chunk holds, or rows the table does not
    /// describe). The checkpoint is not written; the store works on without it.
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Emits the header, the chunks of every entity in table order (rows in insertion order), and
    /// the trailer. Stops early (returning `false`) when `isCancelled` says so between chunks.
    func encode(header: CheckpointHeader, state: FoldState, isCancelled: () -> Bool = { false },
                emit: (RecordType, [UInt8]) throws -> Void) throws -> Bool {
        try emit(.checkpointHeader, header.encoded())
        let table = header.table
        let entityIDs = Dictionary(uniqueKeysWithValues: table.entities.map { ($0.name, $0.id) })
        for name in state.entities.keys where table.entity(named: name) == nil && state.count(of: name) > 0 {
            throw Failure(description: "the state holds rows of \(name), which the schema table does not name")
        }
        var trailer = CheckpointTrailer(entityCount: 0, rowCount: 0, chunkCount: 0)
        for entity in table.entities {
            let rows = state.rows(of: entity.name)
            guard !rows.isEmpty else { continue }
            if isCancelled() { return false }
            trailer.entityCount += 1
            trailer.rowCount += UInt64(rows.count)
            var chunk = ChunkBuilder(entityID: entity.id)
            for (primaryKey, row) in rows {
                let pieces = try entryPieces(primaryKey: primaryKey, row: row, entity: entity, entityIDs: entityIDs)
                for (index, piece) in pieces.enumerated() {
                    let continues = index > 0
                    if !chunk.isEmpty && (continues || chunk.byteCount + piece.count > chunkByteCountTarget) {
                        try emit(.checkpointChunk, chunk.encoded())
                        trailer.chunkCount += 1
                        if isCancelled() { return false }
                        chunk = ChunkBuilder(entityID: entity.id, continuesRow: continues)
                    }
                    chunk.add(piece)
                }
            }
            try emit(.checkpointChunk, chunk.encoded())
            trailer.chunkCount += 1
        }
        try emit(.checkpointTrailer, trailer.encoded())
        return true
    }

    /// The entry of one row, or several when it is too large for one chunk: each piece repeats the
    /// primary key and sequence and carries some of the values, in table order.
    private func entryPieces(primaryKey: UUID, row: FoldState.Row, entity: SchemaTable.Entity,
                             entityIDs: [String: UInt32]) throws -> [[UInt8]] {
        var values: [[UInt8]] = []
        values.reserveCapacity(row.values.count)
        var total = 0
        for attribute in entity.attributes {
            guard let value = row.values[attribute.name] else { continue }
            var writer = ByteWriter(capacity: 16)
            writer.writeVarint(UInt64(attribute.id))
            ValueCodec.write(value, into: &writer, entityIDs: entityIDs)
            total += writer.count
            values.append(writer.bytes)
        }
        if values.count < row.values.count {
            throw Failure(description: "a row of \(entity.name) holds attributes the schema table does not name")
        }
        let entryOverhead = 16 + 10 + 10
        if entryOverhead + total <= entryByteCountMax {
            return [entry(primaryKey, row.sequence, values[...])]
        }
        var pieces: [[UInt8]] = []
        var start = 0
        while start < values.count {
            var end = start
            var size = entryOverhead
            while end < values.count && size + values[end].count <= entryByteCountMax {
                size += values[end].count
                end += 1
            }
            guard end > start else {
                throw Failure(description: "a value of \(entity.name) takes \(values[start].count) bytes, more than "
                    + "a checkpoint chunk holds")
            }
            pieces.append(entry(primaryKey, row.sequence, values[start..<end]))
            start = end
        }
        return pieces
    }

    private func entry(_ primaryKey: UUID, _ sequence: UInt64, _ values: ArraySlice<[UInt8]>) -> [UInt8] {
        var writer = ByteWriter(capacity: 36 + values.reduce(0) { $0 + $1.count })
        writer.write(bytes: primaryKey.bytes)
        writer.writeVarint(sequence)
        writer.writeVarint(UInt64(values.count))
        for value in values { writer.write(bytes: value) }
        return writer.bytes
    }

    private struct ChunkBuilder {
        let entityID: UInt32
        var continuesRow = false
        private var entries = ByteWriter(capacity: 64 * 1024)
        private var entryCount = 0

        init(entityID: UInt32, continuesRow: Bool = false) {
            self.entityID = entityID
            self.continuesRow = continuesRow
        }

        var isEmpty: Bool { entryCount == 0 }
        var byteCount: Int { entries.count + 16 }

        mutating func add(_ entry: [UInt8]) {
            entries.write(bytes: entry)
            entryCount += 1
        }

        func encoded() -> [UInt8] {
            var writer = ByteWriter(capacity: entries.count + 16)
            writer.write(CheckpointEncoder.chunkVersion)
            writer.writeVarint(UInt64(entityID))
            writer.write(UInt8(continuesRow ? 1 : 0))
            writer.writeVarint(UInt64(entryCount))
            writer.write(bytes: entries.bytes)
            return writer.bytes
        }
    }
}

/// Reads a checkpoint's records back, checking the grammar and every count. With `decodesRows`
/// false it checks everything but the entries themselves (entity ids, chunk flags and entry
/// counts are still read), for checkpoints that are only validated, not loaded.
struct CheckpointDecoder {
    let storeIdentifier: String
    let decodesRows: Bool

    private(set) var header: CheckpointHeader?
    private(set) var trailer: CheckpointTrailer?
    private var entities: [String: [UUID: FoldState.Row]] = [:]
    private var chunkCount: UInt64 = 0
    private var rowCount: UInt64 = 0
    private var entityCount: UInt64 = 0
    private var currentEntityID: UInt32?
    /// The last entry of the previous chunk (for continuations).
    private var lastEntry: (entityName: String, primaryKey: UUID, sequence: UInt64)?
    private var entityNames: [UInt32: String] = [:]
    private var attributes: [UInt32: [UInt32: String]] = [:]

    init(storeIdentifier: String, decodesRows: Bool) {
        self.storeIdentifier = storeIdentifier
        self.decodesRows = decodesRows
    }

    /// Takes the next record. Throws a description of what is wrong.
    mutating func take(_ type: RecordType, _ payload: [UInt8]) throws(ByteReaderError) {
        if trailer != nil { throw .malformed("a record follows the trailer") }
        switch type {
        case .checkpointHeader:
            guard header == nil else { throw .malformed("a second checkpoint header") }
            let header = try CheckpointHeader.decode(payload)
            self.header = header
            entityNames = Dictionary(uniqueKeysWithValues: header.table.entities.map { ($0.id, $0.name) })
            for entity in header.table.entities {
                attributes[entity.id] = Dictionary(uniqueKeysWithValues: entity.attributes.map { ($0.id, $0.name) })
            }
        case .checkpointChunk:
            guard header != nil else { throw .malformed("a chunk before the checkpoint header") }
            try takeChunk(payload)
        case .checkpointTrailer:
            guard header != nil else { throw .malformed("the trailer comes before the checkpoint header") }
            let trailer = try CheckpointTrailer.decode(payload)
            let found = CheckpointTrailer(entityCount: entityCount, rowCount: rowCount, chunkCount: chunkCount)
            guard trailer == found else {
                throw .malformed("the trailer counts \(trailer.entityCount) entities, \(trailer.rowCount) rows and "
                    + "\(trailer.chunkCount) chunks; the file holds \(found.entityCount), \(found.rowCount) and "
                    + "\(found.chunkCount)")
            }
            self.trailer = trailer
        default:
            // A skippable type a newer writer added is ignored; anything else does not belong here.
            guard type.isSkippable else { throw .malformed("a \(type) record in a checkpoint") }
            guard header != nil else { throw .malformed("a \(type) record before the checkpoint header") }
        }
    }

    /// Checks the file ended with its trailer; returns the header and, when decoding rows, the state.
    func finish() throws(ByteReaderError) -> (CheckpointHeader, FoldState?) {
        guard let header else { throw .malformed("the file holds no checkpoint header") }
        guard trailer != nil else { throw .malformed("the file ends without a trailer") }
        return (header, decodesRows ? FoldState(restoring: entities, sequenceEnd: header.sequenceEnd) : nil)
    }

    private mutating func takeChunk(_ payload: [UInt8]) throws(ByteReaderError) {
        let sequenceEnd = header!.sequenceEnd
        try ByteReader.read(payload) { reader throws(ByteReaderError) in
            let version = try reader.readByte()
            guard version == CheckpointEncoder.chunkVersion else { throw .malformed("unknown chunk version \(version)") }
            let entityID = UInt32(truncatingIfNeeded: try reader.readVarint())
            guard let entityName = entityNames[entityID] else { throw .malformed("chunk of unknown entity id \(entityID)") }
            let flags = try reader.readByte()
            guard flags & ~1 == 0 else { throw .malformed("chunk flags 0x\(String(flags, radix: 16))") }
            let continues = flags & 1 != 0
            let entryCount = try reader.readVarint()
            guard entryCount >= 1, entryCount <= UInt64(reader.remainingByteCount) else {
                throw .malformed("chunk entry count \(entryCount)")
            }
            if let currentEntityID, entityID != currentEntityID {
                guard entityID > currentEntityID else {
                    throw .malformed("chunk of entity id \(entityID) after entity id \(currentEntityID): an entity's "
                        + "chunks must be consecutive, in id order")
                }
            }
            if entityID != currentEntityID {
                guard !continues else { throw .malformed("the first chunk of entity id \(entityID) continues a row") }
                entityCount += 1
                currentEntityID = entityID
            }
            chunkCount += 1
            rowCount += entryCount - (continues ? 1 : 0)
            guard decodesRows else { return }
            let names = attributes[entityID]!
            // Taken out while filled, so the dictionary is not copied (it is uniquely referenced).
            var rows = entities.removeValue(forKey: entityName) ?? [:]
            defer { entities[entityName] = rows }
            for index in 0..<entryCount {
                let primaryKey = UUID(bytes: try reader.readBytes(16))
                let sequence = try reader.readVarint()
                guard sequence < sequenceEnd else {
                    throw .malformed("row sequence \(sequence) is not below the sequence end \(sequenceEnd)")
                }
                let valueCount = try reader.readVarint()
                guard valueCount <= UInt64(reader.remainingByteCount) else { throw .malformed("value count \(valueCount)") }
                var values: [String: AttributeValue] = [:]
                values.reserveCapacity(Int(valueCount))
                for _ in 0..<valueCount {
                    let attributeID = UInt32(truncatingIfNeeded: try reader.readVarint())
                    guard let name = names[attributeID] else {
                        throw .malformed("unknown attribute id \(attributeID) of \(entityName)")
                    }
                    let value = try ValueCodec.read(&reader, entityNames: entityNames, storeIdentifier: storeIdentifier)
                    guard values.updateValue(value, forKey: name) == nil else {
                        throw .malformed("attribute \(entityName).\(name) twice in one row")
                    }
                }
                if index == 0 && continues {
                    guard let last = lastEntry, last.entityName == entityName, last.primaryKey == primaryKey,
                          last.sequence == sequence, var row = rows[primaryKey] else {
                        throw .malformed("a continued row that does not continue the previous chunk's last row")
                    }
                    for (name, value) in values {
                        guard row.values.updateValue(value, forKey: name) == nil else {
                            throw .malformed("attribute \(entityName).\(name) twice in one row")
                        }
                    }
                    rows[primaryKey] = row
                } else {
                    guard rows.updateValue(FoldState.Row(sequence: sequence, values: values), forKey: primaryKey) == nil else {
                        throw .malformed("\(entityName) row \(primaryKey) appears twice")
                    }
                }
                lastEntry = (entityName, primaryKey, sequence)
            }
            guard reader.isAtEnd else { throw .malformed("\(reader.remainingByteCount) bytes after the last entry") }
        }
    }
}
