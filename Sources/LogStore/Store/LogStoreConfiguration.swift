import Foundation
import LogStoreEngine

/// Where and how a ``LogStore`` keeps its log.
///
/// ```swift
/// let configuration = LogStoreConfiguration(name: "Trips", directory: "/var/lib/trips")
/// let container = try ModelContainer(for: Trip.self, BucketListItem.self, configurations: configuration)
/// ```
public struct LogStoreConfiguration: DataStoreConfiguration, Sendable {
    /// The store this configuration opens.
    public typealias Store = LogStore

    /// The configuration's name (`"default"` unless given).
    public var name: String
    /// The schema to open with; ``ModelContainer`` sets it from its model types. `nil` opens an
    /// existing store with the schema it stores (``LogStore/usesStoredSchema``).
    public var schema: Schema?
    /// The store directory (created when missing).
    public var directory: String
    /// When a save returns (default: after an `fdatasync` covers it).
    public var durability: Durability
    /// Segment size of the log.
    public var segmentByteCountMax: UInt64
    /// A checkpoint is written (off the save path, on a background thread) after this many bytes
    /// of log since the last one; 0 turns automatic checkpoints off (``LogStore/checkpoint()``
    /// still writes one on demand).
    public var checkpointIntervalByteCount: UInt64
    /// How much history to keep (default: all of it, until ``LogStore/deleteHistory(_:)``).
    public var historyRetention = HistoryRetention()
    /// What an insert colliding with a unique constraint does: update the existing model
    /// (`.upsert`, SwiftData's behaviour, the default) or fail the save (`.throw`).
    public var uniqueCollisionPolicy: UniqueCollisionPolicy = .upsert
    /// The file system (tests pass a simulated one); not part of equality.
    public var fileSystem: any FileSystem
    /// Whether saves are allowed (SwiftData's `allowsSave`); when not, a save throws.
    public var allowsSave = true
    /// A store that lives only while it is open: its directory is removed when it closes
    /// (SwiftData's `isStoredInMemoryOnly`; see ``init(_:schema:isStoredInMemoryOnly:allowsSave:)``).
    public var isStoredInMemoryOnly = false
    /// How far ahead of the write position the log keeps zeros written (`LogOptions.preallocationAheadByteCount`;
    /// 0 turns preallocation off). Default 2 MiB.
    public var preallocationAheadByteCount: UInt64 = LogOptions().preallocationAheadByteCount
    /// After this long without a new record the log appends a durable-end mark
    /// (`LogOptions.durableEndMarkDelay`; `nil`: only at close). Default 1 s.
    public var durableEndMarkDelay: Duration? = LogOptions().durableEndMarkDelay
    /// The size of segment dictionaries (`LogOptions.dictionaryByteCountMax`, docs/FORMAT.md §6.8):
    /// each segment begins with the newest payloads written before it, and its records are
    /// compressed against them (a one-Trip save: about 140 → 55 bytes). They hold copies of those
    /// payloads, which outlive deleted history until their own segment goes: 0 turns them off.
    /// Default 32 KiB.
    public var dictionaryByteCountMax = LogOptions().dictionaryByteCountMax
    /// Several processes may save into the store at once (`LogOptions.allowsOtherWriters`,
    /// DECISIONS.md D11 stage 2): each save takes the store's turn, first folds what the others
    /// saved since, then resolves against it (unique constraints hold across processes). Every
    /// writing process must set it. Default `false`: one writing process, others read-only.
    /// Checkpoints, history deletion and retention run in one process at a time (`MAINTENANCE`).
    public var allowsOtherWriters = false

    /// A store in `directory`, with synchronous durability, 64 MiB segments and a checkpoint every
    /// 64 MiB of log unless told otherwise.
    public init(
        name: String = "default", schema: Schema? = nil, directory: String,
        durability: Durability = .synchronous, segmentByteCountMax: UInt64 = 64 * 1024 * 1024,
        checkpointIntervalByteCount: UInt64 = 64 * 1024 * 1024, fileSystem: any FileSystem = PosixFileSystem()
    ) {
        self.name = name
        self.schema = schema
        self.directory = directory
        self.durability = durability
        self.segmentByteCountMax = segmentByteCountMax
        self.checkpointIntervalByteCount = checkpointIntervalByteCount
        self.fileSystem = fileSystem
    }

    var logOptions: LogOptions {
        var options = LogOptions()
        options.durability = durability
        options.segmentByteCountMax = segmentByteCountMax
        options.fileSystem = fileSystem
        options.preallocationAheadByteCount = preallocationAheadByteCount
        options.durableEndMarkDelay = durableEndMarkDelay
        options.dictionaryByteCountMax = dictionaryByteCountMax
        options.allowsOtherWriters = allowsOtherWriters && allowsSave
        // Without a schema (a tool opening an existing store) a missing store is an error, not a new one.
        options.createsIfMissing = schema != nil
        return options
    }

    /// Equal when every option but the file system is equal.
    public static func == (lhs: LogStoreConfiguration, rhs: LogStoreConfiguration) -> Bool {
        lhs.name == rhs.name && lhs.schema == rhs.schema && lhs.directory == rhs.directory
            && lhs.durability == rhs.durability && lhs.segmentByteCountMax == rhs.segmentByteCountMax
            && lhs.checkpointIntervalByteCount == rhs.checkpointIntervalByteCount
            && lhs.historyRetention == rhs.historyRetention
            && lhs.uniqueCollisionPolicy == rhs.uniqueCollisionPolicy
            && lhs.allowsSave == rhs.allowsSave && lhs.isStoredInMemoryOnly == rhs.isStoredInMemoryOnly
            && lhs.durableEndMarkDelay == rhs.durableEndMarkDelay
            && lhs.dictionaryByteCountMax == rhs.dictionaryByteCountMax
            && lhs.preallocationAheadByteCount == rhs.preallocationAheadByteCount
            && lhs.allowsOtherWriters == rhs.allowsOtherWriters
    }

    /// Hashes the name and the directory.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(directory)
    }
}
