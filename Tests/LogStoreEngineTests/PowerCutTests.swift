import Foundation
import LogStoreTestSupport
import Synchronization
import Testing

@testable import LogStoreEngine

/// The recovered log is always a prefix of what was appended that contains every acknowledged
/// append: no holes, no phantoms — over seeded power cuts that keep any subset of unsynced
/// sectors and forget directory entries no directory fsync made durable.
@Suite struct PowerCutTests {
    static let durabilities: [Durability] = [.synchronous, .batched(syncIntervalMax: .milliseconds(1)), .none]

    @Test(arguments: 0..<240)
    func recoveredLogIsAnAcknowledgedPrefix(seed: Int) throws {
        var generator = SeededGenerator(seed: UInt64(seed) &* 7919)
        let fileSystem = SimulatedFileSystem()
        let durability = Self.durabilities[seed % 3]
        let options = simulatedOptions(
            fileSystem, durability: durability,
            segmentByteCountMax: [2048, 8192, 65536][(seed / 3) % 3],
            preallocates: seed % 2 == 0)
        let log = try Log.open(directory: storePath, options: options)
        var acknowledgedCount = 0  // appends 0..<acknowledgedCount are durable
        var writtenCount = 0
        let stepCount = Int.random(in: 1...150, using: &generator)
        for _ in 0..<stepCount {
            let bytes = payload(
                number: writtenCount, byteCount: Int.random(in: 8...700, using: &generator),
                compressible: Bool.random(using: &generator), generator: &generator)
            switch Int.random(in: 0..<10, using: &generator) {
            case 0..<5:
                try log.append(bytes)
                writtenCount += 1
                if durability == .synchronous { acknowledgedCount = writtenCount }
            case 5..<9:
                try log.write(bytes)
                writtenCount += 1
            default:
                try log.sync()
                acknowledgedCount = writtenCount
            }
        }
        let cut = fileSystem.powerCut(seed: UInt64(seed))
        let everything = try readAllWritten(log)
        #expect(everything.map(sequenceNumber) == Array(0..<writtenCount))
        try log.close()

        let recovered = try Log.open(directory: storePath, options: simulatedOptions(cut, durability: durability))
        let records = try readAll(recovered)
        #expect(records.count >= acknowledgedCount, "seed \(seed): lost an acknowledged append")
        #expect(records.count <= everything.count)
        #expect(records == Array(everything.prefix(records.count)), "seed \(seed): not a prefix")

        // The recovered log takes appends and reads them back, also after another reopen.
        let next = try recovered.append(Array("after the cut".utf8))
        // Right after the last record kept, a segment dictionary (FORMAT.md §6.8) included.
        let kept = try readAll(recovered, includingMarks: true)
        #expect(next.offset == (kept.dropLast().last?.endOffset ?? recovered.startOffset))
        try recovered.close()
        let again = try Log.open(directory: storePath, options: simulatedOptions(cut, durability: durability))
        let final = try readAll(again)
        #expect(final.count == records.count + 1)
        #expect(final.last?.payload == Array("after the cut".utf8))
        #expect(!again.recoveryReport.droppedAnything)
        try again.close()
    }

    @Test(arguments: 0..<24)
    func concurrentAppendersLoseNothingAcknowledged(seed: Int) throws {
        let fileSystem = SimulatedFileSystem()
        let durability = Self.durabilities[seed % 3]
        let options = simulatedOptions(fileSystem, durability: durability, segmentByteCountMax: 16384)
        let log = try Log.open(directory: storePath, options: options)
        let acknowledged = Mutex<Set<[UInt8]>>([])
        let stop = Atomic<Bool>(false)
        let done = DispatchSemaphore(value: 0)
        let threadCount = 4
        for thread in 0..<threadCount {
            Thread {
                defer { done.signal() }
                var number = 0
                while !stop.load(ordering: .relaxed) && number < 400 {
                    let bytes =
                        Array("t\(thread)-n\(number)-".utf8) + Array(repeating: UInt8(thread), count: number % 90)
                    guard let position = try? log.append(bytes) else { return }
                    if durability == .synchronous || (try? log.waitUntilDurable(position)) != nil {
                        _ = acknowledged.withLock { $0.insert(bytes) }
                    }
                    number += 1
                }
            }.start()
        }
        Thread.sleep(forTimeInterval: Double(seed % 6 + 1) / 1000)
        let acknowledgedBeforeCut = acknowledged.withLock { $0 }
        let cut = fileSystem.powerCut(seed: UInt64(seed))
        stop.store(true, ordering: .relaxed)
        for _ in 0..<threadCount { done.wait() }
        let everything = try readAllWritten(log)
        try log.close()

        let recovered = try Log.open(directory: storePath, options: simulatedOptions(cut, durability: durability))
        let records = try readAll(recovered)
        #expect(records == Array(everything.prefix(records.count)), "seed \(seed): not a prefix")
        let payloads = Set(records.map(\.payload))
        #expect(acknowledgedBeforeCut.isSubset(of: payloads), "seed \(seed): lost an acknowledged append")
        try recovered.close()
    }

    @Test(arguments: 0..<40)
    func aCutDuringRecoveryStillRecovers(seed: Int) throws {
        var generator = SeededGenerator(seed: UInt64(seed) + 99)
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem, durability: .none))
        for number in 0..<60 {
            try log.write(
                payload(
                    number: number, byteCount: Int.random(in: 8...900, using: &generator),
                    compressible: false, generator: &generator))
            if number == 20 { try log.sync() }
        }
        let everything = try readAllWritten(log)
        let first = fileSystem.powerCut(seed: UInt64(seed))
        try log.close()
        // Open (recovering a torn tail), then lose power again before anything else happens.
        let opened = try Log.open(directory: storePath, options: simulatedOptions(first))
        let second = first.powerCut(seed: UInt64(seed) + 1)
        try opened.close()
        let recovered = try Log.open(directory: storePath, options: simulatedOptions(second))
        let records = try readAll(recovered)
        #expect(records.count >= 21)
        #expect(records == Array(everything.prefix(records.count)))
        try recovered.close()
    }

    /// Everything written (in any mode), read before the log is closed.
    private func readAllWritten(_ log: Log) throws -> [LogRecord] {
        try log.sync()
        return try readAll(log)
    }
}
