import Foundation

/// What ``Log/verify(directory:fileSystem:)`` found: every problem in a store directory, and how
/// much it checked.
///
/// ```swift
/// let report = try Log.verify(directory: "/var/lib/app/store")
/// for problem in report.problems { print(problem) }
/// if report.hasCorruption { exit(1) }
/// ```
public struct VerificationReport: Sendable, Equatable {
    /// How serious a problem is.
    public enum Severity: String, Sendable, Equatable, CaseIterable {
        /// Bytes that must be right are not: opening refuses the store (or, for a rebuildable
        /// file, the data it describes is wrong).
        case corruption
        /// Worth knowing, but opening copes on its own: a torn tail inside the unsynced window,
        /// a temporary file left by a crash, an index file that will be rebuilt.
        case warning
    }

    /// One problem, located as precisely as the damage allows.
    public struct Problem: Sendable, Equatable, CustomStringConvertible {
        /// The file's name inside the store directory, for example `00000000000000004096.log`.
        public var file: String
        /// Byte position in that file where the problem starts (0 for whole-file problems).
        public var filePosition: UInt64
        /// The logical offset where the problem starts, when it is inside the log.
        public var offset: UInt64?
        /// How many bytes the problem covers, when it is a damaged byte range.
        public var byteCount: UInt64?
        public var severity: Severity
        /// What is wrong and what was expected there.
        public var message: String

        public init(
            file: String, filePosition: UInt64, offset: UInt64? = nil, byteCount: UInt64? = nil,
            severity: Severity, message: String
        ) {
            self.file = file
            self.filePosition = filePosition
            self.offset = offset
            self.byteCount = byteCount
            self.severity = severity
            self.message = message
        }

        public var description: String {
            var location = "\(file) @ byte \(filePosition)"
            if let offset { location += ", offset \(offset)" }
            if let byteCount { location += ", \(byteCount) bytes" }
            return "\(severity.rawValue): \(location): \(message)"
        }
    }

    /// The directory that was verified.
    public var directory: String
    /// The store's UUID: from `store.meta`, or from the first valid segment header when
    /// `store.meta` is damaged; `nil` when neither could be read.
    public var storeID: UUID?
    /// Every problem, in the order found: `store.meta`, segments oldest first, then other files.
    public var problems: [Problem] = []
    /// Segment files checked.
    public var segmentCount = 0
    /// Records whose header and payload checked out (including any inside a damaged tail),
    /// durable-end marks not included.
    public var recordCount: UInt64 = 0
    /// Bytes of those records, headers included.
    public var recordByteCount: UInt64 = 0
    /// Durable-end marks (FORMAT.md §6.6) that checked out.
    public var markCount: UInt64 = 0
    /// Index files checked.
    public var indexFileCount = 0
    /// Checkpoint files found. Their position is checked against the end of the log, and their
    /// framing (file header, every record's CRCs, nothing after the last record); what their
    /// payloads mean is checked by the model layer when it opens the store.
    public var checkpointFiles: [String] = []
    /// Files that are not part of the format; left alone and not counted as problems.
    public var unknownFiles: [String] = []
    /// Segment, checkpoint and index files that were listed but gone when read: a live writer
    /// deleted them meanwhile (history compaction, checkpoint pruning). Not problems.
    public var vanishedFiles: [String] = []

    public init(directory: String) {
        self.directory = directory
    }

    /// True when nothing at all was found: no corruption and no warning.
    public var isClean: Bool { problems.isEmpty }
    /// True when at least one problem is ``Severity/corruption``.
    public var hasCorruption: Bool { problems.contains { $0.severity == .corruption } }
    /// The problems of severity ``Severity/corruption``.
    public var corruptions: [Problem] { problems.filter { $0.severity == .corruption } }
    /// The problems of severity ``Severity/warning``.
    public var warnings: [Problem] { problems.filter { $0.severity == .warning } }
}
