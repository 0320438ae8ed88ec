import Foundation
import LogStore
import Logging
import PostgresNIO
import Synchronization

/// Ships a store's history and state into PostgreSQL, exactly once.
///
/// Each entity of the stored schema becomes a table (primary key `id uuid`, a column per
/// attribute, deferrable foreign keys for to-one relationships, `uuid[]` for to-many); each
/// change of history becomes a row of `logstore_changes`; `logstore_shipping` holds the token
/// shipped through. One PostgreSQL transaction writes a LogStore transaction's rows, its change
/// rows *and* the new token, so whatever dies when, PostgreSQL holds a prefix of the history
/// and the token that ends it — and shipping resumes right after it.
///
/// ```swift
/// let store = container.dataStore(as: LogStore.self)!
/// let shipper = PostgresShipper(source: .store(store),
///                               configuration: try PostgresShippingConfiguration(url: "postgres://app@db/trips"))
/// let done = try await shipper.ship()              // everything saved so far
/// print(done.transactions, "transactions,", done.changes, "changes")
/// try await shipper.follow()                       // then each save as it happens, until cancelled
/// ```
///
/// With ``ShippingSource/store(_:)`` the shipper registers the history consumer
/// ``PostgresShippingConfiguration/consumerName`` and acknowledges after each commit, so
/// retention never deletes history it has not shipped. With ``ShippingSource/directory(_:fileSystem:)``
/// it reads read-only and keeps no bookmark; if history it has not shipped is deleted, it
/// stops with ``PostgresShippingError/Code/historyExpired`` unless reseeding is allowed.
public actor PostgresShipper {
    /// Where the history is read.
    public let source: ShippingSource
    /// Where and how it is written.
    public let configuration: PostgresShippingConfiguration
    let logger: Logger
    var connection: PostgresConnection?
    var mirror: PostgresMirror
    var storeID: UUID?
    /// What PostgreSQL holds (read at connect, then kept by each commit).
    var shipped: DefaultHistoryToken?
    var registered = false
    var progress = ShippingProgress()
    static let connectionCounter = Counter()

    /// A shipper reading `source` and writing where `configuration` says. Nothing happens until
    /// ``ship(progress:)``, ``follow(pollInterval:progress:)`` or ``reseed()``.
    public init(source: ShippingSource, configuration: PostgresShippingConfiguration,
                logger: Logger = Logger(label: "LogStorePostgres")) {
        self.source = source
        self.configuration = configuration
        self.logger = logger
        mirror = PostgresMirror(configuration: configuration)
    }

    /// The token PostgreSQL holds (after the first call that connects).
    public var shippedToken: DefaultHistoryToken? { shipped }

    /// Ships every transaction saved so far (in commits of at most
    /// ``PostgresShippingConfiguration/transactionsPerCommitMax``) and returns what was done.
    /// `progress` is called after every commit.
    @discardableResult
    public func ship(progress report: (@Sendable (ShippingProgress) -> Void)? = nil) async throws -> ShippingProgress {
        try await closingOnError {
            try await prepare()
            progress.logEndOffset = source.logEndOffset
            while try await shipNextBatch() { report?(progress) }
            return progress
        }
    }

    /// After any error the connection is closed: the next call reconnects and reads the shipped
    /// token from PostgreSQL again, the only truth about what was shipped.
    func closingOnError<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch {
            await close()
            throw PostgresShippingError.described(error)
        }
    }

    /// Ships everything, then each new transaction as it is saved, until the task is cancelled
    /// (then it returns what was done). A store in this process wakes it through its live tail;
    /// a directory is polled every `pollInterval`.
    @discardableResult
    public func follow(pollInterval: Duration = .milliseconds(100),
                       progress report: (@Sendable (ShippingProgress) -> Void)? = nil) async throws -> ShippingProgress {
        try await ship(progress: report)
        return try await closingOnError { try await followAfterShipping(pollInterval: pollInterval, progress: report) }
    }

    private func followAfterShipping(pollInterval: Duration,
                                     progress report: (@Sendable (ShippingProgress) -> Void)?) async throws -> ShippingProgress {
        while !Task.isCancelled {
            switch source {
            case let .store(store):
                // The tail's first transaction after `shipped` says there is work; the batch
                // then reads it again with whatever followed.
                var tail = store.historyTail(after: shipped).makeAsyncIterator()
                do {
                    guard try await tail.next() != nil else { return progress } // cancelled or closed
                } catch let error as LogStoreError where error.code == .historyTokenExpired {
                    // The next batch meets the same expiry and reseeds or reports it.
                }
            case .directory:
                do { try await Task.sleep(for: pollInterval) } catch { return progress }
            }
            while try await shipNextBatch() { report?(progress) }
        }
        return progress
    }

    /// Copies the store's current state over the mirror tables in one PostgreSQL transaction
    /// (with a `reseed` row in `logstore_changes`) and sets the shipped token to the state's last
    /// transaction: what to do after ``PostgresShippingError/Code/historyExpired``.
    @discardableResult
    public func reseed() async throws -> ShippingProgress {
        try await closingOnError {
            try await connectIfNeeded()
            try await seedFromState(reason: "reseed asked for")
            return progress
        }
    }

    /// Closes the connection to PostgreSQL. The store is not closed (it is the caller's).
    public func close() async {
        if let connection { try? await connection.close() }
        connection = nil
        registered = false
    }

    /// A shipper dropped without ``close()`` (a caller's error path, a cancelled task) closes its
    /// connection here: postgres-nio asserts that no connection is deallocated open. The close is
    /// asynchronous, so the connection is kept alive until its channel has closed.
    deinit {
        if let connection, !connection.isClosed {
            logger.debug("PostgresShipper dropped without close(); closing its connection")
            connection.close().whenComplete { _ in withExtendedLifetime(connection) {} }
        }
    }

    // MARK: Steps

    /// Connects, creates the shipping tables, reads the shipped token, brings the mirror up to
    /// the stored schema, registers the consumer, and seeds when history alone cannot rebuild
    /// the state (nothing shipped yet and history was deleted).
    func prepare() async throws {
        try await connectIfNeeded()
        if source.keepsBookmark, !registered {
            do {
                try register(after: shipped)
            } catch let error as LogStoreError where [.historyTokenExpired, .historyTokenInvalid,
                                                      .historyPositionPastEnd].contains(error.code) {
                try await historyGone(error)
            }
        }
        if shipped == nil, try source.lowWaterMark() != nil {
            try await seedFromState(reason: "history before the store's low-water mark was deleted")
        }
    }

    /// Ships the next batch; `false` when there was nothing to ship.
    func shipNextBatch() async throws -> Bool {
        let started = ContinuousClock.now
        var transactions: [DefaultHistoryTransaction]
        do {
            transactions = try source.transactions(after: shipped, limit: configuration.transactionsPerCommitMax)
        } catch let error as LogStoreError where [.historyTokenExpired, .historyTokenInvalid,
                                                  .historyPositionPastEnd].contains(error.code) {
            try await historyGone(error)
            return true
        }
        // Without a lower bound the fetch returned history after the L of that moment: if L is
        // set now, history before it was deleted and only a seed rebuilds the state.
        if shipped == nil, !transactions.isEmpty, try source.lowWaterMark() != nil {
            try await seedFromState(reason: "history before the store's low-water mark was deleted")
            return true
        }
        guard !transactions.isEmpty else { return false }
        var changeCount = 0
        let count = transactions.prefix { transaction in
            changeCount += transaction.changes.count
            return changeCount <= configuration.changesPerCommitMax
        }.count
        transactions.removeLast(transactions.count - max(1, count))
        if !mirror.covers(transactions) { try await syncSchema() }
        guard mirror.covers(transactions) else {
            throw PostgresShippingError(.noSchema, "The history names entities or attributes the stored schema lacks.")
        }
        let batch = try PostgresBatch(transactions)
        let last = transactions.last!.token
        do {
            try await commit(through: last, transactions: batch.transactionCount, changes: batch.changeCount) { connection in
                try await batch.write(to: connection, mirror: self.mirror, logger: self.logger)
            }
        } catch let error as PostgresShippingError where error.code == .anotherShipper {
            logger.notice("\(error)")
            return true
        }
        let committedAt = Date()
        progress.transactions += batch.transactionCount
        progress.changes += batch.changeCount
        progress.commits += 1
        let lag = committedAt.timeIntervalSince(transactions.last!.timestamp)
        progress.lastLagSeconds = lag
        progress.maxLagSeconds = max(progress.maxLagSeconds ?? lag, lag)
        progress.lastCommit = .init(firstToken: transactions[0].token, lastToken: last,
                                    transactionTimestamps: transactions.map(\.timestamp), committedAt: committedAt)
        if case .store = source { progress.logEndOffset = source.logEndOffset }
        progress.shippingSeconds += (ContinuousClock.now - started).seconds
        try acknowledge(last)
        return true
    }

    /// History after the shipped token is gone or is not the history PostgreSQL has: reseed if
    /// allowed, else say so.
    func historyGone(_ error: LogStoreError) async throws {
        let shippedText = shipped?.jsonString ?? "nothing"
        if configuration.reseedWhenHistoryIsGone {
            logger.warning("History after the shipped token is gone; reseeding from the store's state",
                           metadata: ["shipped": "\(shippedText)", "reason": "\(error)"])
            try await seedFromState(reason: "\(error)")
            return
        }
        if error.code == .historyTokenExpired {
            throw PostgresShippingError(.historyExpired, "PostgreSQL has shipped through \(shippedText), but the store "
                + "deleted history after it before it was shipped (the store's history now starts after "
                + "\(error.resumeToken?.jsonString ?? "?")). Reseed to copy the current state and continue from there "
                + "(`logstore ship --reseed`, PostgresShipper.reseed()).", resumeToken: error.resumeToken)
        }
        throw PostgresShippingError(.historyDiverged, "PostgreSQL has shipped through \(shippedText), which the store "
            + "does not hold (\(error)): the store was restored from an older copy or lost a tail in a crash. "
            + "Reseed to make PostgreSQL follow the store again.")
    }

    // MARK: Consumer bookmark

    func register(after token: DefaultHistoryToken?) throws {
        guard case let .store(store) = source else { return }
        try store.registerHistoryConsumer(configuration.consumerName, after: token)
        registered = true
    }

    /// After a commit: a crash before this only keeps more history (PostgreSQL is the truth).
    func acknowledge(_ token: DefaultHistoryToken) throws {
        guard case let .store(store) = source, registered else { return }
        try store.acknowledgeHistory(configuration.consumerName, through: token)
    }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

/// Connection ids for postgres-nio's logging.
final class Counter: Sendable {
    private let value = Mutex(0)
    func next() -> Int { value.withLock { $0 += 1; return $0 } }
}
