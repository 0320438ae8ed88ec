import Foundation

/// Reads little-endian integers, varints and length-prefixed bytes from a buffer, checking every
/// length against what is left before reading it.
public struct ByteReader {
    private let bytes: UnsafeRawBufferPointer
    public private(set) var position: Int

    /// Reads `bytes`; the buffer must outlive the reader.
    public init(_ bytes: UnsafeRawBufferPointer, position: Int = 0) {
        self.bytes = bytes
        self.position = position
    }

    public var remainingByteCount: Int { bytes.count - position }
    public var isAtEnd: Bool { position >= bytes.count }

    public mutating func readByte() throws(ByteReaderError) -> UInt8 {
        try require(1)
        defer { position += 1 }
        return bytes[position]
    }

    public mutating func read<T: FixedWidthInteger>(_: T.Type = T.self) throws(ByteReaderError) -> T {
        let size = MemoryLayout<T>.size
        try require(size)
        var value: T = 0
        withUnsafeMutableBytes(of: &value) { target in
            target.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[position..<(position + size)]))
        }
        position += size
        return T(littleEndian: value)
    }

    public mutating func readBytes(_ count: Int) throws(ByteReaderError) -> [UInt8] {
        try require(count)
        defer { position += count }
        return Array(bytes[position..<(position + count)])
    }

    public mutating func skip(_ count: Int) throws(ByteReaderError) {
        try require(count)
        position += count
    }

    public mutating func readVarint() throws(ByteReaderError) -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        // At most 10 bytes encode 64 bits; an 11th continuation byte is malformed.
        for _ in 0..<10 {
            let byte = try readByte()
            result |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 {
                if shift == 63 && byte > 1 { throw .malformed("varint overflows 64 bits") }
                return result
            }
            shift += 7
        }
        throw .malformed("varint longer than 10 bytes")
    }

    public mutating func readSignedVarint() throws(ByteReaderError) -> Int64 {
        let raw = try readVarint()
        return Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1)
    }

    /// A varint byte count followed by that many bytes; the count is checked against what is
    /// left before anything is allocated.
    public mutating func readLengthPrefixed() throws(ByteReaderError) -> [UInt8] {
        let count = try readVarint()
        guard count <= UInt64(remainingByteCount) else {
            throw .truncated(needed: Int(clamping: count), available: remainingByteCount)
        }
        return try readBytes(Int(count))
    }

    /// Like ``readLengthPrefixed()``, without copying: the bytes where they are in the buffer,
    /// valid only while it is (inside the ``read(_:_:)`` body). A replay reads millions of
    /// strings; copying each into an array first was an allocation and a free per string.
    public mutating func readLengthPrefixedInPlace() throws(ByteReaderError) -> UnsafeRawBufferPointer {
        let count = try readVarint()
        guard count <= UInt64(remainingByteCount) else {
            throw .truncated(needed: Int(clamping: count), available: remainingByteCount)
        }
        defer { position += Int(count) }
        return UnsafeRawBufferPointer(rebasing: bytes[position..<(position + Int(count))])
    }

    /// 16 bytes in RFC 4122 order as a UUID, without the array ``readBytes(_:)`` makes.
    public mutating func readUUID() throws(ByteReaderError) -> UUID {
        try require(16)
        var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &value) { target in
            target.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[position..<(position + 16)]))
        }
        position += 16
        return UUID(uuid: value)
    }

    private func require(_ count: Int) throws(ByteReaderError) {
        guard count >= 0, count <= remainingByteCount else {
            throw .truncated(needed: count, available: remainingByteCount)
        }
    }
}

/// A decoding failure: the bytes end early or do not follow the grammar.
public enum ByteReaderError: Error, Sendable, Equatable, CustomStringConvertible {
    case truncated(needed: Int, available: Int)
    case malformed(String)

    public var description: String {
        switch self {
        case .truncated(let needed, let available): "needed \(needed) more bytes, only \(available) left"
        case .malformed(let what): what
        }
    }
}

extension ByteReader {
    /// Runs `body` with a reader over `bytes` (a typed-throws-friendly `withUnsafeBytes`).
    public static func read<T>(_ bytes: [UInt8], _ body: (inout ByteReader) throws(ByteReaderError) -> T)
        throws(ByteReaderError) -> T
    {
        let result = bytes.withUnsafeBytes { buffer -> Result<T, ByteReaderError> in
            var reader = ByteReader(buffer)
            do throws(ByteReaderError) { return .success(try body(&reader)) } catch { return .failure(error) }
        }
        return try result.get()
    }
}
