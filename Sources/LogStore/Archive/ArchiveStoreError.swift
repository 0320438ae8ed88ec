#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Why an ``ArchiveStore`` could not read or write its file. Refused saves (unknown entity, wrong
/// value type, missing reference, delete denied…) throw ``LogStoreError``, exactly as
/// ``LogStore`` does: both stores resolve saves with the same code.
public enum ArchiveStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A system call on the archive failed (`operation` names it; `errno` says why).
    case io(operation: String, path: String, errno: Int32)
    /// The file is not a JSON archive this version can read.
    case corruptArchive(path: String, reason: String)
    /// The file was written by a newer format.
    case unsupportedFormat(path: String, version: Int)
    /// The file now holds another store than the one opened (replaced behind the store's back).
    case foreignArchive(path: String, expected: String, found: String)
    /// The state could not be encoded as JSON.
    case encodingFailed(reason: String)

    /// A sentence saying what failed, on which file, and why.
    public var description: String {
        switch self {
        case .io(let operation, let path, let code):
            "\(operation) failed on \(path): \(String(cString: strerror(code))) (errno \(code))."
        case .corruptArchive(let path, let reason): "\(path) is not a readable JSON archive: \(reason)."
        case .unsupportedFormat(let path, let version):
            "\(path) has archive format \(version); this version reads format \(ArchiveStore.formatVersion)."
        case .foreignArchive(let path, let expected, let found):
            "\(path) now holds store \(found), not store \(expected) that was opened."
        case .encodingFailed(let reason): "The store could not be encoded as JSON: \(reason)."
        }
    }
}
