import Synchronization

/// One segment of the log: its file, its base offset and its sparse index.
///
/// Shared by the writer and readers. The handle is opened once and used only with positional
/// reads and writes; the index sits behind a mutex.
final class SegmentFile: Sendable {
    let baseOffset: UInt64
    /// The format version in the segment's header: how its record headers read (FORMAT.md §6.1).
    let formatVersion: UInt32
    let path: String
    let handle: any FileHandle
    /// The segment's dictionary (FORMAT.md §6.8), looked up once and shared by its scanners.
    let dictionary: SegmentDictionary
    private let sparseIndex: Mutex<SparseIndex>

    init(
        baseOffset: UInt64, formatVersion: UInt32, path: String, handle: any FileHandle,
        index: SparseIndex = SparseIndex(), dictionary: SegmentDictionary = SegmentDictionary()
    ) {
        self.dictionary = dictionary
        self.baseOffset = baseOffset
        self.formatVersion = formatVersion
        self.path = path
        self.handle = handle
        self.sparseIndex = Mutex(index)
    }

    var index: SparseIndex { sparseIndex.withLock { $0 } }

    /// File position where its records other than a dictionary start (FORMAT.md §5.3, §6.8): a
    /// segment holding no more than its dictionary takes any record, as an empty one does.
    var recordsStart: UInt64 {
        UInt64(FormatConstants.segmentHeaderByteCount) + (dictionary.knownDictionary?.recordByteCount ?? 0)
    }

    /// The logical offset just past the last record noted in the index.
    var endOffset: UInt64 { baseOffset + sparseIndex.withLock { $0.endOffset } }

    func note(_ record: LogRecord) {
        note(offset: record.offset, recordByteCount: record.recordByteCount)
    }

    func note(offset: UInt64, recordByteCount: UInt64) {
        sparseIndex.withLock { $0.note(relativeOffset: offset - baseOffset, recordByteCount: recordByteCount) }
    }

    func replaceIndex(_ index: SparseIndex) {
        sparseIndex.withLock { $0 = index }
    }

    /// File position of the greatest index entry at or before `offset`.
    func filePosition(nearestBefore offset: UInt64) -> UInt64 {
        let relative = offset - baseOffset
        let entry = sparseIndex.withLock { $0.entry(atOrBefore: relative) }
        return entry + UInt64(FormatConstants.segmentHeaderByteCount)
    }
}
