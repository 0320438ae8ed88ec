import CFutex
import Foundation

/// The store's `coordination` file: one ``SharedEnd`` slot the writing process rewrites (one
/// `pwrite`, never synced) whenever the visible end moves, and that read-only processes read to
/// learn, in one `pread`, whether anything is new (DECISIONS.md D11, FORMAT.md §10.1).
///
/// Created by the writer in place and never unlinked, renamed or truncated, like `LOCK`: a reader's
/// handle and an inotify watch stay on the one inode. A reader never trusts it beyond the
/// records: everything up to the visible end it states is read and checked before it is seen.
///
/// A process writing a store shared by writers maps both slots (the file grown to 160 bytes) and
/// reads them from the mapping: its turn read two slots and its `fdatasync` three, each a `pread`
/// (issue 12: about 2 µs each, a tenth of a lone saver's save beside the store opened alone).
/// Every write stays a `pwrite`: a read-only process's inotify watch sees `pwrite`s, not stores
/// into a mapping, and a process killed in a `pwrite` leaves the slot whole, where one killed
/// between two word stores would leave it torn. A mapped read that does not check out is read
/// again with `pread`, as before (a slot being rewritten).
final class CoordinationFile: Sendable {
    let handle: any FileHandle
    /// Both slots, mapped shared (a writer of a store shared by writers, on a file system that
    /// maps files), or `nil`: then every read is a `pread`.
    private let mapping: SharedMapping?

    /// The bytes a writer of a store shared by writers maps: slot 1 and the turn slot.
    static let mappedByteCount = SharedEnd.byteCount + TurnSlot.byteCount

    private init(handle: any FileHandle, mapping: SharedMapping? = nil) {
        precondition(TurnSlot.fileOffset == UInt64(SharedEnd.byteCount), "the turn slot follows slot 1")
        self.handle = handle
        self.mapping = mapping
    }

    /// Whether the slots are read from a mapping (tests).
    var readsMapping: Bool { mapping != nil }

    static func path(in directory: String) -> String {
        LogFileNames.join(directory, FormatConstants.coordinationFileName)
    }

    /// Opens (creating it when missing) the file of the store's writer, which holds `LOCK`.
    /// `mapsSlots`: a writer of a store shared by writers, which reads both slots at every turn
    /// and `fdatasync`; they are mapped when the file system can (else read with `pread`: the
    /// mapping only saves time, so failing to map is never an error).
    static func openForWriting(directory: String, fileSystem: any FileSystem, mapsSlots: Bool = false)
        throws(LogError) -> CoordinationFile
    {
        let handle: any FileHandle
        do {
            handle = try fileSystem.openFile(path(in: directory), mode: .createOrOpen)
        } catch {
            throw LogError.io(error, "Opening the coordination file of \(directory)")
        }
        let mapsSlots = mapsSlots && Self.cachesFilesInOnePlace(path(in: directory))
        let mapping = mapsSlots ? (try? handle.mapShared(byteCount: mappedByteCount)) ?? nil : nil
        return CoordinationFile(handle: handle, mapping: mapping)
    }

    /// Whether the file lies on a local file system whose mapped pages and `pwrite`s are one
    /// page cache (ext4, XFS, Btrfs, F2FS, tmpfs, overlayfs over them): a read through the mapping
    /// sees every `pwrite` of another process at once. Elsewhere (FUSE with direct I/O, network
    /// file systems) a mapped read could be stale and still check out, so the slots are read
    /// with `pread` there (review of c5bc436, finding 5).
    static func cachesFilesInOnePlace(_ path: String) -> Bool {
        // ext4 (and ext2/3), XFS, Btrfs, F2FS, tmpfs, overlayfs.
        let local: Set<UInt64> = [0xEF53, 0x5846_5342, 0x9123_683E, 0xF2F5_2010, 0x0102_1994, 0x794C_7630]
        return local.contains(cfutex_file_system_magic(path))
    }

    /// Opens the file for reading, or `nil` when no writer of this version has created it yet.
    static func openForReading(directory: String, fileSystem: any FileSystem) -> CoordinationFile? {
        guard let handle = try? fileSystem.openFile(path(in: directory), mode: .readOnly) else { return nil }
        return CoordinationFile(handle: handle)
    }

    /// The slot, or `nil` when the file holds none that checks out. A slot being rewritten while
    /// it is read fails its CRC: read again (a few times; the writer's `pwrite` of 80 bytes into
    /// the page cache takes microseconds).
    func read() -> SharedEnd? {
        for attempt in 0..<8 {
            guard let bytes = readBytes(mapped: attempt == 0) else { return nil }
            if let slot = SharedEnd.decode(bytes) { return slot }
            // An all-zero slot is a file just created: nothing published yet.
            if bytes.allSatisfy({ $0 == 0 }) { return nil }
        }
        return nil
    }

    /// The slot's bytes as they are now, undecoded (a reader compares them with the slot it
    /// followed last: the common "nothing new" answer is one `pread` and an 80-byte compare).
    func readBytes() -> [UInt8]? {
        readBytes(mapped: true)
    }

    /// Slot 1's bytes, from the mapping when `mapped` and there is one, else with `pread`.
    private func readBytes(mapped: Bool) -> [UInt8]? {
        if mapped, let mapping { return mapping.loadBytes(at: 0, count: SharedEnd.byteCount) }
        var bytes = [UInt8](repeating: 0, count: SharedEnd.byteCount)
        guard let count = try? handle.read(into: &bytes, range: 0..<bytes.count, at: 0), count == SharedEnd.byteCount
        else { return nil }
        return bytes
    }

    /// Rewrites the slot. A failure costs the readers only their view of new records (they keep
    /// what they have); it never touches the log, so it is not an error of the save that caused it.
    func write(_ slot: SharedEnd) {
        try? handle.write(slot.encoded(), at: 0)
    }

    /// Rewrites the slot, throwing when the write fails: a store shared by several writers
    /// acknowledges nothing whose durable end it could not publish, and a failure must reach
    /// the others (D11 stage 2).
    func writeChecked(_ slot: SharedEnd) throws(LogError) {
        do throws(FileSystemError) {
            try handle.write(slot.encoded(), at: 0)
        } catch {
            throw LogError.io(error, "Writing the coordination file's slot")
        }
    }

    /// The turn slot (offset 80, FORMAT.md §10.2), or `nil` when none checks out (a store never
    /// shared by several writers, or a slot being rewritten: read again a few times).
    func readTurn() -> TurnSlot? {
        for attempt in 0..<8 {
            guard let bytes = try? readTurnBytes(mapped: attempt == 0), bytes.count == TurnSlot.byteCount else {
                return nil
            }
            if let slot = TurnSlot.decode(bytes) { return slot }
            if bytes.allSatisfy({ $0 == 0 }) { return nil }
        }
        return nil
    }

    /// The turn slot's bytes, from the mapping when `mapped` and there is one, else with `pread`
    /// (fewer than 80 when the file ends before the slot does).
    private func readTurnBytes(mapped: Bool) throws(FileSystemError) -> [UInt8] {
        if mapped, let mapping {
            return mapping.loadBytes(at: Int(TurnSlot.fileOffset), count: TurnSlot.byteCount)
        }
        var bytes = [UInt8](repeating: 0, count: TurnSlot.byteCount)
        let count = try handle.read(into: &bytes, range: 0..<bytes.count, at: TurnSlot.fileOffset)
        bytes.removeSubrange(count...)
        return bytes
    }

    /// The turn slot for a writer's catch-up: `nil` only when none was ever written (the bytes
    /// are zeros or absent); a slot that cannot be read or does not check out (after a few
    /// reads) is an error — a writer never guesses where the log ends (review12 A3).
    func readTurnChecked(in directory: String) throws(LogError) -> TurnSlot? {
        for attempt in 0..<8 {
            let bytes: [UInt8]
            do { bytes = try readTurnBytes(mapped: attempt == 0) } catch {
                throw LogError.io(error, "Reading the coordination file's turn slot")
            }
            if bytes.allSatisfy({ $0 == 0 }) { return nil }
            if bytes.count == TurnSlot.byteCount, let slot = TurnSlot.decode(bytes) { return slot }
        }
        throw LogError(
            .corruption,
            "The turn slot of \(directory)'s coordination file does not check out: where the other writers' "
                + "records end is unknown. Close every process writing the store; the first to open it alone "
                + "rebuilds the slot.", file: Self.path(in: directory), offset: TurnSlot.fileOffset)
    }

    /// Rewrites the turn slot (the `TURN` holder only), throwing when the write fails (the next
    /// turn holder's catch-up depends on it).
    func writeTurn(_ slot: TurnSlot) throws(LogError) {
        do throws(FileSystemError) {
            try handle.write(slot.encoded(), at: TurnSlot.fileOffset)
        } catch {
            throw LogError.io(error, "Writing the coordination file's turn slot")
        }
    }

    func close() { handle.close() }
}
