import Benchmark
import BenchmarkSupport

// P6: 1,000 transactions after a token near the end of 10k / 100k / 1M-transaction histories,
// token only and with an author filter, LogStore (`fetchHistory`) against SQLite's history table
// in the same run. Fixtures are built once (see HistoryWorkloads.swift). `id`s are what
// `summarize.py` reads.

let benchmarks: @Sendable () -> Void = {
    for spec in HistorySuite.specs {
        register(spec)
    }
}

enum HistorySuite {
    // 10k and 1M: the floor compares the two.
    static let sizes = [10_000, 1_000_000]

    static var specs: [WorkloadSpec] {
        sizes.flatMap { size -> [WorkloadSpec] in
            let label = size >= 1_000_000 ? "\(size / 1_000_000)M" : "\(size / 1_000)k"
            return [HistoryFetchWorkload.Filter.token, .author].flatMap { filter -> [WorkloadSpec] in
                let what = filter == .token ? "token only" : "author filter"
                return [
                    WorkloadSpec(
                        id: "P6.logstore.\(filter.rawValue).\(label)",
                        name: "P6 LogStore fetchHistory 1,000 after a token, \(what), \(label) transactions",
                        warmupOperations: 5, maxDuration: .seconds(1)
                    ) { context in
                        try HistoryFetchWorkload(profile: context.profile, size: size, filter: filter)
                    },
                    WorkloadSpec(
                        id: "P6.sqlite.\(filter.rawValue).\(label)",
                        name: "P6 SQLite 1,000 history rows after an id, \(what), \(label) rows",
                        warmupOperations: 5, maxDuration: .seconds(1)
                    ) { context in
                        try SQLiteHistoryFetchWorkload(profile: context.profile, size: size, filter: filter)
                    },
                ]
            }
        }
    }
}
