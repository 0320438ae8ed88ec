/// An operating error of the log: what happened, what to do, and where.
///
/// Corruption, I/O failure, a full disk and a failed sync are different codes because callers
/// react differently: a full disk is recoverable (free space, save again); a failed sync makes the
/// log read-only until it is reopened; corruption stops an open unless repair is asked for.
public struct LogError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable, Equatable {
        /// The directory is missing or is not a LogStore store.
        case notAStore
        /// A file was written by a newer format version than this code reads.
        case newerFormatVersion
        /// Bytes on disk are not what they must be; the message says what was expected.
        case corruption
        /// The operating system reported an I/O error (for example `EIO`).
        case ioError
        /// The disk is full. Nothing of the failed append is visible; appends work again once
        /// space is freed.
        case outOfSpace
        /// An `fdatasync`/`fsync` failed. The log cut itself back to its last durable offset and
        /// is read-only until reopened.
        case syncFailed
        /// The log is read-only (opened without the lock, or after a failed sync).
        case readOnly
        /// Another process holds the store's lock.
        case locked
        /// This process already has the store open.
        case alreadyOpenInProcess
        /// A record's payload is larger than ``FormatConstants/recordByteCountMax``.
        case recordTooLarge
        /// An offset outside the retained, visible log.
        case offsetOutOfRange
        /// The log was closed.
        case closed
        /// A ``LogOptions`` value is out of range.
        case invalidOptions
        /// A read-only open followed a store whose writer then removed records this reader may
        /// have seen (a repair, or a cut-back after a failed sync in a non-synchronous mode): open
        /// it again.
        case reopenRequired
    }

    public var code: Code
    /// A sentence that says what happened and what to do.
    public var message: String
    /// The file the error is about, when there is one.
    public var file: String?
    /// The logical offset (or, for fixed headers, the byte position) the error is about.
    public var offset: UInt64?
    /// The system call failure behind an I/O, space or sync error.
    public var underlying: FileSystemError?

    public init(
        _ code: Code, _ message: String, file: String? = nil, offset: UInt64? = nil,
        underlying: FileSystemError? = nil
    ) {
        self.code = code
        self.message = message
        self.file = file
        self.offset = offset
        self.underlying = underlying
    }

    public var description: String {
        var text = message
        if let file {
            text += " [file: \(file)" + (offset.map { ", offset \($0)" } ?? "") + "]"
        } else if let offset {
            text += " [offset \(offset)]"
        }
        return text
    }

    static func io(_ error: FileSystemError, _ what: String) -> LogError {
        if error.isOutOfSpace {
            return LogError(
                .outOfSpace, "\(what): the disk is full (\(error)). Free space and try again.",
                file: error.path, underlying: error)
        }
        return LogError(.ioError, "\(what): \(error).", file: error.path, underlying: error)
    }

    static func corruption(_ file: String, offset: UInt64?, _ what: String) -> LogError {
        LogError(
            .corruption,
            "Corruption in \(file): \(what). Run `logstore verify` for details; "
                + "`logstore repair` truncates at the first bad record.", file: file, offset: offset)
    }
}
