/// Appends little-endian integers, varints and length-prefixed bytes to a byte array.
public struct ByteWriter: Sendable {
    public private(set) var bytes: [UInt8]

    public init(capacity: Int = 64) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    public var count: Int { bytes.count }

    /// Makes room for `byteCount` more bytes at once (nothing when there is room already).
    public mutating func reserve(_ byteCount: Int) { bytes.reserveCapacity(bytes.count + byteCount) }

    /// The bytes the writer's buffer holds room for.
    public var capacity: Int { bytes.capacity }

    /// Empties the writer for the next bytes, keeping its buffer unless it grew past
    /// `keptCapacityMax` bytes (then it starts small again: one large record must not keep its
    /// size alive).
    public mutating func reset(keepingCapacityUpTo keptCapacityMax: Int) {
        if bytes.capacity <= keptCapacityMax {
            bytes.removeAll(keepingCapacity: true)
        } else {
            bytes = []
        }
    }

    public mutating func write(_ value: UInt8) { bytes.append(value) }

    public mutating func write<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    public mutating func write(bytes other: some Sequence<UInt8>) { bytes.append(contentsOf: other) }

    /// Appends `count` zero bytes.
    public mutating func writeZeros(_ count: Int) { bytes.append(contentsOf: repeatElement(0, count: count)) }

    /// Unsigned LEB128: 7 bits a byte, low bits first, high bit set on every byte but the last.
    public mutating func writeVarint(_ value: UInt64) {
        var remaining = value
        while remaining >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: remaining) | 0x80)
            remaining >>= 7
        }
        bytes.append(UInt8(remaining))
    }

    /// Zig-zag encoded signed varint.
    public mutating func writeSignedVarint(_ value: Int64) {
        writeVarint(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    /// A varint byte count followed by the bytes.
    public mutating func writeLengthPrefixed(_ other: some Collection<UInt8>) {
        writeVarint(UInt64(other.count))
        bytes.append(contentsOf: other)
    }

    /// Overwrites a little-endian integer at `index` (for back-patching a checksum).
    public mutating func patch<T: FixedWidthInteger>(_ value: T, at index: Int) {
        withUnsafeBytes(of: value.littleEndian) { source in
            for (offset, byte) in source.enumerated() { bytes[index + offset] = byte }
        }
    }
}
