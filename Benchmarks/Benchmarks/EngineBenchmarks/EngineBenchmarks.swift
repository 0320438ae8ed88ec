import Benchmark
import BenchmarkSupport
import LogStoreEngine

// Engine-layer workloads (`Log`) and the peers they are compared with, in one run.
// Benchmarks run sorted by name, so names start with their figure (L = limits, P1–P3): the
// CPU-only limits first, then every fdatasync-bound benchmark, and the no-sync ones last (their
// writeback would otherwise disturb the syncing ones). `id`s are what `summarize.py` reads.
// To add a workload: add a spec here (model-layer ones go to ModelBenchmarks) and, if it is a
// new figure, a line in `summarize.py`'s FIGURES.

let benchmarks: @Sendable () -> Void = {
    for spec in EngineSuite.specs {
        register(spec)
    }
}

enum EngineSuite {
    static let recordByteCount = 200
    static let appenderThreads = 8

    static var specs: [WorkloadSpec] { limits + p1 + p2 + p3 }

    /// Raw LZ4 on the payload bytes: 4 KiB blocks (a block-compression limit; the random payloads
    /// do not compress, so also text-like blocks that do), and single 200-byte records (what every
    /// engine append pays, as `compresses` is on by default).
    static var limits: [WorkloadSpec] {
        [
            WorkloadSpec(
                id: "raw.lz4.4k", name: "L1 raw LZ4 compress 4 KiB random blocks", operationsPerIteration: .kilo,
                bytesPerOperation: 4_096, warmupOperations: 1_000, maxDuration: .seconds(3)
            ) { _ in
                LZ4CompressWorkload(blockByteCount: 4_096)
            },
            WorkloadSpec(
                id: "raw.lz4.4k.text", name: "L1 raw LZ4 compress 4 KiB text blocks", operationsPerIteration: .kilo,
                bytesPerOperation: 4_096, warmupOperations: 1_000, maxDuration: .seconds(3)
            ) { _ in
                LZ4CompressWorkload(blockByteCount: 4_096, payloads: .text)
            },
            WorkloadSpec(
                id: "raw.lz4.200", name: "L2 raw LZ4 compress 200 B records", operationsPerIteration: .kilo,
                bytesPerOperation: recordByteCount, warmupOperations: 10_000, maxDuration: .seconds(3)
            ) { _ in
                LZ4CompressWorkload(blockByteCount: recordByteCount, blockCount: 1_024)
            },
        ]
    }

    /// P1: durable appends from one thread, with the raw loops and SQLite one row per transaction.
    static var p1: [WorkloadSpec] {
        [
            WorkloadSpec(
                id: "P1.logstore", name: "P1 LogStore append synchronous 1 thread",
                bytesPerOperation: recordByteCount, warmupOperations: 200
            ) { context in
                try LogAppendWorkload(directory: context.directory, durability: .synchronous)
            },
            WorkloadSpec(
                id: "raw.append.sync", name: "P1 raw pwrite+fdatasync growing file",
                bytesPerOperation: recordByteCount, warmupOperations: 200
            ) { context in
                try RawAppendWorkload(directory: context.directory, syncs: true, preallocatedByteCount: nil)
            },
            WorkloadSpec(
                id: "raw.prealloc.sync", name: "P1 raw pwrite+fdatasync zero-filled file",
                bytesPerOperation: recordByteCount, warmupOperations: 200
            ) { context in
                try RawAppendWorkload(
                    directory: context.directory, syncs: true,
                    preallocatedByteCount: context.profile.isSmoke ? 1 << 20 : 64 << 20)
            },
            WorkloadSpec(
                id: "sqlite.full.1", name: "P1 SQLite WAL FULL 1 thread",
                bytesPerOperation: recordByteCount, warmupOperations: 200
            ) { context in
                try SQLiteInsertWorkload(directory: context.directory, synchronous: .full, threads: 1)
            },
            WorkloadSpec(
                id: "sqlite.normal.1", name: "P1 SQLite WAL NORMAL 1 thread", operationsPerIteration: .kilo,
                bytesPerOperation: recordByteCount, warmupOperations: 1_000
            ) { context in
                try SQLiteInsertWorkload(directory: context.directory, synchronous: .normal, threads: 1)
            },
        ]
    }

    /// P2: durable appends from 8 threads sharing fdatasyncs, and SQLite from 8 threads.
    static var p2: [WorkloadSpec] {
        [
            WorkloadSpec(
                id: "P2.logstore", name: "P2 LogStore append synchronous 8 threads", threads: appenderThreads,
                operationsPerIteration: .kilo, bytesPerOperation: recordByteCount, warmupOperations: 400,
                derivedMetrics: [.ratio("records per fdatasync (x100)", "records", per: "fdatasyncs")]
            ) { context in
                try LogAppendWorkload(directory: context.directory, durability: .synchronous)
            },
            WorkloadSpec(
                id: "sqlite.full.8", name: "P2 SQLite WAL FULL 8 threads", threads: appenderThreads,
                operationsPerIteration: .kilo, bytesPerOperation: recordByteCount, warmupOperations: 400
            ) { context in
                try SQLiteInsertWorkload(directory: context.directory, synchronous: .full, threads: appenderThreads)
            },
            WorkloadSpec(
                id: "sqlite.normal.8", name: "P2 SQLite WAL NORMAL 8 threads", threads: appenderThreads,
                operationsPerIteration: .kilo, bytesPerOperation: recordByteCount, warmupOperations: 2_000
            ) { context in
                try SQLiteInsertWorkload(directory: context.directory, synchronous: .normal, threads: appenderThreads)
            },
        ]
    }

    /// P3: appends with durability `.none` (one write each; fdatasync only at the 4 MiB unsynced
    /// bound and at rolls), with raw pwrite loops that never sync.
    static var p3: [WorkloadSpec] {
        [
            WorkloadSpec(
                id: "P3.logstore", name: "P3 LogStore append none 1 thread", operationsPerIteration: .kilo,
                bytesPerOperation: recordByteCount, warmupOperations: 10_000, maxDuration: .seconds(3),
                derivedMetrics: [.ratio("records per fdatasync (x100)", "records", per: "fdatasyncs")]
            ) { context in
                try LogAppendWorkload(directory: context.directory, durability: .none)
            },
            WorkloadSpec(
                id: "raw.append.nosync", name: "P3 raw pwrite growing file no sync", operationsPerIteration: .kilo,
                bytesPerOperation: recordByteCount, warmupOperations: 10_000, maxDuration: .seconds(3)
            ) { context in
                try RawAppendWorkload(directory: context.directory, syncs: false, preallocatedByteCount: nil)
            },
            WorkloadSpec(
                id: "raw.prealloc.nosync", name: "P3 raw pwrite zero-filled file no sync",
                operationsPerIteration: .kilo,
                bytesPerOperation: recordByteCount, warmupOperations: 10_000, maxDuration: .seconds(3)
            ) { context in
                try RawAppendWorkload(
                    directory: context.directory, syncs: false,
                    preallocatedByteCount: context.profile.isSmoke ? 1 << 20 : 64 << 20)
            },
        ]
    }
}
