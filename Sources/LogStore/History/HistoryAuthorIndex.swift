import Foundation
import Synchronization

/// Which author wrote each transaction record of a stretch of the log, kept in memory by an open
/// store so that a history fetch with an author filter reads only the records it takes
/// (DECISIONS.md D6). Built by the fetches themselves: a filtered fetch that reads records files
/// each transaction's author here; a later filtered fetch over that stretch skips straight to
/// the records whose author passes its tests, and reads (and checks) only those.
///
/// It is a cache, never a source of truth: every offset in it was a transaction record this
/// process read and checked, and a record reached through it is read and checked again — its
/// header must name the offset, and its author must be the one filed (else the fetch throws
/// `corruptRecord`: the file changed under the open store). Nothing of it is on disk.
///
/// Memory: 12 bytes per transaction of the stretch, at most ``entryCountMax`` entries (the
/// oldest are dropped past it), and each distinct author's bytes once.
final class HistoryAuthorIndex: Sendable {
    /// Most entries kept (12 MiB): past it the oldest quarter is dropped.
    static let entryCountMax = 1 << 20

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
        /// Positions by bytes, for many authors (a short list is searched directly).
        private var positions: [[UInt8]?: UInt32] = [:]

        var count: Int { bytes.count }

        subscript(position: UInt32) -> [UInt8]? { bytes[Int(position)] }

        /// The position of `author`, filed if new.
        mutating func position(of author: UnsafeRawBufferPointer?) -> UInt32 {
            if bytes.count <= 8 {
                for (position, known) in bytes.enumerated() where Self.equal(known, author) { return UInt32(position) }
            } else if let position = positions[author.map { Array($0) }] {
                return position
            }
            let position = UInt32(bytes.count)
            let copy = author.map { Array($0) }
            bytes.append(copy)
            positions[copy] = position
            return position
        }

        static func equal(_ known: [UInt8]?, _ author: UnsafeRawBufferPointer?) -> Bool {
            switch (known, author) {
            case (nil, nil): return true
            case (let known?, let author?):
                return known.count == author.count
                    && known.withUnsafeBytes { author.isEmpty || memcmp($0.baseAddress!, author.baseAddress!, author.count) == 0 }
            default: return false
            }
        }
    }

    struct State: Sendable {
        var stretch = Stretch()
        var names = Names()
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
    /// is everything at or past `durableEnd`: only a durable record stays at its offset for as long
    /// as the store is open (after a failed sync the log is cut back to its durable end, and the
    /// offsets past it are written again).
    func file(_ runs: [Stretch], names: Names, snapshotNameCount: Int, logStart: UInt64, durableEnd: UInt64) {
        let runs = runs.compactMap { run in Self.cut(run, at: durableEnd) }
        guard !runs.isEmpty else { return }
        state.withLock { state in
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
            Self.drop(before: logStart, from: &state.stretch)
            if state.stretch.offsets.count > Self.entryCountMax {
                Self.drop(before: state.stretch.offsets[state.stretch.offsets.count - Self.entryCountMax * 3 / 4], from: &state.stretch)
            }
            state.stretch.assertValid()
        }
    }

    /// `run` without what starts at or past `end` (a record boundary), `nil` when that is all of it.
    static func cut(_ run: Stretch, at end: UInt64) -> Stretch? {
        guard run.start < end, !run.isEmpty else { return nil }
        guard run.end > end else { return run }
        var cut = run
        let kept = run.firstEntry(atOrAfter: end)
        cut.offsets.removeLast(run.offsets.count - kept)
        cut.authors.removeLast(run.authors.count - kept)
        cut.end = end
        return cut
    }

    private static func join(_ run: Stretch, into kept: inout Stretch) {
        run.assertValid()
        if kept.isEmpty || run.start > kept.end {
            kept = run
        } else if run.start == kept.end {
            kept.offsets.append(contentsOf: run.offsets)
            kept.authors.append(contentsOf: run.authors)
            kept.end = run.end
        } else if run.end == kept.start {
            kept.offsets = run.offsets + kept.offsets
            kept.authors = run.authors + kept.authors
            kept.start = run.start
        }
        // Otherwise the run overlaps what is kept (another fetch filed it meanwhile) or lies
        // before it with a gap: nothing to add.
    }

    private static func drop(before offset: UInt64, from stretch: inout Stretch) {
        guard offset > stretch.start else { return }
        guard offset < stretch.end else {
            stretch = Stretch()
            return
        }
        let first = stretch.firstEntry(atOrAfter: offset)
        stretch.offsets.removeFirst(first)
        stretch.authors.removeFirst(first)
        stretch.start = offset
    }
}
