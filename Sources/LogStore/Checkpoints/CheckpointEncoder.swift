import Foundation
import LogStoreEngine

/// Turns a state into checkpoint record payloads, chunk by chunk, handing each to `emit` as soon
/// as it is complete (so a checkpoint never needs the whole file in memory).
struct CheckpointEncoder {
    static let chunkVersion: UInt8 = 1
    /// Rows are packed into a chunk until its payload would pass this (default 1 MiB uncompressed,
    /// well under the 16 MiB record limit). A single larger row gets a chunk of its own.
    var chunkByteCountTarget = 1024 * 1024
    /// A row whose entry is larger than this is split by attributes over consecutive chunks.
    var entryByteCountMax = FormatConstants.recordByteCountMax - 64
    /// Whether the row counts record follows the header (always, but in tests of files written
    /// before revision 12).
    var writesRowCounts = true

    /// The state cannot be written (a value larger than a chunk holds, or rows the table does not
    /// describe). The checkpoint is not written; the store works on without it.
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Emits the header, the row counts, the chunks of every entity in table order (rows in
    /// insertion order), and the trailer. Stops early (returning `false`) when `isCancelled` says so between chunks.
    func encode(
        header: CheckpointHeader, state: FoldState, isCancelled: () -> Bool = { false },
        emit: (RecordType, [UInt8]) throws -> Void
    ) throws -> Bool {
        try emit(.checkpointHeader, header.encoded())
        let table = header.table
        let entityIDs = Dictionary(uniqueKeysWithValues: table.entities.map { ($0.name, $0.id) })
        for name in state.entityNames where table.entity(named: name) == nil && state.count(of: name) > 0 {
            throw Failure(description: "the state holds rows of \(name), which the schema table does not name")
        }
        if writesRowCounts {
            var counts: [UInt32: UInt64] = [:]
            for entity in table.entities where state.count(of: entity.name) > 0 {
                counts[entity.id] = UInt64(state.count(of: entity.name))
            }
            try emit(.checkpointRowCounts, CheckpointRowCounts(counts: counts).encoded())
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
    private func entryPieces(
        primaryKey: UUID, row: FoldState.Row, entity: SchemaTable.Entity,
        entityIDs: [String: UInt32]
    ) throws -> [[UInt8]] {
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
                throw Failure(
                    description: "a value of \(entity.name) takes \(values[start].count) bytes, more than "
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
