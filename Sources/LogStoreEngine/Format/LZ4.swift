import CLZ4

/// LZ4 block compression (liblz4's block API, no frame), used for record payloads.
public enum LZ4 {
    /// Compresses `source` if that makes it smaller. Returns `nil` when the compressed block
    /// would not be smaller than the input (incompressible or tiny payloads are stored raw).
    public static func compressIfSmaller(_ source: UnsafeRawBufferPointer) -> [UInt8]? {
        smallerBlock(of: source) { compressIfSmaller(source, into: $0) }
    }

    /// The block `compress` writes into room for one byte less than `source` (returning its
    /// byte count, 0 for none), as an array; `nil` when there is none.
    static func smallerBlock(
        of source: UnsafeRawBufferPointer, _ compress: (UnsafeMutableRawBufferPointer) -> Int
    ) -> [UInt8]? {
        guard source.count > 1, source.count <= Int(LZ4_MAX_INPUT_SIZE) else { return nil }
        // Uninitialised output: LZ4 writes what it returns, and only that is kept.
        let destination = [UInt8](unsafeUninitializedCapacity: source.count - 1) { target, initializedCount in
            initializedCount = compress(UnsafeMutableRawBufferPointer(target))
        }
        return destination.isEmpty ? nil : destination
    }

    /// Compresses `source` into `target` if the block fits it and is smaller than `source`;
    /// returns the block's byte count, or 0 (incompressible or tiny payloads are stored raw).
    /// `target` may be uninitialised: only the bytes counted are written to be read.
    public static func compressIfSmaller(_ source: UnsafeRawBufferPointer, into target: UnsafeMutableRawBufferPointer)
        -> Int
    {
        guard source.count > 0, source.count <= Int(LZ4_MAX_INPUT_SIZE) else { return 0 }
        // A block one byte smaller than the input is the most we accept; LZ4 stops when it
        // would exceed the destination capacity and returns 0.
        let capacity = min(source.count - 1, target.count)
        guard capacity > 0 else { return 0 }
        let written = LZ4_compress_default(
            source.baseAddress!.assumingMemoryBound(to: CChar.self),
            target.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(source.count), Int32(capacity))
        return max(0, Int(written))
    }

    /// Decompresses a block into exactly all of `destination` (1 byte to the record limit), and
    /// says whether it did; never writes outside it. With `dictionary` (a ``RecordDictionary``'s
    /// bytes), the block was compressed against it.
    public static func decompress(
        _ block: UnsafeRawBufferPointer, into destination: UnsafeMutableRawBufferPointer,
        dictionary: UnsafeRawBufferPointer? = nil
    ) -> Bool {
        guard destination.count > 0, block.count > 0, destination.count <= FormatConstants.recordByteCountMax
        else { return false }
        let source = block.baseAddress!.assumingMemoryBound(to: CChar.self)
        let output = destination.baseAddress!.assumingMemoryBound(to: CChar.self)
        let written =
            if let dictionary {
                LZ4_decompress_safe_usingDict(
                    source, output, Int32(block.count), Int32(destination.count),
                    dictionary.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(dictionary.count))
            } else {
                LZ4_decompress_safe(source, output, Int32(block.count), Int32(destination.count))
            }
        return written == Int32(destination.count)
    }

    /// Decompresses a block into exactly `decompressedByteCount` bytes, or returns `nil` when the
    /// block is malformed or does not decode to exactly that many bytes. Never writes outside
    /// the destination (LZ4_decompress_safe). With `dictionary`, as above.
    public static func decompress(
        _ block: UnsafeRawBufferPointer, decompressedByteCount: Int, dictionary: RecordDictionary? = nil
    ) -> [UInt8]? {
        guard decompressedByteCount > 0, block.count > 0,
            decompressedByteCount <= FormatConstants.recordByteCountMax
        else { return nil }
        var destination = [UInt8](repeating: 0, count: decompressedByteCount)
        let done = destination.withUnsafeMutableBytes { decompress(block, into: $0, dictionary: dictionary?.bytes) }
        return done ? destination : nil
    }
}
