import Foundation
import LogStoreEngine

/// Strings decoded from equal bytes share one storage: a direct-mapped cache holding, per bucket,
/// the last string decoded there, so a value that repeats across rows (a city, a status, a
/// category) is kept once where every row had a copy of its own (64 bytes of heap for a 16–31
/// byte string; P8's fixture repeats eight destinations over 1M Trips).
///
/// Only strings longer than a `String` holds inline (15 UTF-8 bytes) and at most 256 bytes long
/// are looked up: shorter ones allocate nothing, longer ones seldom repeat. A string is reused
/// only when its bytes equal the bytes read, so the result is the string decoding them would
/// make; anything but UTF-8 is still refused (``ValueCodec/string(_:)`` decodes every miss).
///
/// Not shared between threads: one decode (a checkpoint's rows, a replay's fold) owns one.
final class StringInterner {
    private static let bucketBits = 10
    /// The strings last decoded per bucket ("" when none); made at the first string looked up, so
    /// a decode that meets none (a follower's refresh of a few records) allocates nothing.
    private var buckets: [String] = []

    init() {}

    func string(_ bytes: UnsafeRawBufferPointer) throws(ByteReaderError) -> String {
        guard bytes.count > 15, bytes.count <= 256 else { return try ValueCodec.string(bytes) }
        if buckets.isEmpty { buckets = [String](repeating: "", count: 1 << Self.bucketBits) }
        let bucket = Self.bucket(of: bytes)
        let cached = buckets[bucket]
        let same =
            cached.utf8.count == bytes.count
            && cached.utf8.withContiguousStorageIfAvailable { cached in
                memcmp(cached.baseAddress!, bytes.baseAddress!, bytes.count) == 0
            } == true
        if same { return cached }
        let decoded = try ValueCodec.string(bytes)
        buckets[bucket] = decoded
        return decoded
    }

    /// The bucket of 16 or more bytes: their first and last eight and their count, mixed.
    @inline(__always)
    private static func bucket(of bytes: UnsafeRawBufferPointer) -> Int {
        let first = bytes.loadUnaligned(as: UInt64.self)
        let last = bytes.loadUnaligned(fromByteOffset: bytes.count - 8, as: UInt64.self)
        var mixed = (first &* 0x9E37_79B9_7F4A_7C15) ^ (last &+ UInt64(bytes.count))
        mixed = (mixed ^ (mixed >> 29)) &* 0xBF58_476D_1CE4_E5B9
        return Int(truncatingIfNeeded: mixed >> UInt64(64 - bucketBits))
    }
}
