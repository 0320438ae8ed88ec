import Foundation

extension Log {
    /// Checks everything in the store directory, read-only, and reports every problem instead of
    /// stopping at the first.
    ///
    /// Checked: `store.meta`; every segment header (magic, checksum, version, store UUID, base
    /// offset against the file name); every record of every segment (header CRC, its own offset,
    /// payload CRC, decompression); that each sealed segment ends exactly where the next begins;
    /// index files against the records they describe; checkpoint positions against the end of the
    /// log. After a damaged record it resynchronises: records carry their own logical offset, so it
    /// scans forward byte by byte for the next record that checks out, reports the damaged range
    /// and goes on from there.
    ///
    /// Non-zero bytes after the last record of the last segment are a torn tail: a
    /// ``VerificationReport/Severity/warning`` when a dying writer could have left them (within
    /// ``FormatConstants/unsyncedByteCountMax``, or the length of the torn record), otherwise
    /// corruption. Damage anywhere else is corruption.
    ///
    /// Takes no lock and changes nothing, so it runs beside a live writer (whose unsynced tail may
    /// then show as a torn tail). A segment, checkpoint or index file that the writer deletes
    /// (history compaction, checkpoint pruning) between the listing and its reading is not a
    /// problem: it is listed in ``VerificationReport/vanishedFiles``. Throws ``LogError/Code/notAStore`` when the directory is missing
    /// or holds no store, ``LogError/Code/newerFormatVersion`` when a file is of a newer format
    /// this code cannot judge. I/O errors while reading a segment are reported as problems.
    public static func verify(directory: String, fileSystem: any FileSystem = PosixFileSystem()) throws(LogError)
        -> VerificationReport
    {
        var verifier = StoreVerifier(directory: directory, fileSystem: fileSystem)
        try verifier.run()
        return verifier.report
    }
}

/// The state of one ``Log/verify(directory:fileSystem:)`` run.
struct StoreVerifier {
    let directory: String
    let fileSystem: any FileSystem
    var report: VerificationReport
    /// The offsets the checkpoint files are named for: each is a durable end the store states.
    var checkpointOffsets: [UInt64] = []

    /// What the header pass learned about one segment file.
    struct SegmentEntry {
        var baseOffset: UInt64
        var name: String
        var handle: (any FileHandle)?
        var header: SegmentHeader?
        /// How its record headers read: the header's version, or for a damaged header the version
        /// field if plausible, else the previous segment's (versions only grow), else the current.
        var formatVersion = FormatConstants.formatVersion
    }

    /// What the record pass learned about one segment.
    struct SegmentResult {
        /// The records that checked out before the first damage, as the index would hold them.
        var index = SparseIndex()
        var isDamaged = false
        /// The logical offset just past the last record that checked out (the base when none).
        var end: UInt64
    }

    init(directory: String, fileSystem: any FileSystem) {
        self.directory = directory
        self.fileSystem = fileSystem
        self.report = VerificationReport(directory: directory)
    }

    mutating func run() throws(LogError) {
        let names = try listStore()
        checkpointOffsets = names.compactMap(LogFileNames.checkpointOffset)
        let segmentBases = names.compactMap(LogFileNames.segmentBaseOffset).sorted()
        let meta = try checkMeta(names: names, hasSegments: !segmentBases.isEmpty)
        report.storeID = meta?.storeID
        var entries = try readSegmentHeaders(segmentBases)
        defer { for entry in entries { entry.handle?.close() } }
        if report.storeID == nil { report.storeID = entries.lazy.compactMap(\.header).first?.storeID }
        if segmentBases.isEmpty {
            add(
                FormatConstants.storeMetaFileName, 0, .warning,
                "the store has no segment yet; the first open "
                    + "for writing creates it")
        }
        var results: [UInt64: SegmentResult] = [:]
        for position in entries.indices {
            let nextBase = position + 1 < entries.count ? entries[position + 1].baseOffset : nil
            checkHeader(entries[position])
            results[entries[position].baseOffset] = checkRecords(entries[position], nextBase: nextBase)
            report.segmentCount += 1
            entries[position].handle?.close()
            entries[position].handle = nil
        }
        let logEnd = segmentBases.last.flatMap { results[$0]?.end }
        checkOtherFiles(names, results: results, logEnd: logEnd)
    }

    // MARK: Directory and store.meta

    private func listStore() throws(LogError) -> [String] {
        switch try? fileSystem.kind(of: directory) {
        case .directory?: break
        case nil: throw LogError(.notAStore, "No store at \(directory): the directory does not exist.", file: directory)
        default: throw LogError(.notAStore, "\(directory) is a file, not a store directory.", file: directory)
        }
        let names = try LogCore.listDirectory(directory, fileSystem).sorted()
        guard
            names.contains(FormatConstants.storeMetaFileName)
                || names.contains(where: { LogFileNames.segmentBaseOffset($0) != nil })
        else {
            throw LogError(
                .notAStore, "\(directory) is not a LogStore store: it has no store.meta and no segment.",
                file: directory)
        }
        return names
    }

    /// Reads `store.meta`; a missing or damaged one is reported and verification goes on with the
    /// store UUID of the segments. A newer version stops it: this code cannot judge such a store.
    private mutating func checkMeta(names: [String], hasSegments: Bool) throws(LogError) -> StoreMeta? {
        let name = FormatConstants.storeMetaFileName
        guard names.contains(name) else {
            add(name, 0, .corruption, "store.meta is missing but segment files exist")
            return nil
        }
        let bytes: [UInt8]
        do {
            bytes = try LogCore.readWholeFile(
                LogFileNames.join(directory, name), fileSystem: fileSystem, byteCountMax: 4096)
        } catch {
            add(name, 0, .corruption, error.message)
            return nil
        }
        switch StoreMeta.decode(bytes) {
        case .success(let meta):
            return meta
        case .failure(.newerVersion(let version)):
            throw LogError(
                .newerFormatVersion,
                "The store at \(directory) has format version \(version); this "
                    + "LogStore reads version \(FormatConstants.formatVersion) and older. Use a newer LogStore.",
                file: LogFileNames.join(directory, name))
        case .failure(.damaged(let what)):
            add(name, 0, .corruption, what)
            return nil
        }
    }

    // MARK: Segment headers

    /// Opens every segment and decodes its header. A segment of a newer format version stops
    /// verification before any record is read, as it stops an open.
    private mutating func readSegmentHeaders(_ bases: [UInt64]) throws(LogError) -> [SegmentEntry] {
        var entries: [SegmentEntry] = []
        for base in bases {
            let name = LogFileNames.segment(base)
            let path = LogFileNames.join(directory, name)
            var entry = SegmentEntry(baseOffset: base, name: name)
            do {
                let handle = try fileSystem.openFile(path, mode: .readOnly)
                entry.handle = handle
                let bytes = try handle.read(byteCount: FormatConstants.segmentHeaderByteCount, at: 0)
                switch SegmentHeader.decode(bytes) {
                case .success(let header):
                    entry.header = header
                    entry.formatVersion = header.formatVersion
                case .failure(.newerVersion(let version)):
                    for opened in entries { opened.handle?.close() }
                    handle.close()
                    throw LogError(
                        .newerFormatVersion,
                        "Segment \(path) has format version \(version); this LogStore "
                            + "reads version \(FormatConstants.formatVersion) and older. Use a newer LogStore.",
                        file: path)
                case .failure(.damaged(let what)):
                    entry.formatVersion = FormatConstants.readableVersion(
                        guessed: SegmentHeader.probableVersion(ofDamaged: bytes) ?? entries.last?.formatVersion
                            ?? FormatConstants.formatVersion)
                    add(
                        name, 0, .corruption,
                        "segment header: \(what); its records are checked against the base "
                            + "offset in the file name")
                }
            } catch let error as FileSystemError {
                // Deleted beside us by a live writer's history compaction (oldest segments first; a
                // gap in the middle still shows: the segment before it then ends short of the next).
                if error.code == ErrorCode.notFound, vanished(name) {
                    report.vanishedFiles.append(name)
                    continue
                }
                add(name, 0, .corruption, "I/O error: \(error); the segment was not checked")
            } catch let error as LogError {
                throw error
            } catch {
                preconditionFailure("unexpected error \(error)")
            }
            entries.append(entry)
        }
        return entries
    }

    /// The checks of a header that decoded: store UUID and base offset.
    private mutating func checkHeader(_ entry: SegmentEntry) {
        guard let header = entry.header else { return }
        if let storeID = report.storeID, header.storeID != storeID {
            add(entry.name, 0, .corruption, "segment belongs to store \(header.storeID), not to this store \(storeID)")
        }
        if header.baseOffset != entry.baseOffset {
            add(
                entry.name, 0, .corruption,
                "header says base offset \(header.baseOffset), the file name says "
                    + "\(entry.baseOffset); records are checked against the file name")
        }
    }

    // MARK: Index, checkpoint, temporary and unknown files

    private mutating func checkOtherFiles(_ names: [String], results: [UInt64: SegmentResult], logEnd: UInt64?) {
        for name in names {
            if let base = LogFileNames.indexBaseOffset(name) {
                report.indexFileCount += 1
                checkIndex(name, baseOffset: base, result: results[base])
            } else if let offset = LogFileNames.checkpointOffset(name) {
                report.checkpointFiles.append(name)
                if let logEnd, offset > logEnd {
                    add(
                        name, 0, .corruption,
                        "checkpoint at offset \(offset) lies beyond the end of the log at "
                            + "\(logEnd)")
                }
                checkCheckpointFraming(name, offset: offset)
            } else if LogFileNames.isTemporary(name) {
                add(
                    name, 0, .warning,
                    "temporary file left by an interrupted write; the next open for writing "
                        + "removes it")
            } else if !FormatConstants.controlFileNames.contains(name) && LogFileNames.segmentBaseOffset(name) == nil {
                report.unknownFiles.append(name)
            }
        }
        // A log that starts above 0 had its oldest segments deleted by history compaction, which
        // writes a checkpoint at or after the first kept record first (FORMAT.md §12.5).
        var checkpoints = names.compactMap(LogFileNames.checkpointOffset)
        if !report.vanishedFiles.isEmpty {
            // A compaction ran beside us: its checkpoint was written after the listing.
            let current = (try? LogCore.listDirectory(directory, fileSystem)) ?? []
            checkpoints += current.compactMap(LogFileNames.checkpointOffset)
        }
        if let firstBase = results.keys.min(), firstBase > 0, !checkpoints.contains(where: { $0 >= firstBase }) {
            add(
                LogFileNames.segment(firstBase), 0, .corruption,
                "the log starts at offset \(firstBase) (older history "
                    + "was deleted) but no checkpoint at or after it holds the state of the deleted records")
        }
    }

    /// A checkpoint's framing (file header, every record, nothing after the last), its store and
    /// its offset; the meaning of its payloads is the model layer's (`LogStore` checks it on open).
    private mutating func checkCheckpointFraming(_ name: String, offset: UInt64) {
        do throws(LogError) {
            var reader = try RecordFileReader(
                path: LogFileNames.join(directory, name), magic: FormatConstants.checkpointMagic,
                fileSystem: fileSystem)
            if let storeID = report.storeID, reader.header.storeID != storeID {
                add(name, 0, .corruption, "checkpoint of store \(reader.header.storeID), not of this store \(storeID)")
            }
            if reader.header.value != offset {
                add(
                    name, 0, .corruption, "file header says offset \(reader.header.value), the file name says \(offset)"
                )
            }
            while try reader.next() != nil {}
        } catch {
            // Pruned beside us by a live writer: it was valid when listed, and a newer one exists.
            if error.code == .ioError, vanished(name) {
                report.vanishedFiles.append(name)
                report.checkpointFiles.removeAll { $0 == name }
                return
            }
            // Read errors and newer versions are reported as what they are, but still as problems.
            add(
                name, error.offset ?? 0, .corruption,
                error.code == .ioError ? "I/O error: \(error.message)" : error.message)
        }
    }

    /// An index is a rebuildable cache: a bad one is a warning (the next open for writing
    /// rebuilds it), but it must describe exactly the records of its segment.
    private mutating func checkIndex(_ name: String, baseOffset: UInt64, result: SegmentResult?) {
        guard let result else {
            // Its segment was deleted beside us by history compaction, which deletes the index too.
            if report.vanishedFiles.contains(LogFileNames.segment(baseOffset)) { return }
            add(name, 0, .warning, "index file of a segment that does not exist (\(LogFileNames.segment(baseOffset)))")
            return
        }
        let path = LogFileNames.join(directory, name)
        let bytes: [UInt8]
        do { bytes = try LogCore.readWholeFile(path, fileSystem: fileSystem, byteCountMax: 64 * 1024 * 1024) } catch {
            if vanished(name) {
                report.vanishedFiles.append(name)
                return
            }
            add(name, 0, .warning, "unreadable index: \(error.message)")
            return
        }
        guard let storeID = report.storeID,
            let index = SparseIndex.decode(bytes, storeID: storeID, baseOffset: baseOffset)
        else {
            add(
                name, 0, .warning,
                "not a valid index of segment \(LogFileNames.segment(baseOffset)) (checksum, "
                    + "version, store or base offset); the next open for writing rebuilds it")
            return
        }
        guard !result.isDamaged else { return }  // The segment's own damage is already reported.
        if index != result.index {
            add(
                name, 0, .warning,
                "index does not match its segment: it ends at offset \(baseOffset + index.endOffset) "
                    + "with \(index.entries.count) entries, the records end at \(baseOffset + result.index.endOffset) "
                    + "with \(result.index.entries.count)")
        }
    }

    /// Whether a listed file is gone now (deleted by a live writer while we read).
    func vanished(_ name: String) -> Bool {
        do { return try fileSystem.kind(of: LogFileNames.join(directory, name)) == nil } catch { return false }
    }

    mutating func add(
        _ file: String, _ filePosition: UInt64, offset: UInt64? = nil, byteCount: UInt64? = nil,
        _ severity: VerificationReport.Severity, _ message: String
    ) {
        report.problems.append(
            .init(
                file: file, filePosition: filePosition, offset: offset, byteCount: byteCount,
                severity: severity, message: message))
    }
}
