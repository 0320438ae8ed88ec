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
/// compression runs in a working state of its own that refers to it, so compressions may run
/// concurrently.
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
        for state in working.withLock({ $0 }) { LZ4_freeStream(state.stream) }
        bytes.deallocate()
    }

    /// Idle working states, one per compression running at once (kept up to a few).
    private let working = Mutex<[WorkingState]>([])

    /// A working state handed from one compression to the next: used by one at a time.
    private struct WorkingState: @unchecked Sendable {
        let stream: UnsafeMutablePointer<LZ4_stream_t>
    }

    /// Compresses `source` against the dictionary if that makes it smaller (`nil` otherwise, as
    /// ``LZ4/compressIfSmaller(_:)``).
    public func compressIfSmaller(_ source: UnsafeRawBufferPointer) -> [UInt8]? {
        LZ4.smallerBlock(of: source) { compressIfSmaller(source, into: $0) }
    }

    /// Compresses `source` against the dictionary into `target` if the block fits it and is
    /// smaller than `source`; returns the block's byte count, or 0 (as
    /// ``LZ4/compressIfSmaller(_:into:)``).
    public func compressIfSmaller(_ source: UnsafeRawBufferPointer, into target: UnsafeMutableRawBufferPointer) -> Int {
        guard source.count > 1, source.count <= Int(LZ4_MAX_INPUT_SIZE) else { return 0 }
        let capacity = min(source.count - 1, target.count)
        guard capacity > 0 else { return 0 }
        let dictionaryStream = loaded.withLock { stream in
            if let stream { return stream }
            let made = LZ4_createStream()!
            LZ4_loadDict(made, bytes.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(bytes.count))
            stream = made
            return made
        }
        let state = working.withLock { $0.popLast() } ?? WorkingState(stream: LZ4_createStream()!)
        let stream = state.stream
        defer {
            let kept = working.withLock { idle in
                guard idle.count < Self.idleWorkingStatesMax else { return false }
                idle.append(state)
                return true
            }
            if !kept { LZ4_freeStream(stream) }
        }
        if Self.attaches {
            // LZ4 hashes nothing of a dictionary under 8 bytes; lz4's attach then attaches none.
            if bytes.count >= 8 { Self.attach(dictionaryStream, to: stream) } else { LZ4_resetStream_fast(stream) }
        } else {
            // Another liblz4 than the one whose layout `attach` writes: copy the hashed state.
            stream.update(from: dictionaryStream, count: 1)
        }
        let written = LZ4_compress_fast_continue(
            stream, source.baseAddress!.assumingMemoryBound(to: CChar.self),
            target.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(source.count), Int32(capacity), 1)
        return max(0, Int(written))
    }

    static let idleWorkingStatesMax = 8

    /// Whether `attach` may write `LZ4_stream_t_internal`'s fields: the library running is one
    /// whose layout is the header's (1.9.3 to 1.10: `dictionary`, `dictCtx`, `currentOffset`
    /// after the hash table; 1.9.0–1.9.2 ordered them otherwise, under the same soname). Else
    /// each compression copies the dictionary's hashed state, as before.
    static let attaches: Bool = {
        let running = Int(LZ4_versionNumber())
        let header = Int(LZ4_VERSION_MAJOR) * 10_000 + Int(LZ4_VERSION_MINOR) * 100 + Int(LZ4_VERSION_RELEASE)
        return running == header && (10_903...11_099).contains(running)
    }()

    private static let currentOffsetField = MemoryLayout<LZ4_stream_t_internal>.offset(of: \.currentOffset)!
    private static let dictCtxField = MemoryLayout<LZ4_stream_t_internal>.offset(of: \.dictCtx)!

    /// Readies `stream` for one block compressed against the dictionary `dictionaryStream` has
    /// hashed, without copying that hash table (16 KiB: copying it was most of a small record's
    /// compression, 0.7 µs of a 7 µs save). This is liblz4's `LZ4_resetStream_fast` followed by
    /// `LZ4_attach_dictionary` — which the system's shared library does not export (it is in
    /// lz4.h's static-linking-only section) — written as lz4.c 1.9 implements it, on the fields
    /// lz4.h declares (`LZ4_stream_t_internal`): the working state refers to the dictionary's
    /// table (`dictCtx`), and LZ4 reads it without writing (blocks over 4 KiB copy it first).
    private static func attach(
        _ dictionaryStream: UnsafeMutablePointer<LZ4_stream_t>, to stream: UnsafeMutablePointer<LZ4_stream_t>
    ) {
        LZ4_resetStream_fast(stream)
        // `internal_donotuse` is the union's only member with state: it starts at the union's start.
        let state = UnsafeMutableRawPointer(stream)
        let currentOffset = currentOffsetField
        // A working table at offset 0 would never look in the dictionary's (no entry can say "miss").
        if state.load(fromByteOffset: currentOffset, as: UInt32.self) == 0 {
            state.storeBytes(of: 64 * 1024, toByteOffset: currentOffset, as: UInt32.self)
        }
        let dictionary = UnsafeRawPointer(dictionaryStream).assumingMemoryBound(to: LZ4_stream_t_internal.self)
        state.storeBytes(
            of: Optional(dictionary), toByteOffset: dictCtxField,
            as: UnsafePointer<LZ4_stream_t_internal>?.self)
    }
}
