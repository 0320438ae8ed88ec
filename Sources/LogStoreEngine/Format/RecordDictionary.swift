import CLZ4
import Synchronization

/// The LZ4 dictionary of one segment (FORMAT.md §6.8): the payload of the segment's first record
/// when that is a dictionary record. Records of the segment with flag bit 1 are LZ4 blocks
/// compressed against it; single records of a few hundred bytes barely compress alone (ratio
/// 0.997 measured) and shrink to about 0.4 against recent records of the same store.
///
/// The bytes live in memory of their own that never moves (LZ4's stream state points into it)
/// and never changes after `init`. Compressing needs a stream state that has hashed the
/// dictionary: made on first use (a reader only decompresses) and then only read — each
/// compression copies it into a scratch state, so compressions may run concurrently.
public final class RecordDictionary: @unchecked Sendable {
    /// The dictionary; immutable.
    public let bytes: UnsafeRawBufferPointer
    /// The byte count of the dictionary record in its segment (header included): where the
    /// segment's other records start.
    public let recordByteCount: UInt64
    /// The stream state with the dictionary loaded (`LZ4_loadDict`), made on first compression.
    private let loaded = Mutex<UnsafeMutablePointer<LZ4_stream_t>?>(nil)

    /// A dictionary of `bytes` (1 to ``FormatConstants/dictionaryByteCountMax`` bytes).
    public init(_ bytes: some Collection<UInt8>, recordByteCount: UInt64) {
        precondition(
            !bytes.isEmpty && bytes.count <= FormatConstants.dictionaryByteCountMax,
            "a dictionary holds 1 to \(FormatConstants.dictionaryByteCountMax) bytes")
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 16)
        _ = storage.initializeMemory(as: UInt8.self, from: bytes)
        self.bytes = UnsafeRawBufferPointer(storage)
        self.recordByteCount = recordByteCount
    }

    deinit {
        if let stream = loaded.withLock({ $0 }) { LZ4_freeStream(stream) }
        bytes.deallocate()
    }

    /// Compresses `source` against the dictionary if that makes it smaller (`nil` otherwise, as
    /// ``LZ4/compressIfSmaller(_:)``).
    public func compressIfSmaller(_ source: UnsafeRawBufferPointer) -> [UInt8]? {
        guard source.count > 1, source.count <= Int(LZ4_MAX_INPUT_SIZE) else { return nil }
        let dictionaryStream = loaded.withLock { stream in
            if let stream { return stream }
            let made = LZ4_createStream()!
            LZ4_loadDict(made, bytes.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(bytes.count))
            stream = made
            return made
        }
        let capacity = source.count - 1
        return withUnsafeTemporaryAllocation(of: LZ4_stream_t.self, capacity: 1) { scratch in
            // A copy of the loaded state is a state with the dictionary loaded (the way LZ4's own
            // examples reuse one dictionary for many independent blocks without hashing it again).
            scratch.baseAddress!.initialize(from: dictionaryStream, count: 1)
            let destination = [UInt8](unsafeUninitializedCapacity: capacity) { target, initializedCount in
                let written = LZ4_compress_fast_continue(
                    scratch.baseAddress!, source.baseAddress!.assumingMemoryBound(to: CChar.self),
                    UnsafeMutableRawPointer(target.baseAddress!).assumingMemoryBound(to: CChar.self),
                    Int32(source.count), Int32(capacity), 1)
                initializedCount = max(0, Int(written))
            }
            return destination.isEmpty ? nil : destination
        }
    }
}
