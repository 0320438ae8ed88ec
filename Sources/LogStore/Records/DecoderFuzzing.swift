import Foundation
import LogStoreEngine

/// The decoders a hostile store (or a hostile token) feeds, each behind one function of bytes
/// (issue 14, item 4). The libFuzzer targets in `Tools/fuzz` call ``run(_:_:)``; the corpus replay
/// test in the default test run calls the same function with every committed input. An input
/// that does not decode is the expected outcome: ``run(_:_:)`` returns normally after an error.
/// Only a bug traps (a crash, a precondition, an out-of-bounds read, an allocation beyond the
/// record maximum under the fuzzer's `-malloc_limit_mb`).
///
/// Not API for apps: the underscore keeps it out of the way, and its behaviour may change.
public enum _DecoderFuzzing {
    public enum Target: String, CaseIterable, Sendable {
        /// Bytes after a segment header (first byte: odd → format version 1; 2 mod 4 → 2; 0 mod 4 →
        /// 3, the current one; bit 2 set: an 8-byte base offset follows), read as a store's only
        /// segment: record framing, CRCs, LZ4, segment dictionaries, durable-end statements.
        case record
        /// A length-prefixed schema table payload, then a transaction payload decoded with it.
        case transaction
        /// A schema table payload.
        case schema
        /// A checkpoint file's records: `u8 type, u16 length, payload` repeated, fed to the
        /// checkpoint decoder (with rows) and, whole, as a checkpoint file's payloads.
        case checkpoint
        /// A bookmark record payload.
        case bookmark
        /// A history token's JSON form.
        case token
        /// A store directory: `u8 file selector, u16 length, bytes` repeated (up to 6 files),
        /// opened read-only, verified, replayed, read for history, opened for writing and repaired.
        case directory
    }

    /// The store every fuzzed file claims to belong to (the fuzz inputs name it in their headers).
    public static let storeID = UUID(uuidString: "5EED5EED-0000-4000-8000-00000000F022")!

    /// Decodes `bytes` with the target's decoder(s), discarding the result or the error.
    public static func run(_ target: Target, _ bytes: [UInt8]) {
        switch target {
        case .record: runRecord(bytes)
        case .transaction: runTransaction(bytes)
        case .schema: _ = try? SchemaTable.decode(bytes)
        case .checkpoint: runCheckpoint(bytes)
        case .bookmark: _ = try? BookmarkRecord.decode(bytes, storeID: storeID)
        case .token:
            _ = try? JSONDecoder().decode(DefaultHistoryToken.self, from: Data(bytes))
        case .directory: runDirectory(bytes)
        }
    }

    // MARK: Targets

    private static func runRecord(_ bytes: [UInt8]) {
        let selector = bytes.first ?? 0
        let version: UInt32 = selector % 2 == 1 ? 1 : selector % 4 == 2 ? 2 : 3
        var records = bytes.dropFirst()
        // Bit 2: the segment's base offset follows (8 bytes), as after compaction — so a seed
        // taken from a later segment (one that begins with a dictionary) keeps its records valid.
        var base: UInt64 = 0
        if selector & 4 != 0, records.count >= 8 {
            base = records.prefix(8).reversed().reduce(0) { $0 << 8 | UInt64($1) }
            records = records.dropFirst(8)
        }
        let segment = SegmentHeader(formatVersion: version, storeID: storeID, baseOffset: base).encoded() + records
        let files = [
            FormatConstants.storeMetaFileName: StoreMeta(
                formatVersion: version, storeID: storeID, creationTimeMicroseconds: 0
            ).encoded(),
            LogFileNames.segment(base): segment,
        ]
        let fileSystem = MemoryFileSystem(directory: directory, files: files)
        if let log = try? Log.openReadOnly(directory: directory, fileSystem: fileSystem) {
            readAll(log)
            try? log.close()
        }
        _ = try? Log.verify(directory: directory, fileSystem: fileSystem)
    }

    private static func runTransaction(_ bytes: [UInt8]) {
        guard bytes.count >= 2 else { return }
        let tableByteCount = Int(bytes[0]) | Int(bytes[1]) << 8
        guard bytes.count >= 2 + tableByteCount,
            let table = try? SchemaTable.decode(Array(bytes[2..<(2 + tableByteCount)]))
        else { return }
        let payload = Array(bytes[(2 + tableByteCount)...])
        _ = try? TransactionRecord.decodePrefix(payload)
        _ = try? TransactionRecord.authorMatches(payload) { $0?.first == 0x61 }
        let decoder = TransactionRecord.Decoder(table: table, storeIdentifier: storeID.uuidString)
        let decoded = try? decoder.decode(payload)
        // Replay's path reads the same grammar: it refuses what decoding refuses, and what
        // decodes folds to the same state (its repeated strings shared, as a replay's are).
        var folded = FoldState()
        var scratch: TransactionRecord.Decoder.Values = []
        let timestamp = try? decoder.fold(payload, into: &folded, scratch: &scratch, strings: StringInterner())
        precondition((decoded == nil) == (timestamp == nil), "fold and decode disagree on whether the record is valid")
        if let decoded {
            var applied = FoldState()
            for change in decoded.changes { applied.apply(change) }
            precondition(
                timestamp == decoded.timestampMicroseconds && identical(folded, applied),
                "fold and decode disagree")
        }
    }

    /// Equal, with doubles and dates compared by their bits: a fuzzed record holds NaNs, which
    /// `==` finds unequal to themselves (the first run of the fold check stopped on one). Stricter
    /// than `==` for 0.0 and -0.0, which is right here: both sides read the same bytes.
    static func identical(_ lhs: FoldState, _ rhs: FoldState) -> Bool {
        guard lhs.sequenceEnd == rhs.sequenceEnd, lhs.entities.count == rhs.entities.count else { return false }
        let others = rhs.entities
        for (name, rows) in lhs.entities {
            guard let other = others[name], rows.count == other.count else { return false }
            for ((leftKey, left), (rightKey, right)) in zip(rows, other) {
                guard leftKey == rightKey, left.sequence == right.sequence, left.values.count == right.values.count
                else { return false }
                for (attribute, value) in left.values {
                    guard let rightValue = right.values[attribute], identical(value, rightValue) else { return false }
                }
            }
        }
        return true
    }

    static func identical(_ lhs: AttributeValue, _ rhs: AttributeValue) -> Bool {
        switch (lhs, rhs) {
        case (.double(let left), .double(let right)): left.bitPattern == right.bitPattern
        case (.date(let left), .date(let right)):
            left.timeIntervalSinceReferenceDate.bitPattern == right.timeIntervalSinceReferenceDate.bitPattern
        case (.array(let left), .array(let right)): left.count == right.count && zip(left, right).allSatisfy(identical)
        default: lhs == rhs
        }
    }

    private static func runCheckpoint(_ bytes: [UInt8]) {
        var decoder = CheckpointDecoder(storeIdentifier: storeID.uuidString, decodesRows: true, fileByteCount: bytes.count)
        var position = 0
        var records: [(RecordType, [UInt8])] = []
        // Bounded by the input: each pass consumes at least three bytes.
        while position + 3 <= bytes.count {
            let type = RecordType(rawValue: bytes[position])
            let count = min(Int(bytes[position + 1]) | Int(bytes[position + 2]) << 8, bytes.count - position - 3)
            records.append((type, Array(bytes[(position + 3)..<(position + 3 + count)])))
            position += 3 + count
        }
        do {
            for (type, payload) in records { try decoder.take(type, payload) }
            _ = try decoder.finish()
        } catch {}
        if let first = records.first { _ = try? CheckpointHeader.decode(first.1) }
    }

    /// The files a directory input may hold, chosen by its selector byte (modulo the count).
    static let directoryFileNames = [
        FormatConstants.storeMetaFileName,
        "00000000000000000000.log",
        "00000000000000000000.index",
        "checkpoint-00000000000000000000.ckpt",
        "00000000000000000200.log",
        "checkpoint-00000000000000000200.ckpt",
    ]

    private static func runDirectory(_ bytes: [UInt8]) {
        var files: [String: [UInt8]] = [:]
        var position = 0
        // Bounded by the input: each pass consumes at least three bytes.
        while position + 3 <= bytes.count, files.count < directoryFileNames.count {
            let name = directoryFileNames[Int(bytes[position]) % directoryFileNames.count]
            let count = min(Int(bytes[position + 1]) | Int(bytes[position + 2]) << 8, bytes.count - position - 3)
            files[name] = Array(bytes[(position + 3)..<(position + 3 + count)])
            position += 3 + count
        }
        let fileSystem = MemoryFileSystem(directory: directory, files: files)
        if let log = try? Log.openReadOnly(directory: directory, fileSystem: fileSystem) {
            readAll(log)
            try? log.close()
        }
        _ = try? Log.verify(directory: directory, fileSystem: fileSystem)
        _ = try? LogStore.replay(directory: directory, fileSystem: fileSystem)
        _ = try? LogStore.fetchHistory(
            directory: directory, fileSystem: fileSystem, HistoryDescriptor<DefaultHistoryTransaction>())
        var options = LogOptions()
        options.fileSystem = fileSystem
        options.createsIfMissing = false
        options.durableEndMarkDelay = nil
        options.preallocationAheadByteCount = 0
        for repairs in [false, true] {
            options.repairs = repairs
            if let log = try? Log.open(directory: directory, options: options) {
                readAll(log)
                try? log.close()
            }
        }
    }

    // MARK: Seeds

    /// Seed inputs for every target, taken from the store at `directory` (its segments, schema and
    /// transaction records, checkpoint files) plus a bookmark and a token made here.
    public static func seeds(fromStore storeDirectory: String) throws -> [(Target, [UInt8])] {
        var seeds: [(Target, [UInt8])] = []
        let fileSystem = PosixFileSystem()
        var directoryInput: [UInt8] = []
        func addFile(_ name: String, _ bytes: [UInt8]) {
            var bytes = bytes
            // A segment's preallocated zeros say nothing; a fuzzer's input stays small without them.
            if name.hasSuffix(".log") { while bytes.last == 0 { bytes.removeLast() } }
            guard let selector = directoryFileNames.firstIndex(of: name), bytes.count <= 0xFFFF else { return }
            directoryInput += [UInt8(selector), UInt8(bytes.count & 0xFF), UInt8(bytes.count >> 8)] + bytes
        }
        for name in try FileManager.default.contentsOfDirectory(atPath: storeDirectory).sorted() {
            let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: storeDirectory + "/" + name)))
            addFile(name, bytes)
            if name.hasSuffix(".log"), bytes.count > 64 {
                var records = Array(bytes[64...])
                while records.last == 0 { records.removeLast() }
                let version = SegmentHeader.probableVersion(ofDamaged: bytes) ?? FormatConstants.formatVersion
                let selector: UInt8 = version == 1 ? 1 : version == 2 ? 2 : 0
                let base = LogFileNames.segmentBaseOffset(name) ?? 0
                let baseBytes = withUnsafeBytes(of: base.littleEndian) { Array($0) }
                seeds.append((.record, base == 0 ? [selector] + records : [selector | 4] + baseBytes + records))
            }
            if CheckpointFileName.offset(name) != nil {
                var reader = try RecordFileReader(
                    path: storeDirectory + "/" + name, magic: FormatConstants.checkpointMagic, fileSystem: fileSystem)
                var input: [UInt8] = []
                while let record = try reader.next() {
                    guard record.payload.count <= 0xFFFF else { continue }
                    input += [
                        record.type.rawValue, UInt8(record.payload.count & 0xFF), UInt8(record.payload.count >> 8),
                    ]
                    input += record.payload
                }
                seeds.append((.checkpoint, input))
            }
        }
        seeds.append((.directory, directoryInput))
        let log = try Log.openReadOnly(directory: storeDirectory, fileSystem: fileSystem)
        defer { try? log.close() }
        var iterator = try log.records(from: log.startOffset)
        var schema: [UInt8]?
        var transactions = 0
        while let record = try iterator.next() {
            if record.type == .schema {
                schema = record.payload
                seeds.append((.schema, record.payload))
            } else if record.type == .transaction, let schema, schema.count <= 0xFFFF, transactions < 6 {
                transactions += 1
                seeds.append(
                    (.transaction, [UInt8(schema.count & 0xFF), UInt8(schema.count >> 8)] + schema + record.payload))
            }
        }
        let token = DefaultHistoryToken(storeIdentifier: storeID, offset: 1691, check: 0xDEAD_BEEF)
        seeds.append((.token, Array(token.jsonString.utf8)))
        for (operation, token) in [(BookmarkRecord.Operation.set, token), (.remove, nil)] {
            let bookmark = CheckpointBookmark(
                name: "sync", token: token, lastActivityMicroseconds: 1_700_000_000_000_000)
            seeds.append((.bookmark, BookmarkRecord(operation: operation, bookmark: bookmark).encoded()))
        }
        return seeds
    }

    // MARK: Helpers

    static let directory = "/fuzz"

    /// Reads every record from the start; stops at the first error.
    private static func readAll(_ log: Log) {
        guard var iterator = try? log.records(from: log.startOffset, includingMarks: true),
            var inPlace = try? log.records(from: log.startOffset, includingMarks: true)
        else { return }
        // Bounded by the log: each record read advances the iterator. Reading in place (replay's
        // way) must give the same records and fail at the same one.
        while true {
            let copied = Result { () throws(LogError) in try iterator.next() }
            var viewed: LogRecord?
            let more = Result { () throws(LogError) in try inPlace.next(inPlace: { viewed = LogRecord($0) }) }
            switch (copied, more) {
            case (.success(let record), .success(let found)):
                precondition(record == viewed && (record != nil) == found, "reading in place differs")
                precondition(iterator.recordsRead == inPlace.recordsRead, "reading in place counts differently")
                if record == nil { return }
            case (.failure(let error), .failure(let other)):
                precondition(
                    error.code == other.code && error.offset == other.offset, "reading in place fails differently")
                return
            default:
                preconditionFailure("reading in place fails where copying does not, or the other way round")
            }
        }
    }
}

/// One directory of files in memory, for the fuzz targets: a hostile store without a disk. A path
/// outside the directory traps, so a target that touches one is a finding.
final class MemoryFileSystem: FileSystem, @unchecked Sendable {
    final class File {
        var bytes: [UInt8]
        init(_ bytes: [UInt8]) { self.bytes = bytes }
    }

    let directory: String
    private let lock = NSLock()
    private var files: [String: File] = [:]
    private var subdirectories: Set<String> = []

    init(directory: String, files: [String: [UInt8]]) {
        self.directory = directory
        for (name, bytes) in files { self.files[name] = File(bytes) }
    }

    private func name(_ path: String, _ operation: String) throws(FileSystemError) -> String {
        if path == directory { return "" }
        let prefix = directory + "/"
        // A hostile store must never make the engine touch a path outside its directory (issue
        // 14, item 6): for the fuzzer, that is a crash, not an error.
        guard path.hasPrefix(prefix), !path.dropFirst(prefix.count).split(separator: "/").contains("..") else {
            preconditionFailure("\(operation) of \(path), outside the store directory \(directory)")
        }
        return String(path.dropFirst(prefix.count))
    }

    private func locked<T>(_ body: () throws(FileSystemError) -> T) throws(FileSystemError) -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    func openFile(_ path: String, mode: FileOpenMode) throws(FileSystemError) -> any LogStoreEngine.FileHandle {
        let name = try name(path, "open")
        return try locked { () throws(FileSystemError) -> any LogStoreEngine.FileHandle in
            switch (files[name], mode) {
            case (let file?, .readOnly), (let file?, .readWrite), (let file?, .createOrOpen):
                return MemoryFileHandle(path: path, file: file, lock: lock)
            case (_?, .createNew):
                throw FileSystemError(code: ErrorCode.exists, operation: "open", path: path)
            case (nil, .readOnly), (nil, .readWrite):
                throw FileSystemError(code: ErrorCode.notFound, operation: "open", path: path)
            case (nil, .createNew), (nil, .createOrOpen):
                let file = File([])
                files[name] = file
                return MemoryFileHandle(path: path, file: file, lock: lock)
            }
        }
    }

    func createDirectory(_ path: String) throws(FileSystemError) {
        if path == directory { return }
        let name = try name(path, "mkdir")
        try locked { () throws(FileSystemError) in _ = subdirectories.insert(name) }
    }

    func removeFile(_ path: String) throws(FileSystemError) {
        let name = try name(path, "unlink")
        try locked { () throws(FileSystemError) in
            guard files.removeValue(forKey: name) != nil else {
                throw FileSystemError(code: ErrorCode.notFound, operation: "unlink", path: path)
            }
        }
    }

    func rename(_ source: String, to destination: String) throws(FileSystemError) {
        let from = try name(source, "rename")
        let to = try name(destination, "rename")
        try locked { () throws(FileSystemError) in
            guard let file = files.removeValue(forKey: from) else {
                throw FileSystemError(code: ErrorCode.notFound, operation: "rename", path: source)
            }
            files[to] = file
        }
    }

    func syncDirectory(_ path: String) throws(FileSystemError) {
        if path != directory { _ = try name(path, "fsync") }
    }

    func contentsOfDirectory(_ path: String) throws(FileSystemError) -> [String] {
        let prefix = path == directory ? "" : try name(path, "opendir") + "/"
        return try locked { () throws(FileSystemError) -> [String] in
            let all = Array(files.keys) + Array(subdirectories)
            return all.filter { $0.hasPrefix(prefix) && !$0.dropFirst(prefix.count).contains("/") }
                .map { String($0.dropFirst(prefix.count)) }
        }
    }

    func kind(of path: String) throws(FileSystemError) -> FileKind? {
        if path == directory { return .directory }
        let name = try name(path, "stat")
        return try locked { () throws(FileSystemError) -> FileKind? in
            files[name] != nil ? .regular : subdirectories.contains(name) ? .directory : nil
        }
    }

    func identity(of path: String) throws(FileSystemError) -> FileIdentity {
        let name = try name(path, "stat")
        return FileIdentity(device: 1, inode: UInt64(truncatingIfNeeded: name.hashValue))
    }
}

final class MemoryFileHandle: LogStoreEngine.FileHandle, @unchecked Sendable {
    let path: String
    private let file: MemoryFileSystem.File
    private let lock: NSLock

    init(path: String, file: MemoryFileSystem.File, lock: NSLock) {
        self.path = path
        self.file = file
        self.lock = lock
    }

    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(FileSystemError) -> Int {
        lock.lock()
        defer { lock.unlock() }
        guard offset < UInt64(file.bytes.count) else { return 0 }
        let start = Int(offset)
        let count = min(buffer.count, file.bytes.count - start)
        file.bytes.withUnsafeBytes { source in
            buffer.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[start..<(start + count)]))
        }
        return count
    }

    func write(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(FileSystemError) {
        lock.lock()
        defer { lock.unlock() }
        // A hostile store may name any offset; a memory file larger than the record maximum is a finding.
        let (end64, overflow) = offset.addingReportingOverflow(UInt64(bytes.count))
        guard !overflow, end64 <= UInt64(FormatConstants.recordByteCountMax) * 2 else {
            throw FileSystemError(code: ErrorCode.noSpace, operation: "pwrite", path: path)
        }
        let end = Int(offset) + bytes.count
        if file.bytes.count < end { file.bytes += [UInt8](repeating: 0, count: end - file.bytes.count) }
        file.bytes.withUnsafeMutableBytes { target in
            UnsafeMutableRawBufferPointer(rebasing: target[Int(offset)..<end]).copyMemory(from: bytes)
        }
    }

    func syncData() throws(FileSystemError) {}
    func sync() throws(FileSystemError) {}

    func size() throws(FileSystemError) -> UInt64 {
        lock.lock()
        defer { lock.unlock() }
        return UInt64(file.bytes.count)
    }

    func truncate(toByteCount byteCount: UInt64) throws(FileSystemError) {
        lock.lock()
        defer { lock.unlock() }
        guard byteCount <= UInt64(FormatConstants.recordByteCountMax) * 2 else {
            throw FileSystemError(code: ErrorCode.noSpace, operation: "ftruncate", path: path)
        }
        let count = Int(byteCount)
        if count < file.bytes.count {
            file.bytes.removeSubrange(count...)
        } else {
            file.bytes += [UInt8](repeating: 0, count: count - file.bytes.count)
        }
    }

    func tryLockExclusive() throws(FileSystemError) -> Bool { true }
    func close() {}
}
