import Benchmark
import BenchmarkSupport
import Foundation

// State-size workloads on cached fixtures (see StateWorkloads.swift): P5 opens a store of 1M
// one-update transactions over 10k Trips, with and without a checkpoint at the end of the log;
// P8 reads the resident memory of a store of 1M live Trips opened from its checkpoint. The first
// run builds the fixtures (durability `.none`) under Benchmarks/.cache/fixtures; later runs reuse
// them. `id`s are what `summarize.py` reads. With `LOGSTORE_LONG=1` the long soak runs too (a 10M-
// transaction store: open, save into, compact, reopen; LongSoakWorkload.swift).

let benchmarks: @Sendable () -> Void = {
    for spec in StateSuite.specs {
        register(spec)
    }
}

enum StateSuite {
    static var specs: [WorkloadSpec] {
        [
            WorkloadSpec(
                id: "P5.replay", name: "P5 LogStore open, full replay of 1M transactions over 10k Trips",
                warmupOperations: 1, maxDuration: .seconds(6)
            ) { context in
                try StoreOpenWorkload(profile: context.profile, variant: .replay)
            },
            WorkloadSpec(
                id: "P5.checkpoint", name: "P5 LogStore open from a checkpoint at the end of the same log",
                warmupOperations: 1, maxDuration: .seconds(3)
            ) { context in
                try StoreOpenWorkload(profile: context.profile, variant: .checkpoint)
            },
            WorkloadSpec(
                id: "P8.rss", name: "P8 LogStore resident memory, 1M live Trips opened from a checkpoint",
                warmupOperations: 0, maxDuration: .seconds(1)
            ) { context in
                try ResidentMemoryWorkload(profile: context.profile)
            },
        ] + longSoak
    }

    /// Issue 13's long soak (`LongSoakWorkload`): only with `LOGSTORE_LONG=1` — its fixture is
    /// 10M transactions (about 700 MB, built once) and its one operation takes minutes.
    static var longSoak: [WorkloadSpec] {
        guard ProcessInfo.processInfo.environment["LOGSTORE_LONG"] == "1" else { return [] }
        return [
            WorkloadSpec(
                id: "soak.long", name: "Soak LogStore 10M transactions over 1M Trips: open, save, compact, reopen",
                warmupOperations: 0, maxDuration: .seconds(1)
            ) { context in
                try LongSoakWorkload(profile: context.profile, workDirectory: context.directory)
            }
        ]
    }
}
