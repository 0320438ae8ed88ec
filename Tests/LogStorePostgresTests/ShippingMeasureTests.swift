import Foundation
import LogStore
import LogStoreEngine
@testable import LogStorePostgres
import PostgresNIO
import Synchronization
import Testing

/// Figures for the README and the report, behind `LOGSTORE_MEASURE=1` (a PostgreSQL server with
/// fsync on): shipping throughput from a large store, lag under a steady save rate
/// (`LOGSTORE_MEASURE_SAVES_PER_SECOND`, default 1,000), and
/// what restarting a killed shipper costs. `LOGSTORE_MEASURE_TRANSACTIONS` sets the store size
/// (default 100,000).
@Suite(.serialized, .enabled(if: ProcessInfo.processInfo.environment["LOGSTORE_MEASURE"] == "1" && PostgresServer.isAvailable))
struct ShippingMeasureTests {
    static let savesPerSecond = Int(ProcessInfo.processInfo.environment["LOGSTORE_MEASURE_SAVES_PER_SECOND"] ?? "") ?? 1_000
    static let transactionCount = Int(ProcessInfo.processInfo.environment["LOGSTORE_MEASURE_TRANSACTIONS"] ?? "") ?? 100_000

    @Test func throughputFromALargeStore() async throws {
        try await withPostgresServer(durable: true) { server in
            let directory = temporaryStoreDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            var configuration = LogStoreConfiguration(schema: TestSchema.v1(), directory: directory, durability: .none)
            configuration.checkpointIntervalByteCount = 64 * 1024 * 1024
            let store = try LogStore(configuration)
            var workload = Workload(seed: 11)
            workload.deletes = false
            let buildStart = ContinuousClock.now
            try workload.save(Self.transactionCount, to: store)
            try store.close()
            print("measure: built \(Self.transactionCount) transactions in \(ContinuousClock.now - buildStart)")

            let started = ContinuousClock.now
            let shipper = PostgresShipper(source: .directory(directory), configuration: try server.configuration())
            let progress = try await shipper.ship()
            let wall = (ContinuousClock.now - started).seconds
            await shipper.close()
            print(String(format: "measure: shipped %d transactions, %d changes in %d commits, %.1f s wall: "
                + "%.0f transactions/s, %.0f changes/s", progress.transactions, progress.changes, progress.commits, wall,
                         Double(progress.transactions) / wall, Double(progress.changes) / wall))
            #expect(progress.transactions == Self.transactionCount)

            // Restarting on a shipped store: what a kill costs besides the uncommitted batch.
            var restarts: [Double] = []
            for _ in 0..<5 {
                let again = ContinuousClock.now
                let process = try ShipperKillTests.startShip(directory, server: server, extra: [])
                process.waitUntilExit()
                restarts.append((ContinuousClock.now - again).seconds)
            }
            print(String(format: "measure: a restarted `logstore ship` with nothing to ship takes %.0f ms (median of 5); "
                + "a kill loses at most one uncommitted batch (500 transactions ≈ %.0f ms of shipping here)",
                         restarts.sorted()[2] * 1000, 500 / (Double(progress.transactions) / wall) * 1000))
        }
    }

    @Test func lagUnderASteadyThousandSavesPerSecond() async throws {
        try await withPostgresServer(durable: true) { server in
            let directory = temporaryStoreDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            // `.batched` durability: synchronous saves alone stay under 1,000/s in a debug build here.
            let store = try LogStore(LogStoreConfiguration(schema: TestSchema.v1(), directory: directory,
                                                           durability: .batched(syncIntervalMax: .milliseconds(5))))
            let lags = Mutex<[Double]>([])
            let shipper = PostgresShipper(source: .store(store), configuration: try server.configuration())
            let following = Task {
                try await shipper.follow { progress in
                    guard let commit = progress.lastCommit else { return }
                    lags.withLock { $0 += commit.transactionTimestamps.map { commit.committedAt.timeIntervalSince($0) } }
                }
            }
            var workload = Workload(seed: 12)
            workload.deletes = false
            let seconds = 10
            let started = ContinuousClock.now
            // `LOGSTORE_MEASURE_SAVES_PER_SECOND` saves a second (default 1,000), in 10 ms ticks:
            // sleeping after each save cannot keep 1 ms steps here.
            let savesPerTick = max(1, Self.savesPerSecond / 100)
            for tick in 0..<(seconds * 100) {
                try workload.save(savesPerTick, to: store)
                let due = started + .milliseconds(10 * (tick + 1))
                if ContinuousClock.now < due { try await Task.sleep(until: due) }
            }
            let elapsed = (ContinuousClock.now - started).seconds
            let target = store.currentToken
            while await shipper.shippedToken != target { try await Task.sleep(for: .milliseconds(5)) }
            following.cancel()
            _ = try await following.value
            await shipper.close()
            let sorted = lags.withLock { $0 }.sorted()
            func percentile(_ p: Double) -> Double { sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] * 1000 }
            print(String(format: "measure: %d saves at %.0f/s; save-to-PostgreSQL-commit lag p50 %.1f ms, p99 %.1f ms, max %.1f ms",
                         sorted.count, Double(sorted.count) / elapsed, percentile(0.5), percentile(0.99), sorted.last! * 1000))
            try store.close()
        }
    }
}
