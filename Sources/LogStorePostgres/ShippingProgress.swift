import Foundation
import LogStore

/// What a ``PostgresShipper`` has done since it was created; passed to the progress handler
/// after every commit and returned by ``PostgresShipper/ship(progress:)``.
public struct ShippingProgress: Sendable, Hashable {
    /// LogStore transactions shipped (each in exactly one PostgreSQL transaction).
    public var transactions = 0
    /// Changes shipped: rows of `logstore_changes`.
    public var changes = 0
    /// PostgreSQL commits of shipped history (several LogStore transactions may share one).
    public var commits = 0
    /// Times the state was copied instead of the history (a first ship of a store whose early
    /// history is deleted, or a reseed).
    public var seeds = 0
    /// Models copied by those seeds.
    public var seededRows = 0
    /// The token PostgreSQL holds now: everything up to it is shipped.
    public var shippedToken: DefaultHistoryToken?
    /// Where the store's log ended when last looked at (a writable store in this process only).
    public var logEndOffset: UInt64?
    /// Seconds from the newest shipped transaction's save to the commit that shipped it.
    public var lastLagSeconds: Double?
    /// The largest such lag seen.
    public var maxLagSeconds: Double?
    /// The transactions the last commit shipped, oldest first, with its commit time (for lag figures).
    public var lastCommit: Commit?
    /// Time spent shipping (connecting and waiting for saves excluded).
    public var shippingSeconds: Double = 0

    /// One PostgreSQL commit.
    public struct Commit: Sendable, Hashable {
        public var firstToken: DefaultHistoryToken
        public var lastToken: DefaultHistoryToken
        public var transactionTimestamps: [Date]
        public var committedAt: Date
    }

    /// Bytes of log the shipped token is behind the store's end (a writable store in this process only).
    public var backlogByteCount: UInt64? {
        guard let end = logEndOffset else { return nil }
        return end - min(end, shippedToken.map { $0.offset + 1 } ?? 0)
    }

    /// Transactions per second of shipping time.
    public var transactionsPerSecond: Double {
        shippingSeconds > 0 ? Double(transactions) / shippingSeconds : 0
    }

    /// Changes per second of shipping time.
    public var changesPerSecond: Double {
        shippingSeconds > 0 ? Double(changes) / shippingSeconds : 0
    }

    public init() {}
}
