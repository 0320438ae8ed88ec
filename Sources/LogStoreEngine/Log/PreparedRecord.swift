/// A record encoded except for its offset: compressed and checksummed outside any lock, so the
/// writer's critical section only patches the offset and header CRC and issues one `pwrite`.
struct PreparedRecord {
    /// Header (offset and header CRC still zero) followed by the stored payload.
    private(set) var bytes: [UInt8]
    let header: RecordHeader

    var recordByteCount: UInt64 { UInt64(bytes.count) }

    /// The dictionary the payload was offered to (FORMAT.md §6.8): the record may go only into
    /// the segment that has it (or, when `nil`, into one without a dictionary).
    let dictionary: RecordDictionary?
    /// The payload was offered to LZ4 (``isCompressed``: and came out smaller).
    let triedCompression: Bool
    var isCompressed: Bool { header.flags & FormatConstants.flagCompressedLZ4 != 0 }

    /// Encodes `payload`, with `dictionary` (its segment's) when it compresses. Throws
    /// ``LogError/Code/recordTooLarge`` past the 16 MiB limit.
    init(
        payload: UnsafeRawBufferPointer, type: RecordType, compresses: Bool, dictionary: RecordDictionary? = nil
    ) throws(LogError) {
        precondition(type.rawValue != 0, "record type 0 is reserved: zeros are not data")
        guard payload.count <= FormatConstants.recordByteCountMax else {
            throw LogError(
                .recordTooLarge,
                "A record of \(payload.count) bytes exceeds the "
                    + "\(FormatConstants.recordByteCountMax)-byte maximum.", offset: nil)
        }
        precondition(dictionary == nil || type != .dictionary, "a dictionary is never compressed with one")
        self.dictionary = dictionary
        triedCompression = compresses
        // One buffer per record, made once: the header's 32 bytes (filled in by `assign`), then
        // the payload's LZ4 block — compressed straight into it — or the payload itself. (A
        // compressed array, a writer's array and a header's array took three allocations and
        // two copies of every record.)
        let headerByteCount = FormatConstants.recordHeaderByteCount
        var storedByteCount = 0
        var compressed = false
        bytes = [UInt8](unsafeUninitializedCapacity: headerByteCount + payload.count) { buffer, initializedCount in
            let target = UnsafeMutableRawBufferPointer(buffer)
            target.baseAddress!.initializeMemory(as: UInt8.self, repeating: 0, count: headerByteCount)
            let tail = UnsafeMutableRawBufferPointer(rebasing: target[headerByteCount...])
            if compresses {
                storedByteCount =
                    dictionary.map { $0.compressIfSmaller(payload, into: tail) } ?? LZ4.compressIfSmaller(payload, into: tail)
                compressed = storedByteCount > 0
            }
            if !compressed {
                if payload.count > 0 { tail.baseAddress!.copyMemory(from: payload.baseAddress!, byteCount: payload.count) }
                storedByteCount = payload.count
            }
            initializedCount = headerByteCount + storedByteCount
        }
        let usesDictionary = compressed && dictionary != nil
        header = RecordHeader(
            payloadCRC: bytes.withUnsafeBytes { CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[headerByteCount...])) },
            offset: 0, storedByteCount: UInt32(storedByteCount), uncompressedByteCount: UInt32(payload.count), type: type,
            flags: compressed
                ? FormatConstants.flagCompressedLZ4 | (usesDictionary ? FormatConstants.flagDictionary : 0) : 0,
            dictionaryID: usesDictionary ? FormatConstants.segmentDictionaryID : 0)
    }

    /// ``init(payload:type:compresses:dictionary:)`` over any collection of bytes (read in place
    /// when it is contiguous, copied into an array once otherwise).
    static func encoding(
        _ payload: some Collection<UInt8>, type: RecordType, compresses: Bool, dictionary: RecordDictionary? = nil
    ) throws(LogError) -> PreparedRecord {
        func encode(_ buffer: UnsafeRawBufferPointer) -> Result<PreparedRecord, LogError> {
            do throws(LogError) {
                return .success(try PreparedRecord(payload: buffer, type: type, compresses: compresses, dictionary: dictionary))
            } catch {
                return .failure(error)
            }
        }
        return try (payload.withContiguousStorageIfAvailable { encode(UnsafeRawBufferPointer($0)) }
            ?? Array(payload).withUnsafeBytes { encode($0) }).get()
    }

    /// Fills in the offset, the durable end the writer knows (FORMAT.md §6.1: at or after the
    /// segment's base, at or before `offset`; a checkpoint file passes `offset` itself) and the
    /// header CRC.
    mutating func assign(offset: UInt64, durableEnd: UInt64) {
        precondition(durableEnd <= offset && offset - durableEnd <= UInt64(UInt32.max), "a durable end out of reach")
        var header = self.header
        header.offset = offset
        header.durableEndDelta = UInt32(offset - durableEnd)
        bytes.withUnsafeMutableBytes { header.encode(to: $0) }
    }
}
