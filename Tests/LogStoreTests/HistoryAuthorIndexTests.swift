import Foundation
import LogStoreEngine
import Synchronization
import LogStoreTestSupport
import SampleTrips
import Testing

@testable import LogStore

/// The history's author index (DECISIONS.md D6): fetches with an author filter file the authors
/// of the records they read, and later ones read only the records they take — with the same
/// answers as reading every record, across segments, saves in between, compaction, and a log
/// that changed under the open store.
@Suite struct HistoryAuthorIndexTests {
    typealias H = HistoryTests

    /// Authors with Swift's equality in play: "é" precomposed and decomposed are equal strings of
    /// different bytes; "Widget" is not "widget".
    static let authors: [String?] = [nil, "app", "widget", "Widget", "\u{e9}", "e\u{301}"]

    /// Random saves, fetches with author filters (random bounds, limits, authors) and history
    /// deletions, interleaved: every filtered fetch returns what filtering the whole history (read
    /// without an author filter, so without the index) with the predicate returns.
    @Test(arguments: [1, 2, 3] as [UInt64])
    func filteredFetchesMatchFilteringTheWholeHistory(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        // Small segments: skips cross segment boundaries, and deletions delete segments.
        let (container, store) = try H.open(SimulatedFileSystem(), segmentByteCountMax: 4_096, durability: .none)
        var tokens: [DefaultHistoryToken] = []
        var number = 0
        var fetches = 0
        for _ in 0..<40 {
            for _ in 0..<Int.random(in: 1...15, using: &random) {
                tokens.append(try H.saveTrip(container, number, author: Self.authors.randomElement(using: &random)!))
                number += 1
            }
            if Int.random(in: 0..<8, using: &random) == 0, tokens.count > 20 {
                let cutoff = tokens[Int.random(in: 0..<(tokens.count - 10), using: &random)]
                try store.deleteHistory(HistoryDescriptor(predicate: #Predicate { $0.token <= cutoff }))
                tokens.removeAll { $0.offset <= cutoff.offset }
            }
            let whole = try store.fetchHistory(HistoryDescriptor())
            #expect(H.tokens(whole) == tokens)
            for _ in 0..<3 {
                var descriptor = Self.randomDescriptor(tokens: tokens, using: &random)
                if random.nextBool() { descriptor.fetchLimit = Int.random(in: 1...20, using: &random) }
                let expected = try whole.filter { try descriptor.predicate!.evaluate($0) }
                    .prefix(descriptor.fetchLimit ?? .max)
                let fetched = try store.fetchHistory(descriptor)
                #expect(H.tokens(fetched) == H.tokens(Array(expected)), "seed \(seed), fetch \(fetches)")
                #expect(fetched.map(\.author) == expected.map(\.author))
                fetches += 1
            }
        }
        #expect(store.historyAuthorIndex.entryCount > 0)
        try store.close()
    }

    /// Only durable records are filed: with durability `.none` nothing is synced until a roll (or
    /// 4 MiB, or a quiet second), so a fetch reads the unsynced records in order every time and
    /// files only what a sync covered.
    @Test func onlyDurableRecordsAreFiled() throws {
        let (container, store) = try H.open(SimulatedFileSystem(), durability: .none)
        for number in 0..<50 { try H.saveTrip(container, number, author: number % 5 == 0 ? "widget" : "app") }
        #expect(store.log.durableEnd < store.log.visibleEnd)
        let widget = HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.author == "widget" })
        #expect(try store.fetchHistory(widget).count == 10)
        let durable = store.historyAuthorIndex.snapshot().stretch
        #expect(durable.end <= store.log.durableEnd)
        #expect(durable.offsets.allSatisfy { $0 < store.log.durableEnd })
        try store.log.sync()
        #expect(try store.fetchHistory(widget).count == 10)
        #expect(store.historyAuthorIndex.entryCount == 50)
        try store.close()
    }

    static func randomDescriptor(tokens: [DefaultHistoryToken], using random: inout SeededGenerator)
        -> HistoryDescriptor<DefaultHistoryTransaction>
    {
        let name = authors.randomElement(using: &random)!
        let low = tokens[Int.random(in: 0..<tokens.count, using: &random)]
        let high = tokens[Int.random(in: tokens.indices, using: &random)]
        switch Int.random(in: 0..<5, using: &random) {
        case 0: return HistoryDescriptor(predicate: #Predicate { $0.token > low && $0.author == name })
        case 1: return HistoryDescriptor(predicate: #Predicate { $0.token >= low && $0.author != name })
        case 2: return HistoryDescriptor(predicate: #Predicate { $0.token > low && $0.token <= high && $0.author == name })
        case 3: return HistoryDescriptor(predicate: #Predicate { $0.author == name })
        default: return HistoryDescriptor(predicate: #Predicate { $0.author == name && $0.token < high })
        }
    }

    /// The P6 shape (one "widget" save in ten): the first filtered fetch reads every record after
    /// its token; the same fetch again reads only the ones it takes (and the token's own, which
    /// it checks), with the same answer; saves after it are read once and filed too.
    @Test func aRepeatedFilteredFetchReadsOnlyWhatItTakes() throws {
        let (container, store) = try H.open(SimulatedFileSystem(), segmentByteCountMax: 64 * 1024)
        var tokens: [DefaultHistoryToken] = []
        for number in 0..<1_000 {
            tokens.append(try H.saveTrip(container, number, author: number % 10 == 9 ? "widget" : "app"))
        }
        let start = tokens[99]
        let descriptor = HistoryDescriptor<DefaultHistoryTransaction>(
            predicate: #Predicate { $0.token > start && $0.author == "widget" })
        // A fetch from a token starts at the sparse index entry before it and passes the records
        // up to the token by their headers (not counted as read); the bound below still allows
        // for an interval's records read whole, as they were before.
        let recordByteCount = Int(tokens[1].offset - tokens[0].offset)
        let seek = Int(FormatConstants.indexIntervalByteCount) / recordByteCount + 2
        let first = try store.fetchHistoryCounting(descriptor)
        #expect(first.transactions.count == 90)
        #expect(first.recordsRead >= 900)
        let second = try store.fetchHistoryCounting(descriptor)
        #expect(H.tokens(second.transactions) == H.tokens(first.transactions))
        #expect(second.recordsRead <= 91 + seek, "\(second.recordsRead) records read")
        #expect(store.historyAuthorIndex.entryCount == 901)

        // Ten more saves: the next fetch goes through the index, then reads the ten and files them.
        for number in 1_000..<1_010 {
            tokens.append(try H.saveTrip(container, number, author: number % 10 == 9 ? "widget" : "app"))
        }
        let third = try store.fetchHistoryCounting(descriptor)
        #expect(third.transactions.count == 91)
        #expect(third.transactions.last?.token == tokens[1_009])
        #expect(third.recordsRead <= 91 + 10 + seek)
        #expect(store.historyAuthorIndex.entryCount == 911)
        // An earlier start is read up to the stretch, then through it (and filed in front of it).
        let earlier = tokens[49]
        let fourth = try store.fetchHistoryCounting(
            HistoryDescriptor(predicate: #Predicate { $0.token > earlier && $0.author == "app" }))
        #expect(fourth.transactions.count == 960 - 96)
        #expect(store.historyAuthorIndex.entryCount == 961)
        // A filter that takes nothing in the stretch reads nothing of it.
        let none = try store.fetchHistoryCounting(
            HistoryDescriptor(predicate: #Predicate { $0.token > earlier && $0.author == "nobody" }))
        #expect(none.transactions.isEmpty)
        #expect(none.recordsRead <= 1 + seek)
        try store.close()
    }

    /// The index is a hint checked against the log: a record reached through it that is not the
    /// transaction it filed (another author, or no record at that offset) is `corruptRecord` or a
    /// corruption error, never a wrong answer.
    @Test func anIndexThatDisagreesWithTheLogIsCorruption() throws {
        let (container, store) = try H.open(SimulatedFileSystem())
        for number in 0..<50 { try H.saveTrip(container, number, author: number % 5 == 0 ? "widget" : "app") }
        let widget = HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.author == "widget" })
        #expect(try store.fetchHistory(widget).count == 10)
        // Swap the two authors' positions: the index now says "widget" wrote the "app" records.
        store.historyAuthorIndex.withStateForTesting { state in
            #expect(state.names.count == 2 && state.names[0] == Array("widget".utf8))
            state.stretch.authors = state.stretch.authors.map { 1 - $0 }
        }
        #expect {
            try store.fetchHistory(widget)
        } throws: { error in
            (error as? LogStoreError)?.code == .corruption
                && "\(error)".contains("author index")
        }
        // Authors right again, but a "widget" entry's offset inside its record: the header read
        // there does not name it.
        store.historyAuthorIndex.withStateForTesting { state in
            state.stretch.authors = state.stretch.authors.map { 1 - $0 }
            let widget = state.stretch.authors.indices.filter { state.stretch.authors[$0] == 0 }[3]
            state.stretch.offsets[widget] += 1
        }
        #expect(throws: LogStoreError.self) { try store.fetchHistory(widget) }
        try store.close()
    }

    /// A record that is not a transaction at the end of the stretch (a durable-end mark after a
    /// quiet moment, a consumer's bookmark) does not make the next fetch's run replace the
    /// stretch: the run starts where the stretch ends, and the two join. (The run started at
    /// the next transaction, past the mark, and replaced the whole stretch.)
    @Test func recordsOtherThanTransactionsAtTheStretchEndKeepItWhole() throws {
        var configuration = LogStoreConfiguration(
            directory: H.directory, durability: .synchronous, checkpointIntervalByteCount: 0,
            fileSystem: SimulatedFileSystem())
        configuration.durableEndMarkDelay = .milliseconds(2)
        let container = try ModelContainer(for: sampleTripsModels, configuration: configuration)
        let store = try #require(container.dataStore(as: LogStore.self))
        var tokens: [DefaultHistoryToken] = []
        var number = 0
        func save(_ count: Int) throws {
            for _ in 0..<count {
                tokens.append(try H.saveTrip(container, number, author: number % 5 == 0 ? "widget" : "app"))
                number += 1
            }
        }
        // Until a mark follows the last save: something written after its record (nothing but the
        // syncer's mark writes meanwhile; it may have come already, before this is called).
        func waitForMark() throws {
            let lastToken = try #require(tokens.last)
            let last = try #require(try store.log.firstRecord(atOrAfter: lastToken.offset))
            let deadline = Date().addingTimeInterval(20)
            while store.log.writtenEnd <= last.endOffset && Date() < deadline { Thread.sleep(forTimeInterval: 0.002) }
            #expect(store.log.writtenEnd > last.endOffset)
        }
        let widget = HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.author == "widget" })
        try save(50)
        #expect(try store.fetchHistory(widget).count == 10)
        #expect(store.historyAuthorIndex.entryCount == 50)
        try waitForMark()
        try save(5)
        try store.registerHistoryConsumer("reader")
        try save(5)
        let start = tokens[20]
        let fromToken = try store.fetchHistoryCounting(
            HistoryDescriptor(predicate: #Predicate { $0.token > start && $0.author == "widget" }))
        #expect(fromToken.transactions.count == 7)
        #expect(store.historyAuthorIndex.entryCount == 60)
        #expect(store.historyAuthorIndex.snapshot().stretch.offsets.first == tokens[0].offset)
        let again = try store.fetchHistoryCounting(widget)
        #expect(H.tokens(again.transactions) == tokens.enumerated().filter { (index, _) in index % 5 == 0 }.map { $0.element })
        #expect(again.recordsRead <= 12 + 2)

        // A filed offset that now holds a mark: the iterator passes over the mark and hands the
        // next record (a transaction of the same author), which is not the one filed there — a
        // disagreement, not that record taken.
        var marks = try store.log.records(from: store.log.startOffset, includingMarks: true)
        var markOffset: UInt64?
        while markOffset == nil, let record = try marks.next() {
            if record.type == RecordType.durableEndMark { markOffset = record.offset }
        }
        let mark = try #require(markOffset)
        store.historyAuthorIndex.withStateForTesting { state in
            state.stretch.offsets[state.stretch.firstEntry(atOrAfter: mark)] = mark
        }
        #expect {
            try store.fetchHistory(HistoryDescriptor(predicate: #Predicate { $0.author != "nobody" }))
        } throws: { error in
            (error as? LogStoreError)?.code == .corruption && "\(error)".contains("author index")
        }
        try store.close()
    }

    /// Filtered fetches on three threads while a fourth saves, with more distinct authors than
    /// the short list holds: each filtered fetch, bounded above by a token saved before it began,
    /// returns what filtering an unfiltered fetch of the same bounds returns.
    @Test func concurrentFilteredFetchesAndSavesAgree() throws {
        let (container, store) = try H.open(SimulatedFileSystem(), segmentByteCountMax: 16 * 1024, durability: .none)
        let names: [String?] = [nil] + (0..<11).map { "author \($0)" }
        final class Saved: Sendable { let tokens = Mutex<[DefaultHistoryToken]>([]) }
        let saved = Saved()
        for number in 0..<20 {
            let token = try H.saveTrip(container, number, author: names[number % names.count])
            saved.tokens.withLock { $0.append(token) }
        }
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            do {
                if worker == 0 {
                    for number in 20..<400 {
                        let token = try H.saveTrip(container, number, author: names[(number * 7) % names.count])
                        saved.tokens.withLock { $0.append(token) }
                    }
                    return
                }
                var random = SeededGenerator(seed: UInt64(worker))
                for _ in 0..<60 {
                    let tokens = saved.tokens.withLock { $0 }
                    let low = tokens[Int.random(in: 0..<tokens.count, using: &random)]
                    let high = tokens[Int.random(in: 0..<tokens.count, using: &random)]
                    let name = names.randomElement(using: &random)!
                    let filtered = try store.fetchHistory(
                        HistoryDescriptor(
                            predicate: #Predicate { $0.token >= low && $0.token <= high && $0.author == name }))
                    let whole = try store.fetchHistory(
                        HistoryDescriptor(predicate: #Predicate { $0.token >= low && $0.token <= high }))
                    #expect(H.tokens(filtered) == H.tokens(whole.filter { $0.author == name }))
                }
            } catch {
                Issue.record(error)
            }
        }
        #expect(store.historyAuthorIndex.snapshot().names.count == names.count)
        try store.close()
    }

    /// Filing: a run joins the kept stretch at either end, replaces it when wholly after it, is
    /// left out when it overlaps or leaves a gap before it; authors new to the fetch get the
    /// kept names' positions; what a compaction deleted and what is past the entry bound is dropped.
    @Test func runsJoinTheKeptStretch() {
        typealias Stretch = HistoryAuthorIndex.Stretch
        func names(_ authors: [String?]) -> HistoryAuthorIndex.Names {
            var names = HistoryAuthorIndex.Names()
            for author in authors {
                if let author {
                    _ = Array(author.utf8).withUnsafeBytes { names.position(of: $0) }
                } else {
                    _ = names.position(of: nil)
                }
            }
            return names
        }
        let index = HistoryAuthorIndex()
        index.file(
            [Stretch(start: 100, end: 200, offsets: [100, 150], authors: [0, 1])], names: names(["a", nil]),
            snapshotNameCount: 0, generation: 0, logStart: 0, durableEnd: .max)
        // After it, from a snapshot with "a" only: "b" is new to the fetch (position 1), 2 in the index.
        index.file(
            [Stretch(start: 200, end: 300, offsets: [210], authors: [1])], names: names(["a", "b"]),
            snapshotNameCount: 1, generation: 0, logStart: 0, durableEnd: .max)
        var state = index.snapshot()
        #expect(state.stretch.offsets == [100, 150, 210] && state.stretch.authors == [0, 1, 2])
        #expect(state.names[2] == Array("b".utf8) && state.stretch.start == 100 && state.stretch.end == 300)
        // Before it: joined in front; overlapping or with a gap before: left out.
        index.file(
            [Stretch(start: 40, end: 100, offsets: [40], authors: [0]), Stretch(start: 0, end: 30), Stretch(start: 120, end: 160, offsets: [150], authors: [0])],
            names: names(["a", nil, "b"]), snapshotNameCount: 3, generation: 0, logStart: 0, durableEnd: .max)
        state = index.snapshot()
        #expect(state.stretch.offsets == [40, 100, 150, 210] && state.stretch.start == 40)
        // A compaction deleted the log before 120.
        index.file([Stretch(start: 300, end: 310)], names: names(["a", nil, "b"]), snapshotNameCount: 3, generation: 0, logStart: 120, durableEnd: .max)
        state = index.snapshot()
        #expect(state.stretch.offsets == [150, 210] && state.stretch.start == 120 && state.stretch.end == 310)
        // Wholly after, with a gap: replaces it.
        index.file(
            [Stretch(start: 400, end: 500, offsets: [400], authors: [2])], names: names(["a", nil, "b"]),
            snapshotNameCount: 3, generation: 0, logStart: 120, durableEnd: .max)
        state = index.snapshot()
        #expect(state.stretch.offsets == [400] && state.stretch.start == 400)
        // Only what is durable is filed: a run is cut at the durable end.
        index.file(
            [Stretch(start: 500, end: 600, offsets: [500, 550], authors: [0, 1])], names: names(["a", nil, "b"]),
            snapshotNameCount: 3, generation: 0, logStart: 120, durableEnd: 550)
        state = index.snapshot()
        #expect(state.stretch.offsets == [400, 500] && state.stretch.end == 550)
        index.file(
            [Stretch(start: 550, end: 600, offsets: [550], authors: [1])], names: names(["a", nil, "b"]),
            snapshotNameCount: 3, generation: 0, logStart: 120, durableEnd: 550)
        #expect(index.snapshot().stretch.end == 550)
        index.file(
            [Stretch(start: 550, end: 600, offsets: [550], authors: [1])], names: names(["a", nil, "b"]),
            snapshotNameCount: 3, generation: 0, logStart: 120, durableEnd: 600)
        #expect(index.snapshot().stretch.offsets == [400, 500, 550] && index.snapshot().stretch.end == 600)
        // Overlapping at both ends (a fetch that read through the stretch in order): the union.
        index.file(
            [Stretch(start: 380, end: 620, offsets: [390, 400, 500, 550, 610], authors: [0, 2, 0, 1, 1])],
            names: names(["a", nil, "b"]), snapshotNameCount: 3, generation: 0, logStart: 120, durableEnd: .max)
        state = index.snapshot()
        #expect(state.stretch.offsets == [390, 400, 500, 550, 610] && state.stretch.authors == [0, 2, 0, 1, 1])
        #expect(state.stretch.start == 380 && state.stretch.end == 620)
        // A run from another generation is not filed.
        index.file(
            [Stretch(start: 620, end: 700, offsets: [650], authors: [0])], names: names(["a", nil, "b"]),
            snapshotNameCount: 3, generation: 1, logStart: 120, durableEnd: .max)
        #expect(index.snapshot().stretch.end == 620)
        // Past the bound: only the newest three quarters are kept.
        let count = HistoryAuthorIndex.entryCountMax + 10
        let offsets = (0..<count).map { 1_000 + UInt64($0) * 10 }
        index.file(
            [Stretch(start: 620, end: offsets.last! + 10, offsets: offsets, authors: Array(repeating: 0, count: count))],
            names: names(["a", nil, "b"]), snapshotNameCount: 3, generation: 0, logStart: 120, durableEnd: .max)
        state = index.snapshot()
        #expect(state.stretch.offsets.count == HistoryAuthorIndex.entryCountMax * 3 / 4)
        #expect(state.stretch.offsets.last == offsets.last && state.stretch.start == state.stretch.offsets.first)
        // Too many distinct authors: the index starts over, in a new generation.
        let many = names((0...HistoryAuthorIndex.nameCountMax).map { "author \($0)" })
        index.file(
            [Stretch(start: offsets.last! + 10, end: offsets.last! + 20, offsets: [offsets.last! + 10], authors: [7])],
            names: many, snapshotNameCount: 3, generation: 0, logStart: 120, durableEnd: .max)
        state = index.snapshot()
        #expect(state.stretch.isEmpty && state.names.count == 0 && state.generation == 1)
    }
}
