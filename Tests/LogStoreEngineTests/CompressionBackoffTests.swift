import Foundation
import LogStoreTestSupport
import Testing

@testable import LogStoreEngine

/// Payloads that never compress stop being offered to LZ4 after a run of failed tries (one in
/// `tryInterval` still is), and the first that shrinks — or a roll to a new dictionary — turns every
/// try back on. (A version-2 store's first saves fail alone and then must compress against the
/// dictionary at once: `FormatVersionTwoTests` checks every transaction of that segment.)
@Suite struct CompressionBackoffTests {
    @Test func aRunOfFailuresBacksOffToOneTryInAnIntervalUntilOneShrinks() {
        let backoff = CompressionBackoff()
        for _ in 0..<CompressionBackoff.failureRunBeforeBackingOff {
            #expect(backoff.shouldTry())
            backoff.record(shrank: false)
        }
        // Backing off: exactly one try per interval.
        var tries = 0
        for _ in 0..<(CompressionBackoff.tryInterval * 4) where backoff.shouldTry() {
            tries += 1
            backoff.record(shrank: false)
        }
        #expect(tries == 4)
        // A try that shrinks ends it.
        while !backoff.shouldTry() {}
        backoff.record(shrank: true)
        for _ in 0..<(CompressionBackoff.tryInterval * 2) { #expect(backoff.shouldTry()) }
        // A new dictionary (a roll) starts over.
        for _ in 0..<CompressionBackoff.failureRunBeforeBackingOff { backoff.record(shrank: false) }
        #expect(backoff.isBackingOff)
        backoff.reset()
        #expect(!backoff.isBackingOff && backoff.shouldTry())
        // A failure run shorter than the threshold, broken by a success, never backs off.
        for round in 0..<(CompressionBackoff.failureRunBeforeBackingOff * 3) {
            #expect(backoff.shouldTry())
            backoff.record(shrank: round % CompressionBackoff.failureRunBeforeBackingOff == 0)
        }
    }

    @Test func aLogStoresRandomPayloadsRawWithoutTryingEachAndCompressesAgainWhenTheyRepeat() throws {
        let (log, _, _) = try DictionaryTests.onSimulatedDisk(dictionaryByteCountMax: 0)
        defer { try? log.close() }
        var generator = SeededGenerator(seed: 5)
        for _ in 0..<40 {
            _ = try log.append((0..<300).map { _ in UInt8.random(in: 0...255, using: &generator) })
        }
        #expect(log.compressionBackoffIsBackingOff)
        // Compressible payloads: within one interval one is tried, shrinks, and from then on
        // every one is compressed.
        var offsets: [UInt64] = []
        for index in 0..<(CompressionBackoff.tryInterval * 2) {
            offsets.append(try log.append(Array(repeating: UInt8(index), count: 300)).offset)
        }
        #expect(!log.compressionBackoffIsBackingOff)
        var compressed: [Bool] = []
        var records = try log.records(from: offsets[0])
        while let record = try records.next() { compressed.append(record.isCompressed) }
        #expect(compressed.count == offsets.count)
        let first = try #require(compressed.firstIndex(of: true))
        #expect(first < CompressionBackoff.tryInterval)
        #expect(compressed[first...].allSatisfy { $0 })
    }
}
