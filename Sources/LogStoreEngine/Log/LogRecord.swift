/// One record read back from the log: checked (both CRCs) and decompressed.
public struct LogRecord: Sendable, Equatable {
    /// The record's logical offset: where it starts in the log. History tokens are these.
    public var offset: UInt64
    public var type: RecordType
    /// The uncompressed payload.
    public var payload: [UInt8]
    /// CRC32C of the stored payload bytes (the `check` of a history token).
    public var payloadCRC: UInt32
    /// Bytes the record takes in its segment, header included.
    public var recordByteCount: UInt64
    /// Whether the payload was stored LZ4-compressed.
    public var isCompressed: Bool
    /// The durable end its writer knew when it wrote the record (format version 2; `nil` for a
    /// version-1 record): everything before it had been made durable.
    public var statedDurableEnd: UInt64? = nil
    /// Whether it was compressed against its segment's dictionary (FORMAT.md §6.8).
    public var usesDictionary = false

    /// The logical offset just past the record: where the next one starts.
    public var endOffset: UInt64 { offset + recordByteCount }
}

/// A record read in place (``LogIterator/next(inPlace:)``, ``RecordFileReader/nextInPlace(_:)``):
/// checked like a ``LogRecord``, its payload where it lies in the reader's buffer (or
/// decompressed into its reusable buffer). A replay reads a million records; copying each
/// payload into an array of its own first was an allocation, a copy and a free per record (and a
/// checkpoint's ~1 MB chunks, read into new arrays, stayed as free heap between an open's rows).
/// Valid only during the call that hands it out: the package's own readers (replay, the
/// checkpoint reader) use it, not the public API.
package struct LogRecordView {
    package var offset: UInt64
    package var type: RecordType
    /// The uncompressed payload (empty when the reader was asked not to decode payloads).
    package var payload: UnsafeRawBufferPointer
    package var payloadCRC: UInt32
    package var recordByteCount: UInt64
    package var isCompressed: Bool
    package var statedDurableEnd: UInt64?
    package var usesDictionary = false

    package var endOffset: UInt64 { offset + recordByteCount }
}

extension LogRecord {
    /// The record, its payload copied out of the view.
    package init(_ view: LogRecordView) {
        self.init(
            offset: view.offset, type: view.type, payload: Array(view.payload), payloadCRC: view.payloadCRC,
            recordByteCount: view.recordByteCount, isCompressed: view.isCompressed,
            statedDurableEnd: view.statedDurableEnd, usesDictionary: view.usesDictionary)
    }
}

/// Where an append landed.
public struct LogPosition: Sendable, Hashable, Comparable {
    /// The record's logical offset.
    public var offset: UInt64
    /// The logical offset just past the record; durable once the durable end reaches it.
    public var endOffset: UInt64
    /// CRC32C of the stored payload.
    public var payloadCRC: UInt32

    public static func < (lhs: LogPosition, rhs: LogPosition) -> Bool { lhs.offset < rhs.offset }

    /// Where `record` lies (a record another process appended, folded by catch-up).
    public init(of record: LogRecord) {
        offset = record.offset
        endOffset = record.endOffset
        payloadCRC = record.payloadCRC
    }

    init(offset: UInt64, endOffset: UInt64, payloadCRC: UInt32) {
        self.offset = offset
        self.endOffset = endOffset
        self.payloadCRC = payloadCRC
    }
}
