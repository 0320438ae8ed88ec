import Foundation
import LogStoreEngine

/// Reads a checkpoint's records back, checking the grammar and every count. With `decodesRows`
/// false it checks everything but the entries themselves (entity ids, chunk flags and entry
/// counts are still read), for checkpoints that are only validated, not loaded.
struct CheckpointDecoder {
    let storeIdentifier: String
    let decodesRows: Bool
    /// The file's size: what bounds the rows a row counts record may state (they are reserved).
    let fileByteCount: Int

    private(set) var header: CheckpointHeader?
    private(set) var trailer: CheckpointTrailer?
    /// Each entity's rows as they are read: a checkpoint holds them in insertion order, so they
    /// go straight into the state's rows (a dictionary by key, sorted at the end, was half of an
    /// open's decoding, P8 profile); an entity whose rows come in another order is sorted at the end.
    private var entities: [String: EntityRows] = [:]
    /// The entities whose rows did not come in increasing sequence.
    private var unordered: Set<String> = []
    /// The sequence of the last row read of the current entity.
    private var lastSequence: UInt64?
    /// entity id → the layout its rows are decoded into (its attributes in id order) and the
    /// attribute ids in that order (an attribute's position in the layout).
    private var layouts: [UInt32: (layout: RowLayout, ids: [UInt32])] = [:]
    private var chunkCount: UInt64 = 0
    /// What the row counts record states (`nil`: the file has none — an older writer's).
    private var statedRowCounts: CheckpointRowCounts?
    /// The rows read of each entity with a chunk (a split row counts once): the trailer's entity
    /// and row counts, and what the row counts record must state.
    private var rowCountsRead: [UInt32: UInt64] = [:]
    private var currentEntityID: UInt32?
    /// The last entry of the previous chunk (for continuations).
    private var lastEntry: (entityName: String, primaryKey: UUID, sequence: UInt64)?
    /// One row's values by position while it is read, packed once complete (reused row to row).
    private var slots: [AttributeValue?] = []
    private var entityNames: [UInt32: String] = [:]
    private var attributes: [UInt32: [UInt32: String]] = [:]
    /// The rows' repeated strings, kept once.
    private let strings = StringInterner()

    init(storeIdentifier: String, decodesRows: Bool, fileByteCount: Int) {
        self.storeIdentifier = storeIdentifier
        self.decodesRows = decodesRows
        self.fileByteCount = fileByteCount
    }

    /// Takes the next record. Throws a description of what is wrong.
    mutating func take(_ type: RecordType, _ payload: [UInt8]) throws(ByteReaderError) {
        try ByteReader.withBytes(payload) { bytes throws(ByteReaderError) in try take(type, bytes) }
    }

    /// Takes the next record, its payload where the reader holds it (a checkpoint's chunks are
    /// about 1 MB each: read into a new array apiece, they landed between the rows an open makes
    /// and stayed as free heap after it — P8).
    mutating func take(_ type: RecordType, _ payload: UnsafeRawBufferPointer) throws(ByteReaderError) {
        if trailer != nil { throw .malformed("a record follows the trailer") }
        switch type {
        case .checkpointHeader:
            guard header == nil else { throw .malformed("a second checkpoint header") }
            let header = try CheckpointHeader.decode(Array(payload))
            self.header = header
            entityNames = Dictionary(uniqueKeysWithValues: header.table.entities.map { ($0.id, $0.name) })
            for entity in header.table.entities {
                attributes[entity.id] = Dictionary(uniqueKeysWithValues: entity.attributes.map { ($0.id, $0.name) })
            }
        case .checkpointRowCounts:
            guard header != nil else { throw .malformed("row counts before the checkpoint header") }
            guard statedRowCounts == nil, chunkCount == 0 else {
                throw .malformed("row counts not directly after the checkpoint header")
            }
            statedRowCounts = try CheckpointRowCounts.decode(
                payload, entities: entityNames, fileByteCount: fileByteCount)
        case .checkpointChunk:
            guard header != nil else { throw .malformed("a chunk before the checkpoint header") }
            try takeChunk(payload)
        case .checkpointTrailer:
            guard header != nil else { throw .malformed("the trailer comes before the checkpoint header") }
            let trailer = try CheckpointTrailer.decode(Array(payload))
            let found = CheckpointTrailer(
                entityCount: UInt64(rowCountsRead.count), rowCount: rowCountsRead.values.reduce(0, +),
                chunkCount: chunkCount)
            guard trailer == found else {
                throw .malformed(
                    "the trailer counts \(trailer.entityCount) entities, \(trailer.rowCount) rows and "
                        + "\(trailer.chunkCount) chunks; the file holds \(found.entityCount), \(found.rowCount) and "
                        + "\(found.chunkCount)")
            }
            if let stated = statedRowCounts?.counts, stated != rowCountsRead {
                let id = Set(stated.keys).union(rowCountsRead.keys).sorted().first { stated[$0] != rowCountsRead[$0] }!
                throw .malformed(
                    "the row counts record states \(stated[id] ?? 0) rows of entity id \(id); the file holds "
                        + "\(rowCountsRead[id] ?? 0)")
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
        guard decodesRows else { return (header, nil) }
        var entities = entities
        for name in unordered {
            let rows = entities[name]!.sorted { $0.1.sequence < $1.1.sequence }
            var ordered = EntityRows()
            ordered.reserve(restoring: rows.count)
            for (primaryKey, row) in rows { ordered.append(primaryKey, row) }
            entities[name] = ordered
        }
        return (header, FoldState(restoring: entities, sequenceEnd: header.sequenceEnd))
    }

    /// The position of `id` in `ids` (sorted): `from` when it is there, else a binary search.
    @inline(__always)
    private static func position(of id: UInt32, in ids: [UInt32], from: Int) -> Int? {
        if from < ids.count, ids[from] == id { return from }
        var (low, high) = (0, ids.count)
        while low < high {
            let middle = (low + high) / 2
            if ids[middle] < id { low = middle + 1 } else { high = middle }
        }
        return low < ids.count && ids[low] == id ? low : nil
    }

    private mutating func takeChunk(_ payload: UnsafeRawBufferPointer) throws(ByteReaderError) {
        let sequenceEnd = header!.sequenceEnd
        var reader = ByteReader(payload)
        do {
            let version = try reader.readByte()
            guard version == CheckpointEncoder.chunkVersion else {
                throw .malformed("unknown chunk version \(version)")
            }
            let entityID = UInt32(truncatingIfNeeded: try reader.readVarint())
            guard let entityName = entityNames[entityID] else {
                throw .malformed("chunk of unknown entity id \(entityID)")
            }
            let flags = try reader.readByte()
            guard flags & ~1 == 0 else { throw .malformed("chunk flags 0x\(String(flags, radix: 16))") }
            let continues = flags & 1 != 0
            let entryCount = try reader.readVarint()
            guard entryCount >= 1, entryCount <= UInt64(reader.remainingByteCount) else {
                throw .malformed("chunk entry count \(entryCount)")
            }
            if let currentEntityID, entityID != currentEntityID {
                guard entityID > currentEntityID else {
                    throw .malformed(
                        "chunk of entity id \(entityID) after entity id \(currentEntityID): an entity's "
                            + "chunks must be consecutive, in id order")
                }
            }
            if entityID != currentEntityID {
                guard !continues else { throw .malformed("the first chunk of entity id \(entityID) continues a row") }
                currentEntityID = entityID
                lastSequence = nil
            }
            chunkCount += 1
            rowCountsRead[entityID, default: 0] += entryCount - (continues ? 1 : 0)
            guard decodesRows else { return }
            let (layout, attributeIDs) =
                layouts[entityID]
                ?? {
                    let sorted = attributes[entityID]!.sorted { $0.key < $1.key }
                    return (RowLayout(names: sorted.map(\.value)), sorted.map(\.key))
                }()
            layouts[entityID] = (layout, attributeIDs)
            // Taken out while filled, so the rows are not copied (they are uniquely referenced).
            var rows =
                entities.removeValue(forKey: entityName)
                ?? {
                    // The entity's first chunk: its arrays and index made once at their size
                    // when the file states it (a count the file's size cannot back is reserved
                    // only up to what it can: the trailer refuses the lie, the rows grow).
                    var rows = EntityRows()
                    if let stated = statedRowCounts?.counts[entityID] {
                        rows.reserve(
                            restoring: min(
                                Int(stated), CheckpointRowCounts.reservableRows(fileByteCount: fileByteCount)))
                    }
                    return rows
                }()
            defer { entities[entityName] = rows }
            for index in 0..<entryCount {
                let primaryKey = try reader.readUUID()
                let sequence = try reader.readVarint()
                guard sequence < sequenceEnd else {
                    throw .malformed("row sequence \(sequence) is not below the sequence end \(sequenceEnd)")
                }
                let valueCount = try reader.readVarint()
                guard valueCount <= UInt64(reader.remainingByteCount) else {
                    throw .malformed("value count \(valueCount)")
                }
                // A continued row's values go into the row read last; any other row is new. The
                // values are gathered by position, then packed once (RowSlots).
                let continued = index == 0 && continues
                if slots.count == layout.count {
                    for position in slots.indices { slots[position] = nil }
                } else {
                    slots = Array(repeating: nil, count: layout.count)
                }
                if continued {
                    guard let last = lastEntry, last.entityName == entityName, last.primaryKey == primaryKey,
                        last.sequence == sequence, let row = rows[primaryKey], row.values.layout === layout
                    else {
                        throw .malformed("a continued row that does not continue the previous chunk's last row")
                    }
                    for position in slots.indices { slots[position] = row.values.value(at: position) }
                }
                // Values come in table order, which is id order: the next position is tried first.
                var nextPosition = 0
                for _ in 0..<valueCount {
                    let attributeID = UInt32(truncatingIfNeeded: try reader.readVarint())
                    // By position: the layout is the entity's attributes in id order.
                    guard let position = Self.position(of: attributeID, in: attributeIDs, from: nextPosition) else {
                        throw .malformed("unknown attribute id \(attributeID) of \(entityName)")
                    }
                    nextPosition = position + 1
                    let value = try ValueCodec.read(
                        &reader, entityNames: entityNames, storeIdentifier: storeIdentifier, strings: strings)
                    guard slots[position] == nil else {
                        throw .malformed("attribute \(entityName).\(layout.names[position]) twice in one row")
                    }
                    slots[position] = value
                }
                let values = slots.withUnsafeBufferPointer { RowValues(layout: layout, values: $0) }
                if continued {
                    rows.update(primaryKey) { $0.values = values }
                } else {
                    // One lookup of the key: a row replaced is refused (the state is thrown away).
                    guard !rows.append(primaryKey, FoldState.Row(sequence: sequence, values: values)) else {
                        throw .malformed("\(entityName) row \(primaryKey) appears twice")
                    }
                    if let lastSequence, sequence <= lastSequence { unordered.insert(entityName) }
                    lastSequence = sequence
                }
                lastEntry = (entityName, primaryKey, sequence)
            }
            guard reader.isAtEnd else { throw .malformed("\(reader.remainingByteCount) bytes after the last entry") }
        }
    }
}
