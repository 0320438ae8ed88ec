/// A hash table of positions into an array its owner keeps (``EntityRows``' keys,
/// ``UniqueIndex``' entries): open addressing with linear probing and backward-shift deletion,
/// each bucket 4 bytes holding a position + 1 (0: empty) in its low bits and a tag of the hash
/// in the bits the positions do not need. The owner hashes and compares what lies at a
/// position, so the table keeps no keys of its own; the tag spares the owner's comparison (a
/// cache miss in a large array) for the positions whose hashes differ in the tag's bits.
///
/// It replaces `[Key: Int]` dictionaries that kept a key and a value per bucket: at 1M entries a
/// dictionary has 2.1M buckets (at most 3/4 full, a power of two), 24 bytes each for a primary
/// key's (50 bytes a row) and 40 for a unique key's (84 bytes a row), where this table takes
/// 5.3 to 10.7 bytes a row, 6 when made for its count (P8, docs/DECISIONS.md D9).
///
/// The table is as long as its owner needs, not a power of two: a table made for a known count
/// (``reserveCapacity(_:hashOf:)``, ``refile(_:hashOf:)``, ``trim(hashOf:)``) has 3/2 buckets a
/// position, 6 bytes; a power of two at most 3/4 full had between 5.3 and 10.7 — 8.4 at P8's
/// million rows, for the rows' table and again for the unique index's.
///
/// Value semantics (an array of buckets): two states sharing an entity's rows share its table
/// until one of them changes.
struct PositionTable: Sendable {
    /// At least ``smallestSize`` long (or empty), at most 3/4 full.
    private var buckets: [UInt32] = []
    /// `buckets.count`, kept beside them: a probe's home is computed from it before the first
    /// bucket is loaded (the array's own count sits in its buffer's header, one more dependent
    /// load on every lookup's path).
    private var size = 0
    /// The bits of a bucket that hold a position + 1 (the low ones; every position filed is
    /// below this mask), the rest holding the tag. Widened as larger positions are filed, the
    /// tag narrowing to the bits left: from 2³¹ (2.1 billion) positions on the tag is gone and every probe
    /// asks the owner, as without tags.
    private var positionMask: UInt32 = 0xFF
    /// The positions filed.
    private(set) var count = 0

    /// The largest position a bucket can hold.
    static let maxPosition = Int(UInt32.max) - 1
    /// The fewest buckets a table that holds anything has.
    static let smallestSize = 8
    /// The most buckets a table has: a home is a 32-bit spread scaled to the size
    /// (``home(_:size:)``), so 2³² buckets hold up to 3.2 billion positions.
    static let largestSize = 1 << 32

    init() {}

    /// How many buckets the table has (tests of its sizes).
    var bucketCount: Int { buckets.count }

    /// A hash's home bucket: the top 32 bits of its Fibonacci product — spread even when the
    /// hash's low bits are alike (a test's deliberately poor digest) — scaled to the table's
    /// size by a multiplication (any size, no division).
    /// (Each operation reads the size once and hands it to these: the loops that write buckets
    /// would otherwise reload it at every step.)
    @inline(__always)
    private static func home(_ hash: Int, size: Int) -> Int {
        let spread = (UInt64(bitPattern: Int64(hash)) &* 0x9E37_79B9_7F4A_7C15) >> 32
        return Int(truncatingIfNeeded: (spread &* UInt64(truncatingIfNeeded: size)) >> 32)
    }

    /// The bucket after `bucket` (the first after the last).
    @inline(__always)
    private static func after(_ bucket: Int, size: Int) -> Int {
        let next = bucket &+ 1
        return next == size ? 0 : next
    }

    /// How many buckets a probe from `from` passes to reach `to` (wrapping at the end).
    @inline(__always)
    private static func distance(from: Int, to: Int, size: Int) -> Int {
        to >= from ? to &- from : to &+ size &- from
    }

    /// The buckets a table made for `capacity` positions has: 3/2 a position (at least
    /// ``smallestSize``), room for an eighth more before it doubles (3/4 full). A store that
    /// grows by more than an eighth after its open pays one rehash of its keys there (a
    /// power-of-two table paid it where the count crossed 3/4 of a power of two).
    static func size(toHold capacity: Int) -> Int {
        precondition(capacity >= 0, "a table of \(capacity) positions")
        return min(max(smallestSize, capacity + (capacity + 1) / 2), largestSize)
    }

    /// A hash's tag: the top 32 bits of a second product (independent of the home's bits, and
    /// spread for a hash whose low bits are alike), of which a bucket keeps those above
    /// ``positionMask``.
    @inline(__always)
    private static func tag(_ hash: Int) -> UInt32 {
        UInt32(truncatingIfNeeded: (UInt64(bitPattern: Int64(hash)) &* 0xC2B2_AE3D_27D4_EB4F) >> 32)
    }

    /// What a bucket holds for `position` filed under `hash`.
    @inline(__always)
    private func stored(_ position: Int, hash: Int) -> UInt32 {
        (Self.tag(hash) & ~positionMask) | UInt32(position + 1)
    }

    /// The position a non-empty bucket holds.
    @inline(__always)
    private func position(in stored: UInt32) -> Int {
        Int((stored & positionMask) &- 1)
    }

    /// The position whose entry `matches`, among those filed under `hash` (asked only of the
    /// positions whose tags are the hash's).
    @inline(__always)
    func find(hash: Int, where matches: (Int) -> Bool) -> Int? {
        guard count > 0 else { return nil }
        let size = self.size
        let tagMask = ~positionMask
        let tag = Self.tag(hash) & tagMask
        var bucket = Self.home(hash, size: size)
        // Bounded: the table is never full, so an empty bucket ends every probe.
        while true {
            let stored = buckets[bucket]
            if stored == 0 { return nil }
            if stored & tagMask == tag, matches(position(in: stored)) { return position(in: stored) }
            bucket = Self.after(bucket, size: size)
        }
    }

    /// Files `position` under `hash`, in place of the position whose entry `matches` if there
    /// is one (returned). `hashOf` gives the hash of a filed position (to move them when the
    /// table grows).
    @discardableResult
    mutating func file(
        _ position: Int, hash: Int, replacing matches: (Int) -> Bool, hashOf: (Int) -> Int
    ) -> Int? {
        precondition(position >= 0 && position <= Self.maxPosition, "position \(position) out of a table's range")
        if buckets.isEmpty { resize(to: Self.smallestSize, hashOf: hashOf) }
        widen(toHold: position)
        let size = self.size
        let tagMask = ~positionMask
        let new = stored(position, hash: hash)
        var bucket = Self.home(hash, size: size)
        while true {
            let stored = buckets[bucket]
            if stored == 0 {
                // A new position: the table doubles first when it would be more than 3/4 full
                // (a replacement never grows it), and the position goes to its first empty bucket.
                if (count + 1) * 4 > buckets.count * 3 {
                    precondition(buckets.count < Self.largestSize, "a table of \(count + 1) positions")
                    resize(to: min(2 * size, Self.largestSize), hashOf: hashOf)
                    bucket = emptyBucket(for: hash)  // in the new table (`size` is not read again)
                }
                buckets[bucket] = new
                count += 1
                return nil
            }
            if stored & tagMask == new & tagMask, matches(self.position(in: stored)) {
                buckets[bucket] = new
                return self.position(in: stored)
            }
            bucket = Self.after(bucket, size: size)
        }
    }

    /// Removes the position whose entry `matches` among those filed under `hash`, returning it.
    /// The positions probed past it move back (`hashOf` gives their hashes), so no probe ever
    /// stops early at the hole.
    @discardableResult
    mutating func remove(hash: Int, where matches: (Int) -> Bool, hashOf: (Int) -> Int) -> Int? {
        guard count > 0 else { return nil }
        let size = self.size
        let tagMask = ~positionMask
        let tag = Self.tag(hash) & tagMask
        var bucket = Self.home(hash, size: size)
        var removed: Int?
        while true {
            let stored = buckets[bucket]
            if stored == 0 { return nil }
            if stored & tagMask == tag, matches(position(in: stored)) {
                removed = position(in: stored)
                break
            }
            bucket = Self.after(bucket, size: size)
        }
        count -= 1
        // Backward shift: a position further along the run moves into the hole when its home
        // is not between the hole and where it lies (its probe passes the hole first).
        var hole = bucket
        var next = Self.after(bucket, size: size)
        while buckets[next] != 0 {
            let nextHome = Self.home(hashOf(position(in: buckets[next])), size: size)
            if Self.distance(from: nextHome, to: next, size: size) >= Self.distance(from: hole, to: next, size: size) {
                buckets[hole] = buckets[next]
                hole = next
            }
            next = Self.after(next, size: size)
        }
        buckets[hole] = 0
        return removed
    }

    /// Files `new` where `old` is filed under `hash` (an entry moved in its owner's array).
    mutating func move(_ old: Int, to new: Int, hash: Int) {
        precondition(new >= 0 && new <= Self.maxPosition, "position \(new) out of a table's range")
        precondition(count > 0, "position \(old) is not filed: the table is empty")
        widen(toHold: new)
        let size = self.size
        var bucket = Self.home(hash, size: size)
        // Bounded as `find`; `old` must be filed.
        while true {
            let stored = buckets[bucket]
            precondition(stored != 0, "position \(old) is not filed under its hash")
            if position(in: stored) == old {
                buckets[bucket] = self.stored(new, hash: hash)
                return
            }
            bucket = Self.after(bucket, size: size)
        }
    }

    /// Room for `capacity` positions without growing (a table already that large stays as it is;
    /// a hint: a capacity past what the largest table holds reserves the largest).
    mutating func reserveCapacity(_ capacity: Int, hashOf: (Int) -> Int) {
        let capacity = min(capacity, Self.largestSize / 4 * 3)
        if capacity * 4 > buckets.count * 3 { resize(to: Self.size(toHold: capacity), hashOf: hashOf) }
    }

    /// Makes the table the size one made for its count has (``size(toHold:)``) when it is more
    /// than a quarter larger — a table grown by doubling while an unknown number of positions
    /// was filed (a checkpoint's rows): 6 bytes a position instead of up to 10.7.
    mutating func trim(hashOf: (Int) -> Int) {
        let trimmed = Self.size(toHold: count)
        if buckets.count > trimmed + trimmed / 4 { resize(to: trimmed, hashOf: hashOf) }
    }

    /// Empties the table and files `positions` (distinct; after the owner renumbered its array).
    mutating func refile(_ positions: some Collection<Int>, hashOf: (Int) -> Int) {
        buckets = []
        size = 0
        count = 0
        positionMask = 0xFF
        let size = Self.size(toHold: positions.count)
        precondition(positions.count * 4 <= size * 3, "\(positions.count) positions in one table")
        resize(to: size, hashOf: hashOf)
        // Widened once for the largest (not at each power of two on the way).
        if let largest = positions.max(), largest >= 0, largest <= Self.maxPosition { widen(toHold: largest) }
        for position in positions {
            precondition(position >= 0 && position <= Self.maxPosition, "position \(position) out of a table's range")
            let hash = hashOf(position)
            buckets[emptyBucket(for: hash)] = stored(position, hash: hash)
            count += 1
        }
    }

    /// Moves every position into a table of `size` buckets (it holds them at most 3/4 full).
    private mutating func resize(to size: Int, hashOf: (Int) -> Int) {
        precondition(
            size >= Self.smallestSize && size <= Self.largestSize && count * 4 <= size * 3,
            "\(count) positions in \(size) buckets")
        let old = buckets
        buckets = [UInt32](repeating: 0, count: size)
        self.size = size
        for stored in old where stored != 0 {
            buckets[emptyBucket(for: hashOf(position(in: stored)))] = stored
        }
    }

    /// Makes room for `position` in a bucket's position bits, taking the bits from the tags
    /// (whose other bits stay as they are: a tag is its hash's top bits).
    @inline(__always)
    private mutating func widen(toHold position: Int) {
        if UInt32(position + 1) > positionMask { widenMask(toHold: position) }
    }

    private mutating func widenMask(toHold position: Int) {
        // All ones up to position + 1's highest bit.
        let widened = UInt32.max >> UInt32((position + 1).leadingZeroBitCount - (Int.bitWidth - 32))
        let oldMask = positionMask
        positionMask = widened
        for bucket in buckets.indices where buckets[bucket] != 0 {
            // The tag's bits that became position bits are cleared; the position + 1 stays.
            buckets[bucket] = (buckets[bucket] & ~widened) | (buckets[bucket] & oldMask)
        }
    }

    /// The first empty bucket from `hash`'s home (for a position not filed: it is not looked for).
    @inline(__always)
    private func emptyBucket(for hash: Int) -> Int {
        let size = self.size
        var bucket = Self.home(hash, size: size)
        // Bounded: the table is never full.
        while buckets[bucket] != 0 { bucket = Self.after(bucket, size: size) }
        return bucket
    }
}
