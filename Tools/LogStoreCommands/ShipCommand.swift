import ArgumentParser
import Dispatch
import Foundation
import LogStore
import LogStoreEngine
import LogStorePostgres
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `logstore ship <dir> --postgres <URL> [--follow] [--reseed]`: a store's history and state into
/// PostgreSQL, exactly once.
struct ShipCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ship",
        abstract: "Ship a store's state and history into PostgreSQL, exactly once, and resume where it stopped.",
        discussion: """
            Mirrors each entity of the stored schema into a table and each change of history into \
            logstore_changes; logstore_shipping holds the token shipped through, moved in the same \
            PostgreSQL transaction as the rows it covers, so a run killed at any point resumes without \
            a transaction missing or applied twice. \
            The store is opened for writing when no other process has it open, to register the history \
            consumer --consumer (retention then keeps everything not yet shipped); otherwise, or with \
            --read-only, it is read read-only, without a bookmark, and says so. \
            Exit codes: 0 ok (shipped); 2 the store or PostgreSQL could not be read or shipping failed; \
            4 not a store, or a store of a newer format version; 5 history after PostgreSQL's token was \
            deleted before it was shipped, or PostgreSQL holds a token the store does not: run again \
            with --reseed; 64 usage error.
            """
    )

    @Argument(help: "The store directory.")
    var directory: String

    @Option(help: ArgumentHelp("postgres://user[:password]@host[:port]/database[?sslmode=require]", valueName: "URL"))
    var postgres: String

    @Option(help: "The PostgreSQL schema (namespace) that mirrors this store.")
    var schema = "public"

    @Flag(help: "Keep shipping each new transaction until interrupted (live tail when open here for writing, else polling).")
    var follow = false

    @Flag(help: "When history after PostgreSQL's token is gone (or differs), copy the current state, then continue.")
    var reseed = false

    @Flag(name: .customLong("read-only"), help: "Read the store read-only even if no other process has it open.")
    var readOnly = false

    @Option(help: "The history consumer name registered on the store.")
    var consumer = "postgres"

    @Flag(name: .customLong("no-foreign-keys"), help: "Create no foreign keys for to-one relationships.")
    var noForeignKeys = false

    @Option(name: .customLong("transactions-per-commit"), help: "At most this many store transactions per PostgreSQL commit.")
    var transactionsPerCommit = 500

    @Flag(help: "Print the summary as JSON.")
    var json = false

    func run() throws {
        var configuration: PostgresShippingConfiguration = try reportingErrors {
            try PostgresShippingConfiguration(url: postgres)
        }
        configuration.schemaName = schema
        configuration.consumerName = consumer
        configuration.foreignKeys = !noForeignKeys
        configuration.reseedWhenHistoryIsGone = reseed
        configuration.transactionsPerCommitMax = max(1, transactionsPerCommit)
        let (source, store) = try openSource()
        defer { try? store?.close() }
        let shipper = PostgresShipper(source: source, configuration: configuration)
        let display = ShipProgressDisplay(enabled: isatty(STDERR_FILENO) == 1)
        let follow = self.follow
        let outcome = runBlocking {
            do {
                let progress = follow ? try await shipper.follow { display.show($0) } : try await shipper.ship { display.show($0) }
                await shipper.close()
                return progress
            } catch {
                await shipper.close()
                throw error
            }
        }
        display.finish()
        switch outcome {
        case let .success(progress):
            try printSummary(progress)
        case let .failure(error as PostgresShippingError) where error.code == .historyExpired || error.code == .historyDiverged:
            printError("logstore: \(error)")
            throw ExitCode(5)
        case let .failure(error):
            printError("logstore: \(error)")
            throw storeErrorExitCode
        }
    }

    /// The store opened for writing (with a consumer bookmark), or its directory read-only.
    private func openSource() throws -> (ShippingSource, LogStore?) {
        // Refuse a missing or schema-less store before anything could create one.
        let schema = try reportingErrors { try LogStore.storedSchema(directory: directory) }
        guard schema != nil else {
            printError("logstore: the store at \(directory) holds no schema yet (open it once with its models).")
            throw storeErrorExitCode
        }
        if readOnly {
            printError("note: shipping read-only, without a consumer bookmark: retention may delete history before it is "
                + "shipped (then --reseed).")
            return (.directory(directory), nil)
        }
        do {
            let store = try LogStore(LogStoreConfiguration(directory: directory))
            return (.store(store), store)
        } catch let error as LogStoreError where error.underlying?.code == .locked {
            printError("note: the store is open for writing in another process, so it is shipped read-only, without a "
                + "consumer bookmark: retention may delete history before it is shipped (then --reseed). Until "
                + "several processes may write one store (DECISIONS.md D11), run ship where the store is not open, "
                + "or embed PostgresShipper in the app.")
            return (.directory(directory), nil)
        } catch {
            printError("logstore: \(error)")
            throw storeErrorExitCode
        }
    }

    private func printSummary(_ progress: ShippingProgress) throws {
        if json {
            struct Summary: Encodable {
                var transactions, changes, commits, seeds, seededRows: Int
                var shippedToken: DefaultHistoryToken?
                var seconds, transactionsPerSecond: Double
                var lagSeconds: Double?
            }
            try printJSON(Summary(transactions: progress.transactions, changes: progress.changes, commits: progress.commits,
                                  seeds: progress.seeds, seededRows: progress.seededRows,
                                  shippedToken: progress.shippedToken, seconds: progress.shippingSeconds,
                                  transactionsPerSecond: progress.transactionsPerSecond,
                                  lagSeconds: progress.lastLagSeconds))
            return
        }
        var lines = ["Shipped \(Format.grouped(progress.transactions)) transactions (\(Format.grouped(progress.changes)) "
            + "changes) in \(Format.grouped(progress.commits)) commits, "
            + String(format: "%.2f s, %.0f transactions/s.", progress.shippingSeconds, progress.transactionsPerSecond)]
        if progress.seeds > 0 {
            lines.append("Copied the store's state \(progress.seeds) time(s): \(Format.grouped(progress.seededRows)) models.")
        }
        lines.append("PostgreSQL holds everything through \(progress.shippedToken?.jsonString ?? "nothing (empty store)").")
        if let lag = progress.lastLagSeconds {
            lines.append(String(format: "Lag: %.3f s from the last save shipped to its commit (max %.3f s).", lag,
                                progress.maxLagSeconds ?? lag))
        }
        print(lines.joined(separator: "\n"))
    }
}

/// Progress on standard error, one rewritten line at most every 200 ms, on a terminal only.
final class ShipProgressDisplay: Sendable {
    private let enabled: Bool
    private let lastShown = Mutex(ContinuousClock.now - .seconds(1))

    init(enabled: Bool) { self.enabled = enabled }

    func show(_ progress: ShippingProgress) {
        guard enabled else { return }
        let now = ContinuousClock.now
        guard lastShown.withLock({ last in
            guard now - last >= .milliseconds(200) else { return false }
            last = now
            return true
        }) else { return }
        var line = "\rshipping: \(Format.grouped(progress.transactions)) transactions, \(Format.grouped(progress.changes)) changes"
        if let offset = progress.shippedToken?.offset { line += ", through offset \(Format.grouped(offset))" }
        if let backlog = progress.backlogByteCount { line += ", \(Format.bytes(backlog)) behind" }
        if let lag = progress.lastLagSeconds { line += String(format: ", lag %.2f s", lag) }
        FileHandle.standardError.write(Data((line + "   ").utf8))
    }

    func finish() {
        if enabled { FileHandle.standardError.write(Data("\n".utf8)) }
    }
}

/// Runs `body` on the cooperative pool and blocks this (main, non-pool) thread until it ends:
/// the root command is synchronous. SIGINT and SIGTERM cancel it, so `--follow` ends with a summary.
func runBlocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) -> Result<T, any Error> {
    let outcome = Mutex<Result<T, any Error>?>(nil)
    let semaphore = DispatchSemaphore(value: 0)
    let task = Task {
        do { let value = try await body(); outcome.withLock { $0 = .success(value) } } catch {
            outcome.withLock { $0 = .failure(error) }
        }
        semaphore.signal()
    }
    var sources: [any DispatchSourceSignal] = []
    for signalNumber in [SIGINT, SIGTERM] {
        signal(signalNumber, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
        source.setEventHandler { task.cancel() }
        source.resume()
        sources.append(source)
    }
    semaphore.wait()
    sources.forEach { $0.cancel() }
    return outcome.withLock { $0! }
}
