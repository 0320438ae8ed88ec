import Benchmark
import BenchmarkSupport

// Issue 12: several processes, one store (DECISIONS.md D11 stage 2, `allowsOtherWriters`), with
// real processes — the binary runs itself again as a child (ProcessChannel.swift in
// BenchmarkSupport), so `ProcessChild.runIfRequested()` comes first: in a child it runs the child
// and exits. Measured side by side in one run:
// - durable saves per second: 4 + 4 savers in 2 processes against 8 savers in 1 process, opened
//   with and without `allowsOtherWriters` (the cost of sharing when alone), and 1 saver with and
//   without;
// - remote-change latency (a save in one process to `remoteChanges` in the other) for a reader
//   that writes too and for a read-only one, with the idle reader's CPU over 5 s;
// - catch-up per foreign transaction (a turn folding another process's backlog);
// - "anything new?" when nothing is: the engine's check, and a fetch with and without it.
// `id`s are what `summarize.py` reads (its issue-12 section).

let benchmarks: @Sendable () -> Void = {
    ProcessChild.runIfRequested()
    for spec in ProcessSuite.processSpecs {
        registerProcess(spec)
    }
    for spec in ProcessSuite.checks {
        register(spec)
    }
}

enum ProcessSuite {
    static var processSpecs: [ProcessSpec] {
        [
            ProcessSpec(id: "i12.saves.1x1", name: "I12 saves 1 saver 1 process", threads: 1) { context in
                try SaverWindowWorkload(context: context, localThreads: 1, childThreads: 0, shared: false)
            },
            ProcessSpec(id: "i12.saves.1x1.shared", name: "I12 saves 1 saver 1 process allowsOtherWriters", threads: 1) {
                context in
                try SaverWindowWorkload(context: context, localThreads: 1, childThreads: 0, shared: true)
            },
            ProcessSpec(id: "i12.saves.1x8", name: "I12 saves 8 savers 1 process", threads: 8) { context in
                try SaverWindowWorkload(context: context, localThreads: 8, childThreads: 0, shared: false)
            },
            ProcessSpec(
                id: "i12.saves.1x8.shared", name: "I12 saves 8 savers 1 process allowsOtherWriters", threads: 8
            ) { context in
                try SaverWindowWorkload(context: context, localThreads: 8, childThreads: 0, shared: true)
            },
            ProcessSpec(
                id: "i12.saves.2x4.shared", name: "I12 saves 4+4 savers 2 processes allowsOtherWriters", threads: 8
            ) { context in
                try SaverWindowWorkload(context: context, localThreads: 4, childThreads: 4, shared: true)
            },
            ProcessSpec(
                id: "i12.latency.writer", name: "I12 remote change latency to an allowsOtherWriters writer",
                maxDuration: .seconds(3)
            ) { context in
                try RemoteChangeLatencyWorkload(context: context, reader: .sharedWriter)
            },
            ProcessSpec(
                id: "i12.latency.readonly", name: "I12 remote change latency to a read-only reader",
                maxDuration: .seconds(3)
            ) { context in
                try RemoteChangeLatencyWorkload(context: context, reader: .readOnly)
            },
            ProcessSpec(
                id: "i12.catchup", name: "I12 catch-up of 1,000 foreign transactions in a turn", maxDuration: .seconds(3)
            ) { context in
                try CatchUpWorkload(context: context, backlog: 1_000)
            },
        ]
    }

    static var checks: [WorkloadSpec] {
        [
            WorkloadSpec(
                id: "i12.nothingNew.writer", name: "I12 nothing new check allowsOtherWriters writer",
                operationsPerIteration: .kilo, warmupOperations: 1_000, maxDuration: .seconds(2)
            ) { context in
                try NothingNewWorkload(directory: context.directory, check: .sharedWriter)
            },
            WorkloadSpec(
                id: "i12.nothingNew.readonly", name: "I12 nothing new check read-only follower",
                operationsPerIteration: .kilo, warmupOperations: 1_000, maxDuration: .seconds(2)
            ) { context in
                try NothingNewWorkload(directory: context.directory, check: .readOnly)
            },
            WorkloadSpec(
                id: "i12.fetch.shared", name: "I12 fetch one Trip allowsOtherWriters store",
                operationsPerIteration: .kilo, warmupOperations: 1_000, maxDuration: .seconds(2)
            ) { context in
                try NothingNewWorkload(directory: context.directory, check: .fetchShared)
            },
            WorkloadSpec(
                id: "i12.fetch.alone", name: "I12 fetch one Trip store opened alone",
                operationsPerIteration: .kilo, warmupOperations: 1_000, maxDuration: .seconds(2)
            ) { context in
                try NothingNewWorkload(directory: context.directory, check: .fetchAlone)
            },
        ]
    }
}
