import Foundation

extension LogCore {
    static func open(directory: String, options: LogOptions) throws(LogError) -> LogCore {
        try options.validate()
        let fileSystem = options.fileSystem
        var report = RecoveryReport()
        try prepareDirectory(directory, options: options, report: &report)
        // Refuse a directory that is not (and may not become) a store before creating LOCK in it.
        try checkIsOrMayBecomeStore(directory, names: try listDirectory(directory, fileSystem), options: options)
        let shared = options.allowsOtherWriters
        let lock = try DirectoryLock.acquire(directory: directory, fileSystem: fileSystem, shared: shared)
        if shared && !lock.wasAlone {
            do throws(LogError) {
                return try openBesideWriters(directory: directory, options: options, lock: lock)
            } catch {
                lock.release()
                throw error
            }
        }
        do throws(LogError) {
            let names = try listDirectory(directory, fileSystem)
            try removeTemporaryFiles(names, directory: directory, fileSystem: fileSystem, report: &report)
            // The names just listed may be in the page cache only (a crash after a rename, before
            // its directory fsync): make them durable before anything is appended to them.
            do { try fileSystem.syncDirectory(directory) } catch { throw LogError.io(error, "Syncing \(directory)") }
            let meta = try readOrCreateMeta(directory, names: names, options: options, report: &report)
            var segmentOffsets = names.compactMap(LogFileNames.segmentBaseOffset).sorted()
            if segmentOffsets.isEmpty {
                // A new store, or a crash between writing store.meta and the first segment.
                do {
                    _ = try createSegment(
                        directory: directory, storeID: meta.storeID, baseOffset: 0, fileSystem: fileSystem)
                } catch {
                    throw LogError.io(error, "Creating the first segment")
                }
                segmentOffsets = [0]
            }
            report.unknownFiles = unknownFiles(names)
            let recovered = try Recovery(
                directory: directory, meta: meta, options: options, writable: true,
                checkpointOffsets: names.compactMap(LogFileNames.checkpointOffset), report: report
            ).run(segmentOffsets: segmentOffsets)
            var segments = recovered.segments
            var indexesToWrite = recovered.indexesToWrite
            if segments.last!.formatVersion < FormatConstants.formatVersion {
                try rollPastOlderVersion(
                    &segments, end: recovered.end, directory: directory, meta: meta, fileSystem: fileSystem)
                if segments.count > recovered.segments.count { indexesToWrite.append(recovered.segments.last!) }
            }
            let last = segments.last!
            // Alone (exclusive LOCK): the full recovery above ran; other writers come in once LOCK
            // is shared, below.
            let writers = shared ? try SharedWriters.open(directory: directory, fileSystem: fileSystem, alone: true) : nil
            let core = LogCore(
                directory: directory, options: options, meta: meta, report: recovered.report,
                lock: lock, segments: segments, end: recovered.end,
                needsDurableEndMark: recovered.end > last.baseOffset && recovered.lastRecordType != .durableEndMark,
                writers: writers)
            core.state.pendingIndexWrites = indexesToWrite
            do throws(LogError) {
                try core.startPublishing(repaired: options.repairs)
                if shared { try lock.convertToShared() }
            } catch {
                for segment in segments { segment.handle.close() }  // the core is never returned
                writers?.close()
                throw error
            }
            core.startSyncer()
            return core
        } catch {
            lock.release()
            throw error
        }
    }

    /// A writer never appends to a segment of an older version (D12; version 3: dictionaries only
    /// in version-3 segments, docs/FORMAT.md §6.8): the last segment
    /// is sealed and a new one starts at the end — recovery synced the old one through it, so the
    /// new segment's base is durable. An older segment without records is replaced instead (two
    /// segments cannot share a base offset); the rename swaps it atomically. A crash before the
    /// rename leaves the old store and a temporary file the next open removes.
    private static func rollPastOlderVersion(
        _ segments: inout [SegmentFile], end: UInt64, directory: String, meta: StoreMeta, fileSystem: any FileSystem
    ) throws(LogError) {
        let last = segments.last!
        do {
            let created = try createSegment(
                directory: directory, storeID: meta.storeID, baseOffset: end, fileSystem: fileSystem)
            if end == last.baseOffset {
                last.handle.close()
                segments[segments.count - 1] = created
            } else {
                segments.append(created)
            }
        } catch {
            throw LogError.io(error, "Starting a version-\(FormatConstants.formatVersion) segment at offset \(end)")
        }
    }

    static func openReadOnly(directory: String, options: LogOptions) throws(LogError) -> LogCore {
        let fileSystem = options.fileSystem
        switch try? fileSystem.kind(of: directory) {
        case .directory: break
        case nil: throw LogError(.notAStore, "No store at \(directory): the directory does not exist.", file: directory)
        case .regular, .other:
            throw LogError(.notAStore, "\(directory) is a file, not a store directory.", file: directory)
        }
        guard try listDirectory(directory, fileSystem).contains(FormatConstants.storeMetaFileName) else {
            throw LogError(.notAStore, "\(directory) is not a LogStore store: it has no store.meta.", file: directory)
        }
        let meta = try readMeta(directory, fileSystem: fileSystem)
        // Before listing the segments: every record before the end a live writer published is
        // then in the files listed (D11).
        let shared = readSharedEnd(directory: directory, fileSystem: fileSystem, storeID: meta.storeID)
        let names = try listDirectory(directory, fileSystem)
        let segmentOffsets = names.compactMap(LogFileNames.segmentBaseOffset).sorted()
        guard !segmentOffsets.isEmpty else {
            throw LogError(
                .notAStore,
                "The store at \(directory) has no segment yet; open it for writing once to "
                    + "finish creating it.", file: directory)
        }
        var report = RecoveryReport()
        report.unknownFiles = unknownFiles(names)
        var recovery = Recovery(directory: directory, meta: meta, options: options, writable: false, report: report)
        recovery.publishedEnd = shared?.1?.visibleEnd
        let recovered = try recovery.run(segmentOffsets: segmentOffsets)
        // What the files hold, as before a writer of this version: the published end may be stale
        // (a writer that crashed after unsynced writes the next open keeps), and a read-only open
        // cannot tell a live writer from a dead one without touching its lock. Following then
        // moves on only once the published end passes this.
        let core = LogCore(
            directory: directory, options: options, meta: meta, report: recovered.report,
            lock: nil, segments: recovered.segments, end: recovered.end)
        core.state.coordination = shared?.0
        core.state.shared = shared?.1
        core.state.sharedBytes = shared?.1?.encoded() ?? []
        return core
    }

    /// Creates the directory when allowed and checks it is one.
    private static func prepareDirectory(_ directory: String, options: LogOptions, report: inout RecoveryReport)
        throws(LogError)
    {
        let fileSystem = options.fileSystem
        let kind: FileKind?
        do { kind = try fileSystem.kind(of: directory) } catch { throw LogError.io(error, "Reading \(directory)") }
        switch kind {
        case .directory:
            return
        case .regular, .other:
            throw LogError(.notAStore, "\(directory) is a file, not a store directory.", file: directory)
        case nil:
            guard options.createsIfMissing else {
                throw LogError(.notAStore, "No store at \(directory): the directory does not exist.", file: directory)
            }
            try createDirectories(directory, fileSystem: fileSystem)
        }
    }

    /// A directory with store.meta (or segments) is a store; an empty one (or one holding only
    /// LOCK and the engine's temporary files) may become one when creating is allowed.
    private static func checkIsOrMayBecomeStore(_ directory: String, names: [String], options: LogOptions)
        throws(LogError)
    {
        if names.contains(FormatConstants.storeMetaFileName)
            || names.contains(where: { LogFileNames.segmentBaseOffset($0) != nil })
        {
            return
        }
        let unexpected = names.filter { $0 != FormatConstants.lockFileName && !LogFileNames.isTemporary($0) }
        guard unexpected.isEmpty else {
            throw LogError(
                .notAStore,
                "\(directory) is not a LogStore store and is not empty "
                    + "(it holds \(unexpected.sorted().prefix(3).joined(separator: ", "))…). Choose an empty "
                    + "directory for a new store.", file: directory)
        }
        guard options.createsIfMissing else {
            throw LogError(.notAStore, "\(directory) is not a LogStore store: it has no store.meta.", file: directory)
        }
    }

    static func listDirectory(_ directory: String, _ fileSystem: any FileSystem) throws(LogError) -> [String] {
        do { return try fileSystem.contentsOfDirectory(directory) } catch {
            throw LogError.io(error, "Listing \(directory)")
        }
    }

    /// Temporary files are the half-done creations of a crashed process, and an index whose
    /// segment is gone is what a crash during history compaction leaves: never referenced, safe
    /// to remove.
    private static func removeTemporaryFiles(
        _ names: [String], directory: String, fileSystem: any FileSystem,
        report: inout RecoveryReport
    ) throws(LogError) {
        let segments = Set(names.compactMap(LogFileNames.segmentBaseOffset))
        let orphanIndexes = names.filter { LogFileNames.indexBaseOffset($0).map { !segments.contains($0) } ?? false }
        let temporary = (names.filter(LogFileNames.isTemporary) + orphanIndexes).sorted()
        guard !temporary.isEmpty else { return }
        do {
            for name in temporary { try fileSystem.removeFile(LogFileNames.join(directory, name)) }
            try fileSystem.syncDirectory(directory)
        } catch {
            throw LogError.io(error, "Removing temporary files")
        }
        report.removedTemporaryFiles = temporary
    }

    private static func readOrCreateMeta(
        _ directory: String, names: [String], options: LogOptions,
        report: inout RecoveryReport
    ) throws(LogError) -> StoreMeta {
        if names.contains(FormatConstants.storeMetaFileName) {
            do {
                return try readMeta(directory, fileSystem: options.fileSystem)
            } catch  where error.code == .corruption && options.repairs {
                return try rebuildMeta(directory, names: names, options: options, report: &report)
            }
        }
        if names.contains(where: { LogFileNames.segmentBaseOffset($0) != nil }) {
            if options.repairs { return try rebuildMeta(directory, names: names, options: options, report: &report) }
            throw LogError.corruption(
                LogFileNames.join(directory, FormatConstants.storeMetaFileName), offset: nil,
                "store.meta is missing but segment files exist")
        }
        let unexpected = names.filter { $0 != FormatConstants.lockFileName && !LogFileNames.isTemporary($0) }
        guard unexpected.isEmpty else {
            throw LogError(
                .notAStore,
                "\(directory) is not a LogStore store and is not empty "
                    + "(it holds \(unexpected.sorted().prefix(3).joined(separator: ", "))…). Choose an empty "
                    + "directory for a new store.", file: directory)
        }
        guard options.createsIfMissing else {
            throw LogError(.notAStore, "\(directory) is not a LogStore store: it has no store.meta.", file: directory)
        }
        let meta = StoreMeta(storeID: UUID(), creationTimeMicroseconds: Int64(Date().timeIntervalSince1970 * 1_000_000))
        try writeFileAtomically(
            directory: directory, name: FormatConstants.storeMetaFileName, bytes: meta.encoded(),
            fileSystem: options.fileSystem)
        report.createdStore = true
        return meta
    }

    /// Repair of a damaged or missing store.meta: every field but the creation time is in the
    /// segment headers, which carry the store's UUID under their own CRC (and so do the checkpoint
    /// files' headers, asked when no segment header survives). The damaged file is
    /// copied aside first (``RepairAside``).
    private static func rebuildMeta(
        _ directory: String, names: [String], options: LogOptions,
        report: inout RecoveryReport
    ) throws(LogError) -> StoreMeta {
        let path = LogFileNames.join(directory, FormatConstants.storeMetaFileName)
        var storeIDs: Set<UUID> = []
        var versions: [UInt32] = []
        for name in names where LogFileNames.segmentBaseOffset(name) != nil {
            let segmentPath = LogFileNames.join(directory, name)
            guard let handle = try? options.fileSystem.openFile(segmentPath, mode: .readOnly) else { continue }
            defer { handle.close() }
            guard let bytes = try? handle.read(byteCount: FormatConstants.segmentHeaderByteCount, at: 0),
                case .success(let header) = SegmentHeader.decode(bytes)
            else { continue }
            storeIDs.insert(header.storeID)
            versions.append(header.formatVersion)
        }
        if storeIDs.isEmpty {
            for name in names where LogFileNames.checkpointOffset(name) != nil {
                guard let handle = try? options.fileSystem.openFile(LogFileNames.join(directory, name), mode: .readOnly)
                else { continue }
                defer { handle.close() }
                guard let bytes = try? handle.read(byteCount: FormatConstants.segmentHeaderByteCount, at: 0),
                    case .success(let header) = RecordFileHeader.decode(bytes, magic: FormatConstants.checkpointMagic)
                else { continue }
                storeIDs.insert(header.storeID)
            }
        }
        let missing = !names.contains(FormatConstants.storeMetaFileName)
        let state = missing ? "missing" : "damaged"
        guard storeIDs.count == 1, let storeID = storeIDs.first else {
            // Nothing left names the store: repair cannot choose its identity (tokens and
            // checkpoints carry it), so it changes nothing.
            throw LogError(
                .corruption,
                "Corruption in \(path): store.meta is \(state) and "
                    + (storeIDs.isEmpty
                        ? "no segment or checkpoint header survives to rebuild it from"
                        : "the segments name \(storeIDs.count) different stores")
                    + "; repair cannot rebuild it. Restore store.meta from a backup; nothing was changed.",
                file: path, offset: 0)
        }
        if !missing { try RepairAside(directory: directory, fileSystem: options.fileSystem).copy(
            FormatConstants.storeMetaFileName, report: &report) }
        // The creation time is lost with the old file: the repair time stands in for it. The
        // version is the oldest segment's (store.meta states the version the store was created with).
        let meta = StoreMeta(
            formatVersion: versions.min() ?? FormatConstants.formatVersion,
            storeID: storeID, creationTimeMicroseconds: Int64(Date().timeIntervalSince1970 * 1_000_000))
        report.repairNotes.append(
            "store.meta \(missing ? "recreated" : "rebuilt") from the headers of the store's files "
                + "(store \(storeID)); only its creation time is new.")
        try writeFileAtomically(
            directory: directory, name: FormatConstants.storeMetaFileName, bytes: meta.encoded(),
            fileSystem: options.fileSystem)
        report.rebuiltStoreMeta = true
        return meta
    }

    static func readMeta(_ directory: String, fileSystem: any FileSystem) throws(LogError) -> StoreMeta {
        let path = LogFileNames.join(directory, FormatConstants.storeMetaFileName)
        let bytes = try readWholeFile(path, fileSystem: fileSystem, byteCountMax: 4096)
        switch StoreMeta.decode(bytes) {
        case .success(let meta): return meta
        case .failure(.newerVersion(let version)):
            throw LogError(
                .newerFormatVersion,
                "The store at \(directory) has format version \(version); this "
                    + "LogStore reads version \(FormatConstants.formatVersion) and older. Use a newer LogStore.",
                file: path)
        case .failure(.damaged(let what)):
            throw LogError(
                .corruption,
                "Corruption in \(path): \(what). `logstore repair` rebuilds store.meta from "
                    + "the segment headers (only the creation time is lost).", file: path, offset: 0)
        }
    }

    static func readWholeFile(_ path: String, fileSystem: any FileSystem, byteCountMax: Int) throws(LogError) -> [UInt8]
    {
        do {
            let handle = try fileSystem.openFile(path, mode: .readOnly)
            defer { handle.close() }
            let size = try handle.size()
            guard size <= UInt64(byteCountMax) else {
                throw LogError.corruption(
                    path, offset: nil, "file is \(size) bytes, more than the \(byteCountMax) allowed")
            }
            var bytes = [UInt8](repeating: 0, count: Int(size))
            let count = try handle.read(into: &bytes, range: 0..<bytes.count, at: 0)
            return Array(bytes[0..<count])
        } catch let error as FileSystemError {
            throw LogError.io(error, "Reading \(path)")
        } catch let error as LogError {
            throw error
        } catch {
            preconditionFailure("unexpected error \(error)")
        }
    }

    /// Temp file, write, fsync, rename, directory fsync: after a crash either the old state or the
    /// whole new file is there (a leftover temp file is removed on the next open).
    static func writeFileAtomically(directory: String, name: String, bytes: [UInt8], fileSystem: any FileSystem)
        throws(LogError)
    {
        do throws(FileSystemError) {
            try AtomicFile.write(bytes, to: LogFileNames.join(directory, name), fileSystem: fileSystem)
        } catch {
            throw LogError.io(error, "Writing \(name)")
        }
    }

    /// Creates a segment holding only its header, as temp file + header + fsync + rename +
    /// directory fsync, and returns its open handle.
    static func createSegment(
        directory: String, storeID: UUID, baseOffset: UInt64,
        fileSystem: any FileSystem
    ) throws(FileSystemError) -> SegmentFile {
        let finalPath = LogFileNames.join(directory, LogFileNames.segment(baseOffset))
        let file = try AtomicFile(path: finalPath, fileSystem: fileSystem)
        do throws(FileSystemError) {
            try file.handle.write(SegmentHeader(storeID: storeID, baseOffset: baseOffset).encoded(), at: 0)
        } catch {
            file.abandon()
            throw error
        }
        // The handle stays open on the renamed segment: the writer appends through it.
        let handle = try file.commit(keepOpen: true)!
        return SegmentFile(
            baseOffset: baseOffset, formatVersion: FormatConstants.formatVersion, path: finalPath, handle: handle)
    }

    private static func unknownFiles(_ names: [String]) -> [String] {
        names.filter { name in
            !FormatConstants.controlFileNames.contains(name) && LogFileNames.segmentBaseOffset(name) == nil
                && LogFileNames.indexBaseOffset(name) == nil
                && LogFileNames.checkpointOffset(name) == nil && !LogFileNames.isTemporary(name)
        }.sorted()
    }

    /// Creates `directory` and any missing parents (like `mkdir -p`), syncing each parent after
    /// its new child so the whole path survives a power cut.
    private static func createDirectories(_ directory: String, fileSystem: any FileSystem) throws(LogError) {
        var missing: [String] = []
        var path = directory
        // Bounded by the path's depth: each step moves to a shorter parent.
        while (try? fileSystem.kind(of: path)) == nil {
            missing.append(path)
            let parent = parentDirectory(of: path)
            guard parent != path else { break }
            path = parent
        }
        do {
            for path in missing.reversed() {
                try fileSystem.createDirectory(path)
                try fileSystem.syncDirectory(parentDirectory(of: path))
            }
        } catch {
            throw LogError.io(error, "Creating the store directory \(directory)")
        }
    }

    static func parentDirectory(of path: String) -> String {
        var trimmed = path
        while trimmed.count > 1 && trimmed.hasSuffix("/") { trimmed.removeLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return "." }
        return slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
    }
}
