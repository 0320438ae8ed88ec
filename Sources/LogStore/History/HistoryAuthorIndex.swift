import Foundation
import Synchronization

/// Which author wrote each transaction record of a stretch of the log, kept in memory by an open
/// store so that a history fetch with an author filter reads only the records it takes
/// (DECISIONS.md D6). Built by the fetches themselves: a filtered fetch that reads records files
/// each transaction's author here; a later filtered fetch over that stretch skips straight to
/// the records whose author passes its tests, and reads (and checks) only those.
///
/// It is a cache, never a source of truth: every offset in it was a durable transaction record
/// this process read and checked, and a record reached through it is read and checked again —
/// the record handed must start at the offset, be a transaction and have the author filed (else
/// `corruptRecord`), and its header must check out (else the log's corruption error): the file
/// changed under the open store. Nothing of it is on disk.
///
/// Memory: 12 bytes per transaction of the stretch, at most ``entryCountMax`` entries (past it
/// only the newest three quarters are kept; a fetch's own run is held to the same bound while it
/// reads), and each distinct author's bytes once, at most ``nameCountMax`` of them (past it the
/// index starts over).
final class HistoryAuthorIndex: Sendable {
    /// Most entries kept (12 MiB).
    static let entryCountMax = 1 << 20
    /// Most distinct authors kept: authors unique per user or device would otherwise grow the
    /// names without bound.
    static let nameCountMax = 4_096

    /// A stretch of the log and the transaction records that start in it.
    struct Stretch: Sendable {
        /// The stretch is `[start, end)`: every transaction record starting in it is an entry.
        /// `start == end`: nothing is known.
        var start: UInt64 = 0
        var end: UInt64 = 0
        /// Transaction record starts, ascending, each in `[start, end)`.
        var offsets: [UInt64] = []
        /// `authors[i]`: the author of `offsets[i]`, as a position in `names`.
        var authors: [UInt32] = []

        var isEmpty: Bool { start == end }

        /// Whether `offset` lies in the stretch.
        func covers(_ offset: UInt64) -> Bool { start <= offset && offset < end }

        /// The position of the first entry at or after `offset`.
        func firstEntry(atOrAfter offset: UInt64) -> Int {
            var low = 0
            var high = offsets.count
            while low < high {
                let middle = (low + high) / 2
                if offsets[middle] < offset { low = middle + 1 } else { high = middle }
            }
            return low
        }

        /// Without the entries before `offset`, which becomes the start (everything, when it is at
        /// or past the end): what a compaction deleted, or the oldest past a bound.
        mutating func drop(before offset: UInt64) {
            guard offset > start else { return }
            guard offset < end else {
                self = Stretch()
                return
            }
            let first = firstEntry(atOrAfter: offset)
            offsets.removeFirst(first)
            authors.removeFirst(first)
            start = offset
        }

        /// Keeps only the newest `count` entries (the start moves up to the first kept).
        mutating func keepNewest(_ count: Int) {
            guard offsets.count > count else { return }
            drop(before: offsets[offsets.count - count])
        }

        /// Without what starts at or past `offset` (a record boundary), which becomes the end;
        /// `nil` when that is all of it.
        func cut(at offset: UInt64) -> Stretch? {
            guard start < offset, !isEmpty else { return nil }
            guard end > offset else { return self }
            var cut = self
            let kept = firstEntry(atOrAfter: offset)
            cut.offsets.removeLast(offsets.count - kept)
            cut.authors.removeLast(authors.count - kept)
            cut.end = offset
            return cut
        }

        /// Checks the invariants (tests and debug builds).
        func assertValid() {
            assert(start <= end && offsets.count == authors.count)
            assert(offsets.first.map { $0 >= start } ?? true)
            assert(offsets.last.map { $0 < end } ?? true)
        }
    }

    /// The authors filed, each once: `nil` is "no author". Only ever appended to, so a position
    /// names the same author for as long as the store is open.
    struct Names: Sendable {
        private(set) var bytes: [[UInt8]?] = []
        /// Positions by a hash of the bytes, for many authors (a short list is searched directly):
        /// looked up without making an array of the bytes.
        private var positions: [Int: [UInt32]] = [:]

        var count: Int { bytes.count }

        subscript(position: UInt32) -> [UInt8]? { bytes[Int(position)] }

        /// The position of `author`, filed if new.
        mutating func position(of author: UnsafeRawBufferPointer?) -> UInt32 {
            let hash = Self.hash(author)
            if bytes.count <= 8 {
                for (position, known) in bytes.enumerated() where Self.equal(known, author) { return UInt32(position) }
            } else if let candidates = positions[hash] {
                for position in candidates where Self.equal(bytes[Int(position)], author) { return position }
            }
            let position = UInt32(bytes.count)
            bytes.append(author.map { Array($0) })
            positions[hash, default: []].append(position)
            return position
        }

        private static func hash(_ author: UnsafeRawBufferPointer?) -> Int {
            var hasher = Hasher()
            if let author {
                hasher.combine(1 as UInt8)
                hasher.combine(bytes: author)
            } else {
                hasher.combine(0 as UInt8)
            }
            return hasher.finalize()
        }

        static func equal(_ known: [UInt8]?, _ author: UnsafeRawBufferPointer?) -> Bool {
            switch (known, author) {
            case (nil, nil): return true
            case (let known?, let author?): return known.hasSameBytes(as: author)
            default: return false
            }
        }
    }

    struct State: Sendable {
        var stretch = Stretch()
        var names = Names()
        /// Moves on when the index starts over (too many names): positions in an older
        /// generation's names mean nothing in this one, so its fetches' runs are not filed.
        var generation = 0
    }

    private let state = Mutex(State())

    /// What fetches start from: the stretch and the names as they are now.
    func snapshot() -> State { state.withLock { $0 } }

    /// Changes what is kept in place (tests of a log that changed under the index).
    func withStateForTesting(_ body: (inout State) -> Void) { state.withLock { body(&$0) } }

    /// Entries (for tests).
    var entryCount: Int { state.withLock { $0.stretch.offsets.count } }

    /// Files what a fetch read. `runs` are stretches it read whole, their author positions in
    /// `names` (the snapshot's names, with the authors the fetch met first appended); each joins
    /// the kept stretch when it ends where the kept one starts or starts where it ends, or
    /// replaces it when it lies wholly after it (a reader following the log's end keeps the
    /// newest stretch). Everything before `logStart` (deleted by a compaction) is dropped, and so
    /// is everything at or past `durableEnd`: a record past it is not durable yet, and a failed
    /// sync cuts such records back (the log is read-only afterwards, but the index then stays
    /// true by construction rather than by that rule).
    func file(
        _ runs: [Stretch], names: Names, snapshotNameCount: Int, generation: Int, logStart: UInt64, durableEnd: UInt64
    ) {
        let runs = runs.compactMap { run in run.cut(at: durableEnd) }
        guard !runs.isEmpty else { return }
        state.withLock { state in
            guard state.generation == generation else { return }
            if names.count > Self.nameCountMax {
                state = State(generation: state.generation + 1)
                return
            }
            // Positions the fetch gave authors new to its snapshot, in the kept names.
            var remap: [UInt32] = []
            if names.count > snapshotNameCount {
                for position in snapshotNameCount..<names.count {
                    let author = names[UInt32(position)]
                    let kept =
                        author.map { bytes in bytes.withUnsafeBytes { state.names.position(of: $0) } }
                        ?? state.names.position(of: nil)
                    remap.append(kept)
                }
            }
            for var run in runs {
                if !remap.isEmpty {
                    for index in run.authors.indices where run.authors[index] >= UInt32(snapshotNameCount) {
                        run.authors[index] = remap[Int(run.authors[index]) - snapshotNameCount]
                    }
                }
                Self.join(run, into: &state.stretch)
            }
            state.stretch.drop(before: logStart)
            if state.stretch.offsets.count > Self.entryCountMax { state.stretch.keepNewest(Self.entryCountMax * 3 / 4) }
            state.stretch.assertValid()
        }
    }

    /// Both are complete over their ranges, so where they touch or overlap their union is: the
    /// run's entries before the kept start go in front, those from the kept end on behind.
    private static func join(_ run: Stretch, into kept: inout Stretch) {
        run.assertValid()
        if kept.isEmpty || run.start > kept.end {
            kept = run
            return
        }
        // Before it with a gap: nothing to add.
        guard run.end >= kept.start else { return }
        if run.end > kept.end {
            let from = run.firstEntry(atOrAfter: kept.end)
            kept.offsets.append(contentsOf: run.offsets[from...])
            kept.authors.append(contentsOf: run.authors[from...])
            kept.end = run.end
        }
        // In front only while the index has room: past it the oldest go first anyway.
        if run.start < kept.start {
            let before = run.firstEntry(atOrAfter: kept.start)
            guard kept.offsets.count + before <= entryCountMax else { return }
            kept.offsets.insert(contentsOf: run.offsets[..<before], at: 0)
            kept.authors.insert(contentsOf: run.authors[..<before], at: 0)
            kept.start = run.start
        }
    }
}
