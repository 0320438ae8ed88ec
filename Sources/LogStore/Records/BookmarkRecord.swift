import Foundation
import LogStoreEngine

/// A consumer bookmark record in the log (type `bookmark`, DECISIONS.md D7; docs/FORMAT.md §6.5):
///
/// ```
/// u8 version (1) · u8 operation (1 set, 2 remove) · string name · token · i64 last activity (µs)
/// ```
///
/// A token is `u8 0` (none: the consumer has processed nothing yet) or `u8 1, u64 offset,
/// u32 check`, as in checkpoints. Replay folds these into the consumer table; checkpoints copy it.
struct BookmarkRecord: Sendable, Equatable {
    enum Operation: UInt8, Sendable {
        case set = 1
        case remove = 2
    }

    var operation: Operation
    var bookmark: CheckpointBookmark

    func encoded() -> [UInt8] {
        var writer = ByteWriter(capacity: 48 + bookmark.name.utf8.count)
        writer.write(UInt8(1))
        writer.write(operation.rawValue)
        writer.writeLengthPrefixed(Array(bookmark.name.utf8))
        CheckpointHeader.write(bookmark.token, into: &writer)
        writer.write(bookmark.lastActivityMicroseconds)
        return writer.bytes
    }

    static func decode(_ bytes: [UInt8], storeID: UUID) throws(ByteReaderError) -> BookmarkRecord {
        try ByteReader.read(bytes) { reader throws(ByteReaderError) in
            let version = try reader.readByte()
            guard version == 1 else { throw .malformed("unknown bookmark record version \(version)") }
            let rawOperation = try reader.readByte()
            guard let operation = Operation(rawValue: rawOperation) else {
                throw .malformed("bookmark operation \(rawOperation)")
            }
            let name = try ValueCodec.readString(&reader)
            let token = try CheckpointHeader.readToken(&reader, storeID: storeID)
            let activity: Int64 = try reader.read()
            guard reader.isAtEnd else { throw .malformed("\(reader.remainingByteCount) bytes after the bookmark") }
            return BookmarkRecord(
                operation: operation,
                bookmark: CheckpointBookmark(name: name, token: token, lastActivityMicroseconds: activity))
        }
    }

    func apply(to bookmarks: inout [String: CheckpointBookmark]) {
        switch operation {
        case .set: bookmarks[bookmark.name] = bookmark
        case .remove: bookmarks[bookmark.name] = nil
        }
    }
}

/// A registered history consumer: how far it has processed (DECISIONS.md D7).
public struct ConsumerBookmark: Sendable, Hashable {
    /// The name it registered under.
    public var name: String
    /// The newest transaction the consumer has processed; `nil` when it has processed nothing
    /// (then it holds all retained history).
    public var token: DefaultHistoryToken?
    /// When the consumer last registered or acknowledged.
    public var lastActivity: Date

    init(_ bookmark: CheckpointBookmark) {
        name = bookmark.name
        token = bookmark.token
        lastActivity = Date(timeIntervalSince1970: Double(bookmark.lastActivityMicroseconds) / 1_000_000)
    }
}
