// swift-tools-version: 6.1
// Benchmarks for LogStore: the engine against the machine's raw limits and SQLite (GRDB), measured in
// one run so that the figures are ratios. Run them with `Benchmarks/run.sh` (see the top of that
// script), or directly with `swift package --package-path Benchmarks benchmark`.
import PackageDescription

let package = Package(
    name: "LogStoreBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "LogStore", path: ".."),
        // No traits: the malloc interposer (its default) puts a 16-byte size header on every
        // allocation of the measured process — LogStore's and SQLite's alike — for malloc
        // metrics no benchmark here reads; P8's million rows paid it once each. The runtime
        // interposer (the other default) needs a repository the mirror lacks.
        .package(url: "https://github.com/ordo-one/benchmark", exact: "1.38.1", traits: []),
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
    ],
    targets: [
        // The harness (workload specs, timing, summaries) and the peers every suite compares
        // against: raw pwrite/fdatasync loops, raw LZ4, SQLite through GRDB; the model-layer
        // workloads and their Trip models.
        .target(
            name: "BenchmarkSupport",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "LogStore", package: "LogStore"),
                .product(name: "SampleTrips", package: "LogStore"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            path: "Sources/BenchmarkSupport"
        ),
        // P1–P3: engine-layer appends (`Log`), with their raw and SQLite peers.
        .executableTarget(
            name: "EngineBenchmarks",
            dependencies: [
                "BenchmarkSupport",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "LogStore", package: "LogStore"),
            ],
            path: "Benchmarks/EngineBenchmarks",
            plugins: [
                .plugin(name: "BenchmarkPlugin", package: "benchmark")
            ]
        ),
        // P1-ctx–P4-ctx: model-layer saves (`ModelContext`, `store.save`) of SampleTrips `Trip`s,
        // with SQLite plus a history table, and the ArchiveStore, as peers.
        .executableTarget(
            name: "ModelBenchmarks",
            dependencies: [
                "BenchmarkSupport",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "LogStore", package: "LogStore"),
            ],
            path: "Benchmarks/ModelBenchmarks",
            plugins: [
                .plugin(name: "BenchmarkPlugin", package: "benchmark")
            ]
        ),
        // P6: history fetches after a token near the end of large logs, with SQLite's history table.
        .executableTarget(
            name: "HistoryBenchmarks",
            dependencies: [
                "BenchmarkSupport",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "LogStore", package: "LogStore"),
            ],
            path: "Benchmarks/HistoryBenchmarks",
            plugins: [
                .plugin(name: "BenchmarkPlugin", package: "benchmark")
            ]
        ),
        // Issue 12: several writing processes on one store (allowsOtherWriters), with real
        // processes (the binary runs itself again as a child): saves from 2 processes, remote-change
        // latency, an idle reader's CPU, catch-up and the "anything new?" check.
        .executableTarget(
            name: "ProcessBenchmarks",
            dependencies: [
                "BenchmarkSupport",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "LogStore", package: "LogStore"),
            ],
            path: "Benchmarks/ProcessBenchmarks",
            plugins: [
                .plugin(name: "BenchmarkPlugin", package: "benchmark")
            ]
        ),
        // P5, P8: opening large stores (checkpoint + replay) and their resident memory, on
        // fixtures built once and cached under .cache/fixtures.
        .executableTarget(
            name: "StateBenchmarks",
            dependencies: [
                "BenchmarkSupport",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "LogStore", package: "LogStore"),
            ],
            path: "Benchmarks/StateBenchmarks",
            plugins: [
                .plugin(name: "BenchmarkPlugin", package: "benchmark")
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
