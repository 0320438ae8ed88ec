import Foundation

/// What a store directory holds: its identity and, per segment, how many records and bytes.
///
/// Made by ``Log/inspect(directory:fileSystem:)``, which opens the store read-only (beside a
/// live writer if there is one) and changes nothing on disk.
///
/// ```swift
/// let inspection = try Log.inspect(directory: "/var/lib/app/store")
/// for segment in inspection.segments {
///     print(segment.fileName, segment.recordCount, segment.rawByteCount, segment.storedByteCount)
/// }
/// ```
public struct StoreInspection: Sendable, Equatable {
    /// One segment file and the records it holds.
    public struct Segment: Sendable, Equatable {
        /// The file name, for example `00000000000000000000.log`.
        public var fileName: String
        /// The logical offset of the segment's first record.
        public var baseOffset: UInt64
        /// The size of the file, header and preallocated zeros included.
        public var fileByteCount: UInt64
        /// Records in the segment, up to the visible end (durable-end marks not included).
        public var recordCount: UInt64
        /// Durable-end marks in the segment (FORMAT.md §6.6).
        public var markCount: UInt64 = 0
        /// The logical offset just past the segment's last record (its base offset when empty).
        public var endOffset: UInt64
        /// Payload bytes before compression.
        public var rawByteCount: UInt64
        /// Payload bytes as stored (compressed where that helped), headers excluded.
        public var storedByteCount: UInt64
        /// Records stored LZ4-compressed.
        public var compressedRecordCount: UInt64

        /// Stored over raw payload bytes (below 1 when compression helped); `nil` without payload.
        public var compressionRatio: Double? {
            rawByteCount == 0 ? nil : Double(storedByteCount) / Double(rawByteCount)
        }
    }

    /// The directory that was inspected.
    public var directory: String
    /// The store's UUID (from `store.meta`).
    public var storeID: UUID
    /// The format version in `store.meta`.
    public var formatVersion: UInt32
    /// When the store was created.
    public var creationDate: Date
    /// The segments, oldest first.
    public var segments: [Segment]
    /// The logical offset of the first retained record.
    public var startOffset: UInt64
    /// The end of the readable log (the first offset no record holds yet).
    public var endOffset: UInt64
    /// Files that are not part of the format; the engine leaves them alone.
    public var unknownFiles: [String]
    /// Temporary files left by a crash; the next open for writing removes them.
    public var temporaryFiles: [String]
    /// Sparse index files (a rebuildable cache), one per sealed segment.
    public var indexFiles: [String]
    /// Checkpoint files.
    public var checkpointFiles: [String]
    /// Non-zero bytes after the last good record that the read stopped at (see
    /// ``RecoveryReport/unreadTail``): a torn tail the next open for writing cuts, damage, or an
    /// append in flight beside a live writer. `logstore verify` tells which.
    public var unreadTail: RecoveryReport.DroppedRecord?

    /// Records in all segments.
    public var recordCount: UInt64 { segments.reduce(0) { $0 + $1.recordCount } }
    /// Payload bytes before compression, all segments.
    public var rawByteCount: UInt64 { segments.reduce(0) { $0 + $1.rawByteCount } }
    /// Payload bytes as stored, all segments.
    public var storedByteCount: UInt64 { segments.reduce(0) { $0 + $1.storedByteCount } }
    /// Sizes of the segment files, all segments.
    public var fileByteCount: UInt64 { segments.reduce(0) { $0 + $1.fileByteCount } }
    /// Records stored compressed, all segments.
    public var compressedRecordCount: UInt64 { segments.reduce(0) { $0 + $1.compressedRecordCount } }
    /// Stored over raw payload bytes for the whole log; `nil` without payload.
    public var compressionRatio: Double? {
        rawByteCount == 0 ? nil : Double(storedByteCount) / Double(rawByteCount)
    }
}

extension Log {
    /// Describes the store in `directory` without changing anything on disk.
    ///
    /// Opens it with ``openReadOnly(directory:fileSystem:)`` (so it works beside a live writer,
    /// and a damaged tail record counts as the end) and reads every record once.
    /// Throws ``LogError/Code/notAStore`` for a missing directory or one without a store,
    /// ``LogError/Code/newerFormatVersion`` and ``LogError/Code/corruption`` as opening does.
    public static func inspect(directory: String, fileSystem: any FileSystem = PosixFileSystem()) throws(LogError)
        -> StoreInspection
    {
        // openReadOnly says "does not exist" for a regular file; say what it is instead.
        if let kind = try? fileSystem.kind(of: directory), kind != .directory {
            throw LogError(.notAStore, "\(directory) is a file, not a store directory.", file: directory)
        }
        let log = try Log.openReadOnly(directory: directory, fileSystem: fileSystem)
        defer { try? log.close() }
        let bases = log.segmentBaseOffsets
        var segments = try bases.map { (base) throws(LogError) in
            let fileName = LogFileNames.segment(base)
            return StoreInspection.Segment(
                fileName: fileName, baseOffset: base,
                fileByteCount: try fileByteCount(LogFileNames.join(directory, fileName), fileSystem: fileSystem),
                recordCount: 0, endOffset: base, rawByteCount: 0, storedByteCount: 0, compressedRecordCount: 0)
        }
        // Records come in log order, so the segment index only moves forward.
        var segmentIndex = 0
        var records = try log.records(from: log.startOffset, includingMarks: true)
        while let record = try records.next() {
            while segmentIndex + 1 < bases.count && record.offset >= bases[segmentIndex + 1] { segmentIndex += 1 }
            segments[segmentIndex].endOffset = record.endOffset
            if record.type == .durableEndMark {
                segments[segmentIndex].markCount += 1
                continue
            }
            segments[segmentIndex].recordCount += 1
            segments[segmentIndex].rawByteCount += UInt64(record.payload.count)
            segments[segmentIndex].storedByteCount +=
                record.recordByteCount - UInt64(FormatConstants.recordHeaderByteCount)
            if record.isCompressed { segments[segmentIndex].compressedRecordCount += 1 }
        }
        let names = try LogCore.listDirectory(directory, fileSystem).sorted()
        return StoreInspection(
            directory: directory, storeID: log.storeID, formatVersion: log.meta.formatVersion,
            creationDate: log.meta.creationDate, segments: segments, startOffset: log.startOffset,
            endOffset: records.endOffset, unknownFiles: log.recoveryReport.unknownFiles,
            temporaryFiles: names.filter(LogFileNames.isTemporary),
            indexFiles: names.filter { LogFileNames.indexBaseOffset($0) != nil },
            checkpointFiles: names.filter { LogFileNames.checkpointOffset($0) != nil },
            unreadTail: log.recoveryReport.unreadTail)
    }

    static func fileByteCount(_ path: String, fileSystem: any FileSystem) throws(LogError) -> UInt64 {
        do {
            let handle = try fileSystem.openFile(path, mode: .readOnly)
            defer { handle.close() }
            return try handle.size()
        } catch {
            throw LogError.io(error, "Reading the size of \(path)")
        }
    }
}
