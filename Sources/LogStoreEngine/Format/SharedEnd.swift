import Foundation

/// The 80-byte slot of the `coordination` file (FORMAT.md §10.1, DECISIONS.md D11): what the
/// writing process publishes for the processes that read the store beside it.
///
/// ```
/// 0  [8]  magic "LOGSTCOO"
/// 8  u32  version (1)
/// 12 u32  flags: bit 0 = failed (a sync failed; the writer cut the log back)
/// 16 [16] store UUID
/// 32 u64  epoch: bumped whenever records a reader may have seen can vanish (repair, cut-back)
/// 40 u64  change counter: +1 per publication
/// 48 u64  base offset of the last segment
/// 56 u64  visible end (the durable end in synchronous mode, else the written end)
/// 64 u64  maintenance counter: +1 whenever the writer moves the history low-water mark
/// 72 u32  reserved, zero
/// 76 u32  CRC32C of bytes 0..<76
/// ```
///
/// Never the source of truth: it is rebuilt by the writer at every open, and a reader checks
/// every record up to the visible end it states. It is written whole with one `pwrite`; a reader
/// that reads it while it is being written sees a CRC mismatch and reads again.
public struct SharedEnd: Sendable, Equatable {
    public static let byteCount = 80
    static let magic: [UInt8] = Array("LOGSTCOO".utf8)
    static let version: UInt32 = 1
    static let failedFlag: UInt32 = 1

    public var storeID: UUID
    public var epoch: UInt64
    public var changeCounter: UInt64
    public var lastSegmentBaseOffset: UInt64
    public var visibleEnd: UInt64
    public var maintenanceCounter: UInt64
    public var isFailed: Bool

    public init(
        storeID: UUID, epoch: UInt64, changeCounter: UInt64, lastSegmentBaseOffset: UInt64, visibleEnd: UInt64,
        maintenanceCounter: UInt64 = 0, isFailed: Bool = false
    ) {
        self.storeID = storeID
        self.epoch = epoch
        self.changeCounter = changeCounter
        self.lastSegmentBaseOffset = lastSegmentBaseOffset
        self.visibleEnd = visibleEnd
        self.maintenanceCounter = maintenanceCounter
        self.isFailed = isFailed
    }

    public func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: Self.byteCount)
        writer.write(bytes: Self.magic)
        writer.write(Self.version)
        writer.write(isFailed ? Self.failedFlag : 0)
        writer.write(bytes: storeID.bytes)
        writer.write(epoch)
        writer.write(changeCounter)
        writer.write(lastSegmentBaseOffset)
        writer.write(visibleEnd)
        writer.write(maintenanceCounter)
        writer.write(UInt32(0))
        writer.write(CRC32C.checksum(writer.bytes))
        precondition(writer.bytes.count == Self.byteCount, "the coordination slot is \(Self.byteCount) bytes")
        return writer.bytes
    }

    /// The slot, or `nil` when the bytes are not a whole, checked slot of this version (a file
    /// not yet written, a write in progress, or damage: the caller reads again or ignores it).
    public static func decode(_ bytes: [UInt8]) -> SharedEnd? {
        guard bytes.count >= byteCount, Array(bytes[0..<8]) == magic,
            CRC32C.checksum(bytes[0..<76]) == uint32(bytes, at: 76), uint32(bytes, at: 8) == version
        else { return nil }
        return SharedEnd(
            storeID: UUID(bytes: Array(bytes[16..<32])), epoch: uint64(bytes, at: 32),
            changeCounter: uint64(bytes, at: 40), lastSegmentBaseOffset: uint64(bytes, at: 48),
            visibleEnd: uint64(bytes, at: 56), maintenanceCounter: uint64(bytes, at: 64),
            isFailed: uint32(bytes, at: 12) & failedFlag != 0)
    }

    private static func uint32(_ bytes: [UInt8], at index: Int) -> UInt32 {
        (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[index + $1]) << (8 * $1) }
    }

    private static func uint64(_ bytes: [UInt8], at index: Int) -> UInt64 {
        (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[index + $1]) << (8 * $1) }
    }
}

/// The coordination file's second 80-byte slot, at offset 80 (FORMAT.md §10.2, DECISIONS.md D11
/// stage 2): the **turn slot**, written only by the process holding `TURN` in a store shared by
/// several writing processes. It states the written end W — every record before it is complete —
/// and the base of the segment holding W, as one pair under one CRC.
///
/// ```
/// 0  [8]  magic "LOGSTTRN"
/// 8  u32  version (1)
/// 12 u32  reserved, zero
/// 16 [16] store UUID
/// 32 u64  written end W
/// 40 u64  base offset of the segment holding W (a roller publishes the new base, W = that base,
///         before it creates the segment)
/// 48 u64  turn counter: +1 per publication
/// 56 [20] reserved, zero
/// 76 u32  CRC32C of bytes 0..<76
/// ```
public struct TurnSlot: Sendable, Equatable {
    public static let byteCount = 80
    public static let fileOffset: UInt64 = 80
    static let magic: [UInt8] = Array("LOGSTTRN".utf8)
    static let version: UInt32 = 1

    public var storeID: UUID
    public var writtenEnd: UInt64
    public var lastSegmentBaseOffset: UInt64
    public var turnCounter: UInt64

    public init(storeID: UUID, writtenEnd: UInt64, lastSegmentBaseOffset: UInt64, turnCounter: UInt64) {
        self.storeID = storeID
        self.writtenEnd = writtenEnd
        self.lastSegmentBaseOffset = lastSegmentBaseOffset
        self.turnCounter = turnCounter
    }

    public func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: Self.byteCount)
        writer.write(bytes: Self.magic)
        writer.write(Self.version)
        writer.write(UInt32(0))
        writer.write(bytes: storeID.bytes)
        writer.write(writtenEnd)
        writer.write(lastSegmentBaseOffset)
        writer.write(turnCounter)
        writer.write(bytes: [UInt8](repeating: 0, count: 20))
        writer.write(CRC32C.checksum(writer.bytes))
        precondition(writer.bytes.count == Self.byteCount, "the turn slot is \(Self.byteCount) bytes")
        return writer.bytes
    }

    /// The slot, or `nil` when the bytes are not a whole, checked slot of this version.
    public static func decode(_ bytes: [UInt8]) -> TurnSlot? {
        guard bytes.count >= byteCount, Array(bytes[0..<8]) == magic,
            CRC32C.checksum(bytes[0..<76]) == uint32(bytes, at: 76), uint32(bytes, at: 8) == version
        else { return nil }
        return TurnSlot(
            storeID: UUID(bytes: Array(bytes[16..<32])), writtenEnd: uint64(bytes, at: 32),
            lastSegmentBaseOffset: uint64(bytes, at: 40), turnCounter: uint64(bytes, at: 48))
    }

    private static func uint32(_ bytes: [UInt8], at index: Int) -> UInt32 {
        (0..<4).reduce(UInt32(0)) { $0 | UInt32(bytes[index + $1]) << (8 * $1) }
    }

    private static func uint64(_ bytes: [UInt8], at index: Int) -> UInt64 {
        (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[index + $1]) << (8 * $1) }
    }
}
