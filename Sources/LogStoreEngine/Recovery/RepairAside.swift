import Foundation

/// Where repair puts every file it is about to change or delete, as it was, before it changes it:
/// one folder `repair-<UTC time>` (for example `repair-20261126T041503Z`) inside the store
/// directory, created on first use. A file repair changes in place (a segment it cuts, a segment
/// header it rewrites, store.meta) is copied whole, synced, before the change; a file repair drops
/// (a later segment, its index, a checkpoint) is moved there instead of being deleted. Copying every
/// file of the folder back over the store undoes the repair.
///
/// The folder is inside the store directory because nothing the engine does may touch a path
/// outside it (issue 14, item 6); an open lists it among ``RecoveryReport/unknownFiles`` and leaves
/// it alone.
struct RepairAside {
    static let folderPrefix = "repair-"

    let directory: String
    let fileSystem: any FileSystem

    /// The folder's path, creating it (and syncing the store directory) on first use.
    private func folder(_ report: inout RecoveryReport) throws(LogError) -> String {
        if let existing = report.setAsideDirectory { return existing }
        let stamp = Self.folderPrefix + Self.utcStamp(secondsSince1970: time(nil))
        var name = stamp
        // Bounded: a name is taken only by an earlier repair in the same second.
        var attempt = 1
        while (try? fileSystem.kind(of: LogFileNames.join(directory, name))) != nil {
            attempt += 1
            name = stamp + "-\(attempt)"
        }
        let path = LogFileNames.join(directory, name)
        do {
            try fileSystem.createDirectory(path)
            try fileSystem.syncDirectory(directory)
        } catch {
            throw LogError.io(error, "Creating \(path) to keep the files repair changes")
        }
        report.setAsideDirectory = path
        return path
    }

    /// `yyyyMMdd'T'HHmmss'Z'` in UTC (ISO 8601's basic format, as `ISO8601DateFormatter` writes it
    /// with year, month, day, time and time zone), made with `gmtime_r` rather than a formatter:
    /// creating an ICU formatter costs more than the rest of a small repair.
    static func utcStamp(secondsSince1970: time_t) -> String {
        var seconds = secondsSince1970
        var parts = tm()
        guard gmtime_r(&seconds, &parts) != nil else { return "\(secondsSince1970)Z" }
        func twoDigits(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)" + twoDigits(parts.tm_mon + 1) + twoDigits(parts.tm_mday) + "T"
            + twoDigits(parts.tm_hour) + twoDigits(parts.tm_min) + twoDigits(parts.tm_sec) + "Z"
    }

    /// Copies the store's file `name` into the folder, whole and synced, before it is changed.
    func copy(_ name: String, report: inout RecoveryReport) throws(LogError) {
        // A file changed twice (a header rewritten, then its tail cut) is kept as it first was.
        guard !report.setAsideFiles.contains(name) else { return }
        let folder = try folder(&report)
        let source = LogFileNames.join(directory, name)
        let target = LogFileNames.join(folder, name)
        do {
            let input = try fileSystem.openFile(source, mode: .readOnly)
            defer { input.close() }
            let output = try fileSystem.openFile(target, mode: .createNew)
            defer { output.close() }
            let size = try input.size()
            var buffer = [UInt8](repeating: 0, count: Int(min(size, 1024 * 1024)))
            var position: UInt64 = 0
            // Bounded by the size read first: each pass copies at least one byte or stops.
            while position < size {
                let count = try input.read(
                    into: &buffer, range: 0..<Int(min(UInt64(buffer.count), size - position)), at: position)
                guard count > 0 else { break }
                // Zeros are skipped (preallocated space); the truncate below gives the file its size.
                if buffer[0..<count].contains(where: { $0 != 0 }) {
                    try output.write(buffer, range: 0..<count, at: position)
                }
                position += UInt64(count)
            }
            try output.truncate(toByteCount: position)
            try output.sync()
            try fileSystem.syncDirectory(folder)
        } catch {
            throw LogError.io(error, "Copying \(source) to \(target) before repairing it")
        }
        report.setAsideFiles.append(name)
    }

    /// Moves the store's file `name` into the folder instead of deleting it.
    func move(_ name: String, report: inout RecoveryReport) throws(LogError) {
        let folder = try folder(&report)
        let source = LogFileNames.join(directory, name)
        let target = LogFileNames.join(folder, name)
        do {
            try fileSystem.rename(source, to: target)
            try fileSystem.syncDirectory(folder)
            try fileSystem.syncDirectory(directory)
        } catch {
            throw LogError.io(error, "Moving \(source) to \(target)")
        }
        report.setAsideFiles.append(name)
    }
}
