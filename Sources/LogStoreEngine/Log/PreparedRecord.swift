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
        let compressed =
            !compresses ? nil : dictionary.map { $0.compressIfSmaller(payload) } ?? LZ4.compressIfSmaller(payload)
        let usesDictionary = compressed != nil && dictionary != nil
        var header = RecordHeader(
            payloadCRC: 0, offset: 0, storedByteCount: 0,
            uncompressedByteCount: UInt32(payload.count), type: type,
            flags: compressed == nil
                ? 0 : FormatConstants.flagCompressedLZ4 | (usesDictionary ? FormatConstants.flagDictionary : 0),
            dictionaryID: usesDictionary ? FormatConstants.segmentDictionaryID : 0)
        var writer = ByteWriter(capacity: FormatConstants.recordHeaderByteCount + (compressed?.count ?? payload.count))
        writer.writeZeros(FormatConstants.recordHeaderByteCount)
        if let compressed {
            writer.write(bytes: compressed)
        } else {
            writer.write(bytes: payload)
        }
        header.storedByteCount = UInt32(writer.count - FormatConstants.recordHeaderByteCount)
        header.payloadCRC = writer.bytes.withUnsafeBytes { buffer in
            CRC32C.checksum(UnsafeRawBufferPointer(rebasing: buffer[FormatConstants.recordHeaderByteCount...]))
        }
        self.header = header
        self.bytes = writer.bytes
    }

    /// ``init(payload:type:compresses:dictionary:)`` over any collection of bytes (read in place
    /// when it is contiguous, copied into an array once otherwise).
    static func encoding(
        _ payload: some Collection<UInt8>, type: RecordType, compresses: Bool, dictionary: RecordDictionary? = nil
    ) throws(LogError) -> PreparedRecord {
        let encode = { (buffer: UnsafeRawBufferPointer) -> Result<PreparedRecord, LogError> in
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
        var writer = ByteWriter(capacity: FormatConstants.recordHeaderByteCount)
        header.encode(into: &writer)
        bytes.withUnsafeMutableBytes { target in
            writer.bytes.withUnsafeBytes { source in
                target.baseAddress!.copyMemory(from: source.baseAddress!, byteCount: source.count)
            }
        }
    }
}
