import Benchmark
import BenchmarkSupport
import LogStoreEngine

// Model-layer workloads: saves of SampleTrips `Trip`s through `ModelContext` (and, to split the
// cost, straight into the store), with their peers in the same run: SQLite through GRDB with the
// same model plus a history table written in the same transaction, and the ArchiveStore at a small
// size. The engine-layer figures they are compared with (P1–P3 appends, raw loops) come from the
// EngineBenchmarks suite of the same run. Benchmarks run sorted by name; `id`s are what
// `summarize.py` reads (its MODEL_FIGURES).
//
// Three ways in: a new context per save (the steady per-save cost: the `P1.ctx`… figures), a
// long-lived context per thread (an app's main context: every saved Trip stays registered and each
// save compares every registered model with its saved values, so a save costs more the longer the
// benchmark has run; `registeredPerContextAtEnd` in the facts says how far it got), and
// `store.save` with snapshots built directly (the store without the context).

let benchmarks: @Sendable () -> Void = {
    for spec in ModelSuite.specs {
        register(spec)
    }
}

enum ModelSuite {
    static let saverThreads = 8
    static let bigSave = 100
    static let archiveSeedModels = 100
    static let recordsPerSync = DerivedMetric.ratio("records per fdatasync (x100)", "records", per: "fdatasyncs")

    static var specs: [WorkloadSpec] { p1 + p2 + scaling + p3 + p4 + findTrips }

    static func logStore(_ durability: Durability, _ layer: SaveLayer, threads: Int = 1, inserts: Int = 1)
        -> @Sendable (WorkloadContext) throws -> any Workload
    {
        { context in
            try ModelSaveWorkload(
                directory: context.directory, store: .logStore(durability), layer: layer, threads: threads,
                insertsPerSave: inserts)
        }
    }

    static func sqlite(_ synchronous: SQLiteInsertWorkload.Synchronous, threads: Int = 1, rows: Int = 1)
        -> @Sendable (WorkloadContext) throws -> any Workload
    {
        { context in
            try SQLiteModelWorkload(
                directory: context.directory, synchronous: synchronous, threads: threads, rowsPerSave: rows)
        }
    }

    /// P1: durable saves of one new Trip, one saver. The long-lived context runs one save per
    /// framework iteration with a short warm-up: its saves slow down as it runs.
    static var p1: [WorkloadSpec] {
        [
            WorkloadSpec(
                id: "P1.ctx", name: "P1-ctx LogStore context per save synchronous 1 thread", warmupOperations: 200,
                make: logStore(.synchronous, .contextPerSave)),
            WorkloadSpec(
                id: "P1.ctx.long", name: "P1-ctx LogStore long-lived context synchronous 1 thread",
                warmupOperations: 100,
                make: logStore(.synchronous, .longLivedContext)),
            WorkloadSpec(
                id: "P1.ctx.long10k", name: "P1-ctx LogStore long-lived context holding 10,000 models synchronous 1 thread",
                warmupOperations: 100
            ) { context in
                try ModelSaveWorkload(
                    directory: context.directory, store: .logStore(.synchronous), layer: .longLivedContext, threads: 1,
                    registeredModels: 10_000)
            },
            WorkloadSpec(
                id: "P1.store", name: "P1-ctx LogStore store.save synchronous 1 thread", warmupOperations: 200,
                make: logStore(.synchronous, .store)),
            WorkloadSpec(
                id: "P1.archive", name: "P1-ctx ArchiveStore context per save from 100 models", warmupOperations: 0
            ) { context in
                try ModelSaveWorkload(
                    directory: context.directory, store: .archive(seedModels: archiveSeedModels),
                    layer: .contextPerSave, threads: 1)
            },
            WorkloadSpec(
                id: "sqlite.model.full.1", name: "P1-ctx SQLite+history WAL FULL 1 thread", warmupOperations: 200,
                make: sqlite(.full)),
            WorkloadSpec(
                id: "sqlite.model.normal.1", name: "P1-ctx SQLite+history WAL NORMAL 1 thread",
                operationsPerIteration: .kilo,
                warmupOperations: 1_000, make: sqlite(.normal)),
        ]
    }

    /// P2: durable saves of one new Trip from 8 threads, each with its own context on one container.
    static var p2: [WorkloadSpec] {
        [
            WorkloadSpec(
                id: "P2.ctx", name: "P2-ctx LogStore context per save synchronous 8 threads", threads: saverThreads,
                operationsPerIteration: .kilo, warmupOperations: 400, derivedMetrics: [recordsPerSync],
                make: logStore(.synchronous, .contextPerSave, threads: saverThreads)),
            WorkloadSpec(
                id: "P2.ctx.long", name: "P2-ctx LogStore long-lived contexts synchronous 8 threads",
                threads: saverThreads,
                operationsPerIteration: .kilo, warmupOperations: 400, derivedMetrics: [recordsPerSync],
                make: logStore(.synchronous, .longLivedContext, threads: saverThreads)),
            WorkloadSpec(
                id: "P2.store", name: "P2-ctx LogStore store.save synchronous 8 threads", threads: saverThreads,
                operationsPerIteration: .kilo, warmupOperations: 400, derivedMetrics: [recordsPerSync],
                make: logStore(.synchronous, .store, threads: saverThreads)),
            WorkloadSpec(
                id: "sqlite.model.full.8", name: "P2-ctx SQLite+history WAL FULL 8 threads", threads: saverThreads,
                operationsPerIteration: .kilo, warmupOperations: 400, make: sqlite(.full, threads: saverThreads)),
            WorkloadSpec(
                id: "sqlite.model.normal.8", name: "P2-ctx SQLite+history WAL NORMAL 8 threads", threads: saverThreads,
                operationsPerIteration: .kilo, warmupOperations: 2_000, make: sqlite(.normal, threads: saverThreads)),
        ]
    }

    /// Saver scaling (the chart in RESULTS.md): durable saves of one new Trip from 2 and 4 threads,
    /// a new context per save, against SQLite+history FULL; 1 and 8 threads are P1 and P2.
    static var scaling: [WorkloadSpec] {
        [2, 4].flatMap { threads in
            [
                WorkloadSpec(
                    id: "P2.ctx.\(threads)", name: "P2-ctx LogStore context per save synchronous \(threads) threads",
                    threads: threads, operationsPerIteration: .kilo, warmupOperations: 200,
                    derivedMetrics: [recordsPerSync],
                    make: logStore(.synchronous, .contextPerSave, threads: threads)),
                WorkloadSpec(
                    id: "sqlite.model.full.\(threads)", name: "P2-ctx SQLite+history WAL FULL \(threads) threads",
                    threads: threads, operationsPerIteration: .kilo, warmupOperations: 200,
                    make: sqlite(.full, threads: threads)),
            ]
        }
    }

    /// P3: saves of one new Trip with durability `.none` (its SQLite peer is P1's NORMAL one).
    static var p3: [WorkloadSpec] {
        [
            WorkloadSpec(
                id: "P3.ctx", name: "P3-ctx LogStore context per save none 1 thread", operationsPerIteration: .kilo,
                warmupOperations: 2_000, maxDuration: .seconds(3), derivedMetrics: [recordsPerSync],
                make: logStore(.none, .contextPerSave)),
            WorkloadSpec(
                id: "P3.ctx.long", name: "P3-ctx LogStore long-lived context none 1 thread", warmupOperations: 100,
                maxDuration: .seconds(3), make: logStore(.none, .longLivedContext)),
            WorkloadSpec(
                id: "P3.store", name: "P3-ctx LogStore store.save none 1 thread", operationsPerIteration: .kilo,
                warmupOperations: 2_000, maxDuration: .seconds(3), derivedMetrics: [recordsPerSync],
                make: logStore(.none, .store)),
        ]
    }

    /// P4: durable saves of 100 new Trips each (one transaction), one saver.
    static var p4: [WorkloadSpec] {
        [
            WorkloadSpec(
                id: "P4.ctx", name: "P4-ctx LogStore context per save 100 inserts synchronous", warmupOperations: 20,
                make: logStore(.synchronous, .contextPerSave, inserts: bigSave)),
            WorkloadSpec(
                id: "P4.ctx.long", name: "P4-ctx LogStore long-lived context 100 inserts synchronous",
                warmupOperations: 2,
                make: logStore(.synchronous, .longLivedContext, inserts: bigSave)),
            WorkloadSpec(
                id: "P4.store", name: "P4-ctx LogStore store.save 100 inserts synchronous", warmupOperations: 20,
                make: logStore(.synchronous, .store, inserts: bigSave)),
            WorkloadSpec(
                id: "sqlite.model.full.100", name: "P4-ctx SQLite+history WAL FULL 100 rows per transaction",
                warmupOperations: 20, make: sqlite(.full, rows: bigSave)),
            WorkloadSpec(
                id: "sqlite.model.normal.100", name: "P4-ctx SQLite+history WAL NORMAL 100 rows per transaction",
                warmupOperations: 20, make: sqlite(.normal, rows: bigSave)),
        ]
    }

    /// The WWDC24 history session's `findTrips` (issue 13's floor: 100 widget changes over 5,000
    /// trips in at most 50 ms): one fetch by the to-one relationship's identifier per operation;
    /// and the session's whole pass (history after the app's token by author "widget", then one
    /// such fetch per change) over 100 widget changes per operation, with the store answering the
    /// predicate and, as its peer, the predicate evaluated in memory over every Trip.
    static var findTrips: [WorkloadSpec] {
        [
            WorkloadSpec(
                id: "findTrips", name: "findTrips LogStore one widget change over 5,000 trips", warmupOperations: 20
            ) { context in
                try FindTripsWorkload(directory: context.directory)
            },
            WorkloadSpec(
                id: "findTrips.pass", name: "findTrips pass LogStore 100 widget changes over 5,000 trips",
                warmupOperations: 2
            ) { context in
                try FindTripsPassWorkload(directory: context.directory, evaluation: .store)
            },
            WorkloadSpec(
                id: "findTrips.pass.memory",
                name: "findTrips pass Predicate.evaluate in memory 100 widget changes over 5,000 trips",
                warmupOperations: 1, maxDuration: .seconds(10)
            ) { context in
                try FindTripsPassWorkload(directory: context.directory, evaluation: .inMemory)
            },
        ]
    }
}
