import Synchronization

/// Reads the records of one segment file forward from a file position, checking each header
/// and payload CRC. Reads in chunks (16 KiB first, doubling up to ``chunkByteCount``) so a record
/// costs no system call of its own; a buffer grows only to hold one whole record, never past the
/// 16 MiB limit.
struct SegmentScanner {
    static let chunkByteCount = 256 * 1024

    let handle: any FileHandle
    let baseOffset: UInt64
    /// The format version of the file (its header's), which decides the record header layout.
    let formatVersion: UInt32
    /// The segment's dictionary (FORMAT.md §6.8), looked up the first time a record needs it;
    /// shared by every scanner of one ``SegmentFile``.
    let dictionary: SegmentDictionary
    /// File position of the next record header.
    private(set) var position: UInt64
    private var buffer: [UInt8] = []
    /// The segment's dictionary once a record needed it (kept: it never changes for a segment).
    private var heldDictionary: RecordDictionary?
    /// The last compressed payload, decompressed (reused: grows to the largest record read).
    private var decompressed: [UInt8] = []
    /// File position of `buffer[0]`.
    private var bufferStart: UInt64 = 0
    /// The next chunk's size: small at first (a probe or a short read touches little), doubling
    /// up to ``chunkByteCount`` as the scan goes on.
    private var readByteCount = 16 * 1024

    init(
        handle: any FileHandle, baseOffset: UInt64, formatVersion: UInt32,
        position: UInt64 = UInt64(FormatConstants.segmentHeaderByteCount),
        dictionary: SegmentDictionary = SegmentDictionary()
    ) {
        self.handle = handle
        self.dictionary = dictionary
        self.baseOffset = baseOffset
        self.formatVersion = formatVersion
        self.position = position
    }

    /// `firstReadByteCount`: the first chunk's size, for a scan that expects to find little (a
    /// turn's catch-up, which most often reads only the zeros past the written end: 16 KiB
    /// allocated, zeroed and copied for it cost a lone writer's shared save ~2 %, issue 12).
    init(
        segment: SegmentFile, position: UInt64 = UInt64(FormatConstants.segmentHeaderByteCount),
        firstReadByteCount: Int = 16 * 1024
    ) {
        precondition(firstReadByteCount > 0 && firstReadByteCount <= Self.chunkByteCount)
        self.init(
            handle: segment.handle, baseOffset: segment.baseOffset, formatVersion: segment.formatVersion,
            position: position, dictionary: segment.dictionary)
        readByteCount = firstReadByteCount
    }

    /// The logical offset of the next record header.
    var offset: UInt64 { Self.logicalOffset(filePosition: position, baseOffset: baseOffset) }

    static func logicalOffset(filePosition: UInt64, baseOffset: UInt64) -> UInt64 {
        baseOffset + filePosition - UInt64(FormatConstants.segmentHeaderByteCount)
    }

    static func filePosition(logicalOffset: UInt64, baseOffset: UInt64) -> UInt64 {
        logicalOffset - baseOffset + UInt64(FormatConstants.segmentHeaderByteCount)
    }

    /// What the scanner found at its position: a record (as `Record`: a ``LogRecord``, or what a
    /// caller made of it in place), or why not.
    enum Found<Record> {
        /// A record whose header and payload check out; the scanner moved past it.
        case record(Record)
        /// The header is all zeros or the file ends exactly here: the end of the records.
        case end
        /// Not a good record; the scanner stays put. `header` is set when the header itself was
        /// valid (then the payload is short, fails its CRC or does not decompress).
        case bad(reason: String, header: RecordHeader?)
        /// A checksummed header this version refuses (unknown type or flags).
        case unsupported(String)
    }

    typealias Step = Found<LogRecord>

    /// Reads the record at the position. With `decodesPayload` false the payload is checked but
    /// not decompressed (and `LogRecord.payload` is empty).
    mutating func next(decodesPayload: Bool = true) throws(LogError) -> Step {
        try next(decodesPayload: decodesPayload) { LogRecord($0) }
    }

    /// Reads the record at the position and hands it to `body` in place (its payload where it
    /// lies in the scanner's buffer, or decompressed into the scanner's reusable buffer; empty
    /// without `decodesPayload`) once its header and payload check out. The view is valid only
    /// during the call.
    @inline(__always)
    mutating func next<Record>(
        decodesPayload: Bool, _ body: (LogRecordView) -> Record
    ) throws(LogError) -> Found<Record> {
        let headerByteCount = FormatConstants.recordHeaderByteCount
        let available = try fill(byteCount: headerByteCount)
        if available == 0 { return .end }
        let start = Int(position - bufferStart)
        if available < headerByteCount {
            let tail = buffer[start..<(start + available)]
            if tail.allSatisfy({ $0 == 0 }) { return .end }
            return .bad(reason: "file ends \(available) bytes into a record header", header: nil)
        }
        switch headerHere() {
        case .zeros: return .end
        case .invalid(let reason): return .bad(reason: reason, header: nil)
        case .unsupported(let reason): return .unsupported(reason)
        case .valid(let header):
            return try payload(of: header, decodes: decodesPayload, body)
        }
    }

    @inline(__always)
    private mutating func payload<Record>(
        of header: RecordHeader, decodes: Bool, _ body: (LogRecordView) -> Record
    ) throws(LogError) -> Found<Record> {
        let total = Int(header.recordByteCount)
        let available = try fill(byteCount: total)
        guard available == total else {
            return .bad(reason: "file ends \(available) bytes into a \(total)-byte record", header: header)
        }
        let payloadStart = Int(position - bufferStart) + FormatConstants.recordHeaderByteCount
        let statedDurableEnd =
            formatVersion >= FormatConstants.durableEndStatementVersion ? header.statedDurableEnd : nil
        let view = { (payload: UnsafeRawBufferPointer) in
            LogRecordView(
                offset: header.offset, type: header.type, payload: payload, payloadCRC: header.payloadCRC,
                recordByteCount: header.recordByteCount, isCompressed: header.isCompressed,
                statedDurableEnd: statedDurableEnd,
                usesDictionary: header.flags & FormatConstants.flagDictionary != 0)
        }
        let crc = buffer.withUnsafeBytes { bytes in
            CRC32C.checksum(
                UnsafeRawBufferPointer(rebasing: bytes[payloadStart..<(payloadStart + Int(header.storedByteCount))]))
        }
        guard crc == header.payloadCRC else {
            return .bad(
                reason: "payload checksum mismatch (stored \(hex(header.payloadCRC)), computed \(hex(crc)))",
                header: header)
        }
        // The payload is as written: now its segment's dictionary, if it was compressed with it
        // (looked up once per scanner: through the shared lookup it was a lock and a retain and
        // release per record, a tenth of a replay).
        var dictionaryBytes: UnsafeRawBufferPointer?
        if decodes && header.flags & FormatConstants.flagDictionary != 0 {
            if heldDictionary == nil {
                switch try self.dictionary.lookup(handle: handle, baseOffset: baseOffset, formatVersion: formatVersion) {
                case .found(let found): heldDictionary = found
                case .missing(let why):
                    return .bad(reason: "record compressed with its segment's dictionary, but \(why)", header: header)
                }
            }
            // Valid while `heldDictionary` holds the dictionary: for the rest of this scanner.
            dictionaryBytes = heldDictionary!.bytes
        }
        let result: Found<Record> = buffer.withUnsafeBytes { bytes in
            let stored = UnsafeRawBufferPointer(
                rebasing: bytes[payloadStart..<(payloadStart + Int(header.storedByteCount))])
            guard decodes else { return .record(body(view(UnsafeRawBufferPointer(start: nil, count: 0)))) }
            guard header.isCompressed else { return .record(body(view(stored))) }
            // Decoding also catches a payload whose CRC matches but that does not decompress
            // (a writer bug): recovery, repair, reads and verify all decode.
            // Into the scanner's own buffer, reused from record to record: a replay of a million
            // compressed records allocated and zeroed an array for each.
            let count = Int(header.uncompressedByteCount)
            if decompressed.count < count {
                decompressed = [UInt8](
                    repeating: 0, count: min(max(count, 2 * decompressed.count), FormatConstants.recordByteCountMax))
            }
            // Decompressed and handed to `body` in one access to the buffer (a second access
            // retained and released it again: 3–6 % of a replay or a history fetch of compressed
            // records).
            return decompressed.withUnsafeMutableBytes { target -> Found<Record> in
                let decompressedBytes = UnsafeMutableRawBufferPointer(rebasing: target[0..<count])
                guard LZ4.decompress(stored, into: decompressedBytes, dictionary: dictionaryBytes) else {
                    return .bad(
                        reason: "payload does not decompress to \(header.uncompressedByteCount) bytes",
                        header: header)
                }
                return .record(body(view(UnsafeRawBufferPointer(decompressedBytes))))
            }
        }
        if case .record = result {
            // A segment's first record: the position test only, on the path of every record.
            if position == UInt64(FormatConstants.segmentHeaderByteCount) && decodes {
                keepIfDictionary(header, payloadStart: payloadStart)
            }
            position += header.recordByteCount
        }
        return result
    }

    /// A scan from the segment's start reads its dictionary record itself: kept, so the first
    /// record that needs it does not read the same record again (FORMAT.md §6.8: one read per
    /// segment). Out of line: a check per record in the scan loop cost 3.5 ns of each (P5's
    /// open from a checkpoint, whose recovery scans a million records).
    @inline(never)
    private mutating func keepIfDictionary(_ header: RecordHeader, payloadStart: Int) {
        guard heldDictionary == nil, header.type == .dictionary, formatVersion >= FormatConstants.dictionaryVersion
        else { return }
        let count = Int(header.uncompressedByteCount)
        heldDictionary =
            header.isCompressed
            ? decompressed.withUnsafeBytes {
                dictionary.adopt(UnsafeRawBufferPointer(rebasing: $0[0..<count]), recordByteCount: header.recordByteCount)
            }
            : buffer.withUnsafeBytes {
                dictionary.adopt(
                    UnsafeRawBufferPointer(rebasing: $0[payloadStart..<(payloadStart + count)]),
                    recordByteCount: header.recordByteCount)
            }
    }

    /// Makes `buffer` hold `byteCount` bytes from `position` if the file has them; returns how
    /// many it holds (fewer only at the end of the file).
    private mutating func fill(byteCount: Int) throws(LogError) -> Int {
        if position >= bufferStart && Int(position - bufferStart) + byteCount <= buffer.count { return byteCount }
        let readCount = max(byteCount, readByteCount)
        readByteCount = min(readByteCount * 2, Self.chunkByteCount)
        if buffer.count < readCount { buffer = [UInt8](repeating: 0, count: readCount) }
        bufferStart = position
        let got: Int
        do {
            got = try handle.read(into: &buffer, range: 0..<readCount, at: position)
        } catch {
            // A read error is never a torn tail: it is reported as what it is.
            throw LogError.io(error, "Reading the log")
        }
        // Forget bytes past what was read so a later fill does not take stale ones for data.
        buffer.removeSubrange(got...)
        return min(got, byteCount)
    }

    /// Moves forward by record headers alone to the first record starting at or after the
    /// logical offset `target` — where a reader asked to start inside a record, or past the index
    /// entry it starts from, begins. Each header is checked (its CRC, and that it names its own
    /// offset); the payloads are neither checked nor decompressed (they are not read). Stays at
    /// anything but a good header, for the scan to read and report as it would have.
    mutating func hopHeaders(before target: UInt64) throws(LogError) {
        let headerByteCount = FormatConstants.recordHeaderByteCount
        // Bounded by `target`: each pass moves past one record.
        while offset < target {
            guard try fill(byteCount: headerByteCount) == headerByteCount, case .valid(let header) = headerHere() else {
                return
            }
            position += header.recordByteCount
        }
    }

    /// The record header at the position, whose 32 bytes the buffer holds (`fill`), checked as
    /// naming this offset.
    private func headerHere() -> RecordHeader.Decoded {
        let start = Int(position - bufferStart)
        return buffer.withUnsafeBytes { bytes in
            RecordHeader.decode(
                UnsafeRawBufferPointer(rebasing: bytes[start..<(start + FormatConstants.recordHeaderByteCount)]),
                expectedOffset: offset, formatVersion: formatVersion, baseOffset: baseOffset)
        }
    }

    /// Moves to a file position (for example an index entry) and drops the buffer if needed.
    mutating func seek(toFilePosition newPosition: UInt64) {
        position = newPosition
    }
}

/// The dictionary of one segment, found on first need and then kept: the segment's first record
/// when that is a dictionary record (FORMAT.md §6.8). Shared by the writer and the readers of a
/// ``SegmentFile``. A first record that is not there yet (zeros: an empty last segment) is not
/// remembered — the record a writer puts there may still be a dictionary. A damaged one is: a
/// reader meets a record that needs the dictionary only after its writer wrote the dictionary,
/// so a bad first record then is damage, and is not read again for every record that needs it.
final class SegmentDictionary: Sendable {
    /// What a lookup found: the dictionary, or why the segment has none a record could use.
    enum Lookup {
        case found(RecordDictionary)
        case missing(String)
    }

    /// `nil`: not looked up yet (or the first record was not there yet).
    private let state: Mutex<Lookup?>

    init(_ state: Lookup? = nil) { self.state = Mutex(state) }

    /// The dictionary if it was looked up (or set) and exists.
    var knownDictionary: RecordDictionary? {
        state.withLock { state in if case .found(let dictionary) = state { dictionary } else { nil } }
    }

    /// A writer that just wrote the segment's dictionary as its first record.
    func set(_ dictionary: RecordDictionary) {
        state.withLock { $0 = .found(dictionary) }
    }

    /// A scanner that read the segment's first record — a valid dictionary record, `payload` —
    /// itself: the segment's dictionary, kept unless a lookup or the writer got there first
    /// (then that one, the same bytes). `nil` when what is known says otherwise (a damaged first
    /// record remembered by a lookup, or the placeholder of the lookup's own scanner).
    func adopt(_ payload: UnsafeRawBufferPointer, recordByteCount: UInt64) -> RecordDictionary? {
        guard (1...FormatConstants.dictionaryByteCountMax).contains(payload.count) else { return nil }
        if let known = state.withLock({ $0 }) {
            if case .found(let dictionary) = known { return dictionary }
            return nil
        }
        let made = RecordDictionary(payload, recordByteCount: recordByteCount)
        return state.withLock { state in
            if state == nil { state = .found(made) }
            if case .found(let dictionary) = state { return dictionary }
            return nil
        }
    }

    /// The segment's dictionary, reading the segment's first record the first time.
    func lookup(handle: any FileHandle, baseOffset: UInt64, formatVersion: UInt32) throws(LogError) -> Lookup {
        if let known = state.withLock({ $0 }) { return known }
        // A dictionary never uses one: the reader of the first record has none to look up.
        var scanner = SegmentScanner(
            handle: handle, baseOffset: baseOffset, formatVersion: formatVersion,
            dictionary: SegmentDictionary(.missing("a dictionary is never compressed with one")))
        let found: Lookup
        switch try scanner.next(decodesPayload: true) {
        case .end:
            return .missing("the segment holds no record yet")  // not remembered
        case .bad(let reason, _), .unsupported(let reason):
            found = .missing("the segment's first record, its dictionary, is damaged: \(reason)")
        case .record(let record):
            if record.type == .dictionary && (1...FormatConstants.dictionaryByteCountMax).contains(record.payload.count) {
                found = .found(RecordDictionary(record.payload, recordByteCount: record.recordByteCount))
            } else {
                found = .missing("the segment's first record is not a dictionary")
            }
        }
        // Two readers may look it up at once: both read the same bytes; the first one kept wins.
        return state.withLock { state in
            if state == nil { state = found }
            return state!
        }
    }
}
