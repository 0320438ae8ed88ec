import Foundation
import LogStoreEngine

/// Reads a checkpoint's records back, checking the grammar and every count. With `decodesRows`
/// false it checks everything but the entries themselves (entity ids, chunk flags and entry
/// counts are still read), for checkpoints that are only validated, not loaded.
struct CheckpointDecoder {
    let storeIdentifier: String
    let decodesRows: Bool

    private(set) var header: CheckpointHeader?
    private(set) var trailer: CheckpointTrailer?
    private var entities: [String: [UUID: FoldState.Row]] = [:]
    /// entity id → the layout its rows are decoded into (its attributes in id order).
    private var layouts: [UInt32: RowLayout] = [:]
    private var chunkCount: UInt64 = 0
    private var rowCount: UInt64 = 0
    private var entityCount: UInt64 = 0
    private var currentEntityID: UInt32?
    /// The last entry of the previous chunk (for continuations).
    private var lastEntry: (entityName: String, primaryKey: UUID, sequence: UInt64)?
    private var entityNames: [UInt32: String] = [:]
    private var attributes: [UInt32: [UInt32: String]] = [:]
    /// The rows' repeated strings, kept once.
    private let strings = StringInterner()

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
                throw .malformed(
                    "the trailer counts \(trailer.entityCount) entities, \(trailer.rowCount) rows and "
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
                entityCount += 1
                currentEntityID = entityID
            }
            chunkCount += 1
            rowCount += entryCount - (continues ? 1 : 0)
            guard decodesRows else { return }
            let names = attributes[entityID]!
            let layout = layouts[entityID] ?? RowLayout(names: names.sorted { $0.key < $1.key }.map(\.value))
            layouts[entityID] = layout
            // Taken out while filled, so the dictionary is not copied (it is uniquely referenced).
            var rows = entities.removeValue(forKey: entityName) ?? [:]
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
                var values = RowValues(layout: layout)
                for _ in 0..<valueCount {
                    let attributeID = UInt32(truncatingIfNeeded: try reader.readVarint())
                    guard let name = names[attributeID] else {
                        throw .malformed("unknown attribute id \(attributeID) of \(entityName)")
                    }
                    let value = try ValueCodec.read(
                        &reader, entityNames: entityNames, storeIdentifier: storeIdentifier, strings: strings)
                    guard values.updateValue(value, forKey: name) == nil else {
                        throw .malformed("attribute \(entityName).\(name) twice in one row")
                    }
                }
                if index == 0 && continues {
                    guard let last = lastEntry, last.entityName == entityName, last.primaryKey == primaryKey,
                        last.sequence == sequence, var row = rows[primaryKey]
                    else {
                        throw .malformed("a continued row that does not continue the previous chunk's last row")
                    }
                    for (name, value) in values {
                        guard row.values.updateValue(value, forKey: name) == nil else {
                            throw .malformed("attribute \(entityName).\(name) twice in one row")
                        }
                    }
                    rows[primaryKey] = row
                } else {
                    guard rows.updateValue(FoldState.Row(sequence: sequence, values: values), forKey: primaryKey) == nil
                    else {
                        throw .malformed("\(entityName) row \(primaryKey) appears twice")
                    }
                }
                lastEntry = (entityName, primaryKey, sequence)
            }
            guard reader.isAtEnd else { throw .malformed("\(reader.remainingByteCount) bytes after the last entry") }
        }
    }
}
