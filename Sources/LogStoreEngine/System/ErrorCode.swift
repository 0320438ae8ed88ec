#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The `errno` values the engine tells apart, named so callers need not import Glibc.
public enum ErrorCode {
    public static let ioError: Int32 = EIO
    public static let noSpace: Int32 = ENOSPC
    public static let quotaExceeded: Int32 = EDQUOT
    public static let notFound: Int32 = ENOENT
    public static let exists: Int32 = EEXIST
    public static let wouldBlock: Int32 = EWOULDBLOCK
    public static let interrupted: Int32 = EINTR
    public static let notDirectory: Int32 = ENOTDIR
    public static let isDirectory: Int32 = EISDIR
    public static let accessDenied: Int32 = EACCES
    public static let readOnlyFileSystem: Int32 = EROFS
    /// `open` refused a symbolic link (`O_NOFOLLOW`).
    public static let symbolicLink: Int32 = ELOOP

    /// The C library's text for an `errno` value.
    public static func describe(_ code: Int32) -> String {
        String(cString: strerror(code))
    }
}
