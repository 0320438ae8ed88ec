import Foundation
import Synchronization

/// The transactions one history fetch read, side by side (``HistoryReader/fetch(_:)``): each
/// transaction the fetch returns is this batch and its place in it, not an object of its own.
///
/// An object per transaction — its header's strings, its payload's place, a lock for its changes
/// decoded on first access — was made and freed for every transaction of every fetch: a fifth of
/// P6's fetch of 1,000 transactions (271 → 210 µs with one object shared by all, measured as an
/// upper bound). Here a transaction's header is an entry of plain numbers (its strings are
/// positions in a short table: a run of one process's saves repeats them), its payload a range of
/// one of the batch's chunks, and its changes are decoded on first access into the batch's memo.
/// A transaction that is changed (``DefaultHistoryTransaction/author`` set) or typed by model
/// types becomes a ``HistoryChanges`` of its own (``changesObject(at:)``).
///
/// Keeping one transaction of a fetch keeps the batch for as long as it is kept — the header and
/// payload of every transaction the fetch returned, and the changes read so far — where keeping
/// one kept its payload's chunk (≤ 32 KiB) before: keep tokens, not transactions, across many
/// fetches. A transaction the fetch's predicate rejects is taken back out (``discardLast()``), and
/// the survivors of a sorted fetch's limit are detached when they are fewer than half the batch.
///
/// `@unchecked Sendable`: every stored `var` is written only by the fetch that fills the batch, on
/// its thread, before the transactions it made leave that thread through the fetch's result (what
/// is read after is never written again); `decoded` is behind its lock.
final class HistoryBatch: @unchecked Sendable {
    /// One transaction's header and where its payload lies.
    struct Entry {
        var offset: UInt64
        var timestampMicroseconds: Int64
        /// A position in `strings`; -1: no author.
        var author: Int32
        /// A position in `strings`.
        var processIdentifier: Int32
        /// A position in `chunks`.
        var chunk: Int32
        var payloadStart: Int32
        var payloadCount: Int32
    }

    let storeIdentifier: String
    let decoder: TransactionRecord.Decoder
    // Unchecked: written only by the filling fetch (above); the dynamic exclusivity checks of a
    // class's stored properties were 2.4 % of P6's fetch.
    @exclusivity(unchecked) private var entries: [Entry] = []
    /// The authors and process identifiers of the entries, each once in a run of equal ones.
    @exclusivity(unchecked) private var strings: [String] = []
    @exclusivity(unchecked) private var chunks: [PayloadChunk] = []
    /// The author and process identifier appended last, and their positions in `strings`.
    @exclusivity(unchecked) private var lastAuthor: (string: String, position: Int32)?
    @exclusivity(unchecked) private var lastProcessIdentifier: (string: String, position: Int32)?
    /// The capacity of the next chunk: the first small (a fetch of a few transactions holds
    /// little), each next one twice the last up to ``chunkByteCountMax``; a payload larger than
    /// that gets a chunk of its own size.
    @exclusivity(unchecked) private var nextChunkCapacity = HistoryBatch.chunkByteCountFirst
    static let chunkByteCountFirst = 4 * 1024
    static let chunkByteCountMax = 32 * 1024
    /// Changes decoded so far, by entry.
    private let decoded = Mutex<[Int32: [HistoryChange]]>([:])

    init(storeIdentifier: String, decoder: TransactionRecord.Decoder, capacity: Int) {
        self.storeIdentifier = storeIdentifier
        self.decoder = decoder
        entries.reserveCapacity(capacity)
    }

    /// Adds a transaction (on the filling fetch's thread): its header fields and its payload,
    /// copied into the batch's current chunk. Returns its place.
    func append(
        offset: UInt64, author: String?, timestampMicroseconds: Int64, processIdentifier: String,
        payload: UnsafeRawBufferPointer
    ) -> Int32 {
        precondition(entries.count < Int(Int32.max), "a batch holds fewer than 2^31 transactions")
        let (chunk, range) = store(payload)
        entries.append(
            Entry(
                offset: offset, timestampMicroseconds: timestampMicroseconds,
                author: author.map { Self.position(of: $0, last: &lastAuthor, in: &strings) } ?? -1,
                processIdentifier: Self.position(of: processIdentifier, last: &lastProcessIdentifier, in: &strings),
                chunk: chunk, payloadStart: Int32(range.lowerBound), payloadCount: Int32(range.count)))
        return Int32(entries.count - 1)
    }

    /// The position of `string` in `strings`: `last`'s when it is the same string (an author,
    /// or a process identifier, repeats through a run of one process's saves), else appended.
    /// The header decoder hands the same string again while the bytes repeat
    /// (``TransactionRecord/RepeatedStrings``), so the comparison is mostly of two references.
    private static func position(
        of string: String, last: inout (string: String, position: Int32)?, in strings: inout [String]
    ) -> Int32 {
        if let last, last.string == string { return last.position }
        precondition(strings.count < Int(Int32.max), "a batch holds fewer than 2^31 strings")
        let position = Int32(strings.count)
        strings.append(string)
        last = (string, position)
        return position
    }

    /// Copies `bytes` into the current chunk, or a new one when they do not fit (chunks grow from
    /// 4 KiB to 32 KiB: a fetch of a few transactions allocates little).
    private func store(_ bytes: UnsafeRawBufferPointer) -> (chunk: Int32, range: Range<Int>) {
        precondition(bytes.count <= Int(Int32.max), "a payload is shorter than 2 GiB")
        if let current = chunks.last, let range = current.append(bytes) { return (Int32(chunks.count - 1), range) }
        let chunk = PayloadChunk(capacity: max(bytes.count, nextChunkCapacity, 1))
        nextChunkCapacity = min(nextChunkCapacity * 2, Self.chunkByteCountMax)
        chunks.append(chunk)
        guard let range = chunk.append(bytes) else { preconditionFailure("a new chunk holds what it was sized for") }
        return (Int32(chunks.count - 1), range)
    }

    /// Takes back the transaction appended last (the fetch's predicate rejected it): its entry,
    /// its payload's bytes and any changes decoded from it (on the filling fetch's thread, with
    /// no transaction of it left).
    func discardLast() {
        precondition(!entries.isEmpty, "a transaction to take back")
        let entry = entries.removeLast()
        chunks[Int(entry.chunk)].rewind(to: Int(entry.payloadStart))
        decoded.withLock { _ = $0.removeValue(forKey: Int32(entries.count)) }
    }

    /// The transactions the batch holds.
    var count: Int { entries.count }

    /// The record offset of the transaction at `index` (tests; a transaction's token holds it).
    func offset(at index: Int32) -> UInt64 { entries[Int(index)].offset }

    func author(at index: Int32) -> String? {
        let position = entries[Int(index)].author
        return position < 0 ? nil : strings[Int(position)]
    }

    func timestamp(at index: Int32) -> Date {
        Date(timeIntervalSince1970: Double(entries[Int(index)].timestampMicroseconds) / 1_000_000)
    }

    func processIdentifier(at index: Int32) -> String { strings[Int(entries[Int(index)].processIdentifier)] }

    /// The header of the transaction at `index`, as a ``HistoryChanges`` holds it.
    func header(at index: Int32) -> HistoryChanges.Header {
        HistoryChanges.Header(
            author: author(at: index), timestamp: timestamp(at: index), storeIdentifier: storeIdentifier,
            processIdentifier: processIdentifier(at: index))
    }

    /// The transaction's changes: decoded on first access, then kept. Decoded outside the lock,
    /// so threads reading different transactions of one fetch do not wait for each other (two
    /// decoding one transaction at once both decode it; the first kept wins).
    func changes(at index: Int32) -> [HistoryChange] {
        if let changes = decoded.withLock({ $0[index] }) { return changes }
        let entry = entries[Int(index)]
        let changes = HistoryChanges.decodeChanges(
            payload(of: entry), decoder: decoder, offset: entry.offset, modelTypes: [:])
        return decoded.withLock { decoded in
            if let first = decoded[index] { return first }
            decoded[index] = changes
            return changes
        }
    }

    /// The transaction at `index` as an object of its own (to be changed or typed): its changes
    /// if decoded already, else its payload, shared with this batch's chunk.
    func changesObject(at index: Int32) -> HistoryChanges {
        let header = header(at: index)
        if let changes = decoded.withLock({ $0[index] }) { return HistoryChanges(changes, header: header) }
        let entry = entries[Int(index)]
        return HistoryChanges(
            chunk: chunks[Int(entry.chunk)], range: Int(entry.payloadStart)..<Int(entry.payloadStart + entry.payloadCount),
            decoder: decoder, offset: entry.offset, header: header)
    }

    /// The payload of the transaction at `index` (tests).
    func payload(at index: Int32) -> UnsafeRawBufferPointer { payload(of: entries[Int(index)]) }

    /// The capacities of the chunks made so far, and how many strings are kept (tests).
    var chunkCapacities: [Int] { chunks.map(\.capacity) }
    var stringCount: Int { strings.count }

    private func payload(of entry: Entry) -> UnsafeRawBufferPointer {
        chunks[Int(entry.chunk)].bytes(Int(entry.payloadStart)..<Int(entry.payloadStart + entry.payloadCount))
    }
}
