import Foundation

/// Reads little-endian integers, varints and length-prefixed bytes from a buffer, checking every
/// length against what is left before reading it.
///
/// Inlinable: the records are decoded in the LogStore module, and a call across the module
/// boundary per byte read (with `read(_:_:)` unspecialised, looking up generic metadata per
/// record) was a fifth of a history fetch.
public struct ByteReader {
    @usableFromInline let bytes: UnsafeRawBufferPointer
    @usableFromInline var offset: Int

    /// Where the next read starts.
    @inlinable public var position: Int { offset }

    /// Reads `bytes`; the buffer must outlive the reader.
    @inlinable public init(_ bytes: UnsafeRawBufferPointer, position: Int = 0) {
        self.bytes = bytes
        self.offset = position
    }

    @inlinable public var remainingByteCount: Int { bytes.count - offset }
    @inlinable public var isAtEnd: Bool { offset >= bytes.count }

    @inlinable public mutating func readByte() throws(ByteReaderError) -> UInt8 {
        try require(1)
        defer { offset += 1 }
        return bytes[offset]
    }

    @inlinable public mutating func read<T: FixedWidthInteger>(_: T.Type = T.self) throws(ByteReaderError) -> T {
        let size = MemoryLayout<T>.size
        try require(size)
        var value: T = 0
        withUnsafeMutableBytes(of: &value) { target in
            target.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + size)]))
        }
        offset += size
        return T(littleEndian: value)
    }

    @inlinable public mutating func readBytes(_ count: Int) throws(ByteReaderError) -> [UInt8] {
        try require(count)
        defer { offset += count }
        return Array(bytes[offset..<(offset + count)])
    }

    @inlinable public mutating func skip(_ count: Int) throws(ByteReaderError) {
        try require(count)
        offset += count
    }

    @inlinable public mutating func readVarint() throws(ByteReaderError) -> UInt64 {
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

    @inlinable public mutating func readSignedVarint() throws(ByteReaderError) -> Int64 {
        let raw = try readVarint()
        return Int64(bitPattern: raw >> 1) ^ -Int64(bitPattern: raw & 1)
    }

    /// A varint byte count followed by that many bytes; the count is checked against what is
    /// left before anything is allocated.
    @inlinable public mutating func readLengthPrefixed() throws(ByteReaderError) -> [UInt8] {
        Array(try readLengthPrefixedInPlace())
    }

    /// Like ``readLengthPrefixed()``, without copying: the bytes where they are in the buffer,
    /// valid only while it is (inside the ``read(_:_:)`` body). A replay reads millions of
    /// strings; copying each into an array first was an allocation and a free per string.
    @inlinable public mutating func readLengthPrefixedInPlace() throws(ByteReaderError) -> UnsafeRawBufferPointer {
        try readBytesInPlace(Int(clamping: try readVarint()))
    }

    /// The next `count` bytes where they are in the buffer, without copying (valid only while
    /// the buffer is).
    @inlinable public mutating func readBytesInPlace(_ count: Int) throws(ByteReaderError) -> UnsafeRawBufferPointer {
        try require(count)
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + count)])
    }

    /// 16 bytes in RFC 4122 order as a UUID, without the array ``readBytes(_:)`` makes.
    @inlinable public mutating func readUUID() throws(ByteReaderError) -> UUID {
        try require(16)
        var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &value) { target in
            target.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + 16)]))
        }
        offset += 16
        return UUID(uuid: value)
    }

    @inlinable func require(_ count: Int) throws(ByteReaderError) {
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
    /// Runs `body` with a reader over `bytes`.
    @inlinable public static func read<T>(_ bytes: [UInt8], _ body: (inout ByteReader) throws(ByteReaderError) -> T)
        throws(ByteReaderError) -> T
    {
        try withBytes(bytes) { buffer throws(ByteReaderError) in
            var reader = ByteReader(buffer)
            return try body(&reader)
        }
    }

    /// Runs `body` with the bytes of `bytes` (a typed-throws-friendly `withUnsafeBytes`).
    @inlinable public static func withBytes<T>(
        _ bytes: [UInt8], _ body: (UnsafeRawBufferPointer) throws(ByteReaderError) -> T
    ) throws(ByteReaderError) -> T {
        let result = bytes.withUnsafeBytes { buffer -> Result<T, ByteReaderError> in
            do throws(ByteReaderError) { return .success(try body(buffer)) } catch { return .failure(error) }
        }
        return try result.get()
    }
}
