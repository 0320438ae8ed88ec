import CCRC32C

/// CRC32C (Castagnoli), the checksum of every header and payload.
/// Known answer: `CRC32C.checksum("123456789".utf8) == 0xE306_9283`.
public enum CRC32C {
    /// The checksum of `bytes`.
    @inlinable
    public static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        extend(0, bytes)
    }

    /// Extends `crc` (a previous result, or 0) over `bytes`.
    public static func extend(_ crc: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return crc }
        return ccrc32c_extend(crc, base, bytes.count)
    }

    /// The checksum of a byte collection.
    public static func checksum<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> UInt32 {
        if let result = bytes.withContiguousStorageIfAvailable({ extend(0, UnsafeRawBufferPointer($0)) }) {
            return result
        }
        let array = Array(bytes)
        return array.withUnsafeBytes { extend(0, $0) }
    }

    /// The portable (slicing-by-8) path, for tests that compare it with the hardware path.
    public static func portableChecksum(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBytes { buffer in
            guard let base = buffer.baseAddress, buffer.count > 0 else { return 0 }
            return ccrc32c_extend_portable(0, base, buffer.count)
        }
    }

    /// Whether the SSE4.2 instruction is in use on this CPU.
    public static var usesHardware: Bool { ccrc32c_hardware_available() != 0 }
}
