import Foundation
import LogStoreTestSupport
import Synchronization
import Testing

@testable import LogStoreEngine

/// Power cuts with two writing processes (D11, `allowsOtherWriters`): two logs on two process
/// views of one simulated file system take turns and syncs through its `flock`s — `LOCK` shared,
/// `TURN`, `SYNC`, `MAINTENANCE` — while two threads in each append as a store's saves do (write
/// under the turn, wait for durability outside it). The power fails at a random moment, keeping
/// any subset of unsynced sectors and forgetting directory entries no fsync made durable. Opened
/// alone afterwards, the log holds every append either process had acknowledged, each thread's
/// appends form a prefix of what it wrote, nothing is there twice or from nowhere, and the damage
/// the cut left is judged a torn tail, never corruption — with and without durable-end marks
/// (D12), which each record states from its own process's view.
@Suite struct SharedWritersPowerCutTests {
    static func options(_ fileSystem: SimulatedFileSystem, process: UInt64, seed: Int) -> LogOptions {
        var options = simulatedOptions(
            fileSystem, durability: PowerCutTests.durabilities[seed % 3], segmentByteCountMax: [2048, 16384][(seed / 3) % 2],
            preallocates: seed % 2 == 0)
        options.fileSystem = ProcessView(fileSystem, process: process)
        options.allowsOtherWriters = true
        // Idle durable-end marks in half the seeds (a thread pausing lets one through).
        options.durableEndMarkDelay = (seed / 6) % 2 == 0 ? nil : .milliseconds(1)
        return options
    }

    /// `t<thread>-n<number>-` and filler: which thread wrote it, and its place in that thread's order.
    static func origin(_ payload: [UInt8]) -> (thread: Int, number: Int)? {
        let text = String(decoding: payload.prefix(24), as: UTF8.self)
        let parts = text.split(separator: "-")
        guard parts.count >= 2, parts[0].hasPrefix("t"), parts[1].hasPrefix("n"),
            let thread = Int(parts[0].dropFirst()), let number = Int(parts[1].dropFirst())
        else { return nil }
        return (thread, number)
    }

    @Test(arguments: 0..<48)
    func twoWritingProcessesLoseNothingAcknowledgedAtAPowerCut(seed: Int) throws {
        var generator = SeededGenerator(seed: UInt64(seed) &* 104_729)
        let fileSystem = SimulatedFileSystem()
        let logs = [
            try Log.open(directory: storePath, options: Self.options(fileSystem, process: 1, seed: seed)),
            try Log.open(directory: storePath, options: Self.options(fileSystem, process: 2, seed: seed)),
        ]
        #expect(logs.allSatisfy { $0.isSharedByWriters })
        let acknowledged = Mutex<Set<[UInt8]>>([])
        let written = Mutex<[Int: Int]>([:])  // thread -> appends written
        let failures = Mutex<[String]>([])
        let stop = Atomic<Bool>(false)
        let done = DispatchSemaphore(value: 0)
        let threadCount = 4
        for thread in 0..<threadCount {
            let log = logs[thread % 2]
            // With idle marks on, every thread pauses now and then: idle moments let marks through.
            let pauses = (seed / 6) % 2 == 1
            Thread {
                defer { done.signal() }
                var number = 0
                // Bounded: 300 appends at most.
                while !stop.load(ordering: .relaxed) && number < 300 {
                    let bytes = Array("t\(thread)-n\(number)-".utf8) + Array(repeating: UInt8(thread), count: number * 7 % 150)
                    let position: LogPosition
                    do throws(LogError) {
                        try log.beginTurn()
                        defer { log.endTurn() }
                        position = try log.write(bytes)
                    } catch {
                        failures.withLock { $0.append("t\(thread) write \(number): \(error)") }
                        return
                    }
                    written.withLock { $0[thread] = number + 1 }
                    do throws(LogError) { try log.waitUntilDurable(position) } catch {
                        failures.withLock { $0.append("t\(thread) wait \(number): \(error)") }
                        return
                    }
                    _ = acknowledged.withLock { $0.insert(bytes) }
                    if pauses && number % 8 == 7 { usleep(UInt32(2_000 + thread * 700)) }
                    number += 1
                }
            }.start()
        }
        // Bounded: the threads stop at 300 appends each, and then the count stops growing.
        let target = Int.random(in: 5...400, using: &generator)
        let deadline = Date().addingTimeInterval(30)
        while acknowledged.withLock({ $0.count }) < target && Date() < deadline
            && failures.withLock({ $0.isEmpty }) && written.withLock({ $0.values.reduce(0, +) }) < threadCount * 300
        {
            usleep(200)
        }
        let acknowledgedBeforeCut = acknowledged.withLock { $0 }
        let cut = fileSystem.powerCut(seed: UInt64(seed))
        stop.store(true, ordering: .relaxed)
        for _ in 0..<threadCount { done.wait() }
        #expect(failures.withLock { $0 }.isEmpty, "seed \(seed): \(failures.withLock { $0 })")
        let writtenCounts = written.withLock { $0 }
        for log in logs { try log.close() }

        // Opened alone: the full recovery (the cut left no process behind).
        var alone = simulatedOptions(cut, durability: PowerCutTests.durabilities[seed % 3])
        alone.allowsOtherWriters = seed % 2 == 0
        let recovered: Log
        do { recovered = try Log.open(directory: storePath, options: alone) } catch {
            Issue.record("seed \(seed): the open after the cut failed: \(error)")
            return
        }
        let records = try readAll(recovered)
        let payloads = records.map(\.payload)
        // Segment dictionaries are in play (FORMAT.md §6.8): with 16 KiB segments (a 2 KiB
        // dictionary) a log of over 100 records has rolled to a segment beginning with one, so the
        // moments this test cuts at include a roller's new segment before its dictionary, amid it,
        // and before the records compressed against it.
        if (seed / 3) % 2 == 1 && records.count > 100 {
            #expect(records.contains { $0.usesDictionary }, "seed \(seed): no record compressed against a dictionary")
        }
        #expect(Set(payloads).count == payloads.count, "seed \(seed): a record is there twice")
        #expect(acknowledgedBeforeCut.isSubset(of: Set(payloads)), "seed \(seed): lost an acknowledged append")
        var next = [Int: Int]()
        for payload in payloads {
            guard let (thread, number) = Self.origin(payload), number < writtenCounts[thread, default: 0] else {
                Issue.record("seed \(seed): a record nobody wrote")
                continue
            }
            #expect(number == next[thread, default: 0], "seed \(seed): thread \(thread)'s appends are not a prefix")
            next[thread] = number + 1
        }
        // The recovered log takes an append and keeps it across another open.
        try recovered.beginTurn()  // (nothing without allowsOtherWriters)
        _ = try recovered.append(Array("after the cut".utf8))
        recovered.endTurn()
        try recovered.close()
        let again = try Log.open(directory: storePath, options: simulatedOptions(cut))
        #expect(try readAll(again).map(\.payload) == payloads + [Array("after the cut".utf8)])
        try again.close()
    }
}
