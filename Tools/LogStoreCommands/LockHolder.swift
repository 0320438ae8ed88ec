import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Which process holds a store's writer's lock, read from `/proc/locks` (Linux): the `FLOCK`
/// line whose device and inode are the store's `LOCK` file's, and that process's command line.
enum LockHolder {
    /// `process 1234 (logstore compact /tmp/store)`, or `nil` when no process holds the lock or
    /// `/proc/locks` cannot tell (another system, another PID namespace).
    static func find(directory: String) -> String? {
        guard let pid = pid(directory: directory) else { return nil }
        let command = commandLine(pid: pid)
        return "process \(pid)" + (command.map { " (\($0))" } ?? "")
    }

    /// The PID holding an `flock` on `<directory>/LOCK`.
    static func pid(directory: String) -> Int32? {
        var status = stat()
        guard stat(directory + "/LOCK", &status) == 0,
            let locks = try? String(contentsOfFile: "/proc/locks", encoding: .utf8)
        else { return nil }
        let device = UInt64(status.st_dev)
        // glibc's gnu_dev_major/minor, spelled out.
        let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~UInt64(0xfff))
        let minor = (device & 0xff) | ((device >> 12) & ~UInt64(0xff))
        return holder(inLocks: locks, major: major, minor: minor, inode: UInt64(status.st_ino))
    }

    /// Parses `/proc/locks`: `1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF` (major and minor
    /// in hex, the inode in decimal); waiting requests (`1: -> FLOCK …`) are skipped.
    static func holder(inLocks text: String, major: UInt64, minor: UInt64, inode: UInt64) -> Int32? {
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 6, fields[1] == "FLOCK" else { continue }
            let file = fields[5].split(separator: ":")
            guard file.count == 3, UInt64(file[0], radix: 16) == major, UInt64(file[1], radix: 16) == minor,
                UInt64(file[2]) == inode
            else { continue }
            return Int32(fields[4])
        }
        return nil
    }

    /// The command line of `pid`, arguments joined by spaces, at most 120 characters.
    static func commandLine(pid: Int32) -> String? {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline"), !data.isEmpty else {
            return nil
        }
        let arguments = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        var text = arguments.joined(separator: " ")
        if text.count > 120 { text = String(text.prefix(119)) + "…" }
        return text
    }
}
