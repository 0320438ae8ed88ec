import LogStoreTestSupport
import Testing

@testable import LogStore

/// `PositionTable` (open addressing, linear probing, backward-shift deletion) against a
/// dictionary: an owner array of keys, the table filing positions into it, and random files,
/// replacements, removals, moves (an owner's swap-remove) and refilings — with a good hash and
/// with hashes that put many keys in one run, where a wrong backward shift loses a key behind a
/// hole.
@Suite struct PositionTableTests {
    /// The owner: keys at positions (nil: a hole), and the table over them.
    struct Owner {
        var keys: [Int?] = []
        var table = PositionTable()
        let hash: @Sendable (Int) -> Int

        func hashOf(_ position: Int) -> Int { hash(keys[position]!) }

        func find(_ key: Int) -> Int? {
            table.find(hash: hash(key)) { keys[$0] == key }
        }

        mutating func file(_ key: Int) -> Int? {
            keys.append(key)
            let keys = keys
            let hash = hash
            return table.file(
                keys.count - 1, hash: hash(key), replacing: { keys[$0] == key }, hashOf: { hash(keys[$0]!) })
        }

        mutating func remove(_ key: Int) -> Int? {
            let keys = keys
            let hash = hash
            return table.remove(hash: hash(key), where: { keys[$0] == key }, hashOf: { hash(keys[$0]!) })
        }
    }

    static let hashes: [(String, @Sendable (Int) -> Int)] = [
        ("good", { $0.hashValue }),
        ("one run", { _ in 42 }),
        ("eight homes", { $0 % 8 }),
        ("low bits alike", { $0 << 20 }),
    ]

    @Test(arguments: 0..<4, [1 as UInt64, 2])
    func agreesWithADictionaryThroughFilesRemovalsMovesAndRefiles(hashIndex: Int, seed: UInt64) {
        let (name, hash) = Self.hashes[hashIndex]
        var random = SeededGenerator(seed: seed)
        var owner = Owner(hash: hash)
        var reference: [Int: Int] = [:]  // key → position
        let keySpace = hashIndex == 1 ? 300 : 3_000
        for step in 0..<(hashIndex == 1 ? 3_000 : 20_000) {
            let key = Int.random(in: 0..<keySpace, using: &random)
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<47:
                let replaced = owner.file(key)
                #expect(replaced == reference[key], "\(name) step \(step): file of \(key) replaced the wrong position")
                if let replaced { owner.keys[replaced] = nil }
                reference[key] = owner.keys.count - 1
            case 47..<50:
                // A checkpoint's open: the table made the size its count needs (fewer buckets).
                owner.table.trim { hash(owner.keys[$0]!) }
                #expect(
                    owner.table.bucketCount <= PositionTable.size(toHold: owner.table.count) * 5 / 4,
                    "\(name) step \(step): \(owner.table.bucketCount) buckets for \(owner.table.count) after a trim")
            case 50..<85:
                let removed = owner.remove(key)
                #expect(removed == reference[key], "\(name) step \(step): removal of \(key)")
                if let removed { owner.keys[removed] = nil }
                reference[key] = nil
            case 85..<97:
                // An owner's swap-remove: a filed key moves to the first hole.
                guard let position = reference[key], let hole = owner.keys.firstIndex(of: nil) else { continue }
                owner.keys[hole] = key
                owner.keys[position] = nil
                owner.table.move(position, to: hole, hash: hash(key))
                reference[key] = hole
            default:
                // Compaction: the keys move down and the table is filed again.
                let kept = owner.keys.compactMap { $0 }
                owner.keys = kept
                let keys = kept
                owner.table.refile(kept.indices) { hash(keys[$0]) }
                reference = Dictionary(uniqueKeysWithValues: kept.enumerated().map { ($1, $0) })
            }
            #expect(owner.table.count == reference.count, "\(name) step \(step): count")
            if step % 50 == 0 {
                for probe in 0..<keySpace {
                    #expect(owner.find(probe) == reference[probe], "\(name) step \(step): find \(probe)")
                }
            }
        }
        for probe in 0..<keySpace {
            #expect(owner.find(probe) == reference[probe], "\(name) at the end: find \(probe)")
        }
    }

    /// A bucket's tag (the hash's bits the positions do not use) spares the owner's comparison:
    /// looking for absent keys among 10,000 asks the owner about almost no position.
    @Test func aProbeAsksTheOwnerOnlyAboutPositionsWhoseTagIsTheHashs() {
        var owner = Owner(hash: { $0.hashValue })
        for key in 0..<10_000 { _ = owner.file(key) }
        var asked = 0
        for key in 10_000..<20_000 {
            let found = owner.table.find(hash: key.hashValue) { position in
                asked += 1
                return owner.keys[position] == key
            }
            #expect(found == nil)
        }
        // Each absent key's probe passes ~2 filed positions at this load; a tag of 18 bits
        // (positions below 2¹⁴) matches by chance once in 262,144.
        #expect(asked < 20, "the owner was asked \(asked) times for 10,000 absent keys")
        var present = 0
        for key in 0..<10_000 {
            _ = owner.table.find(hash: key.hashValue) { position in
                present += 1
                return owner.keys[position] == key
            }
        }
        #expect(present < 10_020, "the owner was asked \(present) times for 10,000 present keys")
    }

    /// Positions far apart widen the bits a bucket gives them (the tags narrowing, down to none at
    /// the largest position): every position is still found, replaced, moved and removed.
    @Test(arguments: [0, 1])
    func positionsUpToTheLargestKeepBeingFoundAsTheTagsNarrow(hashIndex: Int) {
        let (name, hash) = Self.hashes[hashIndex]
        var table = PositionTable()
        let positions = [0, 3, 255, 256, 70_000, 1 << 24, (1 << 31) + 5, PositionTable.maxPosition]
        // Key i is filed at positions[i]; the owner's array is sparse (a dictionary).
        var keyAt: [Int: Int] = [:]
        for (key, position) in positions.enumerated() {
            keyAt[position] = key
            let snapshot = keyAt
            #expect(
                table.file(position, hash: hash(key), replacing: { snapshot[$0] == key }, hashOf: { hash(snapshot[$0]!) })
                    == nil, "\(name): filing \(position)")
            for (earlier, filed) in positions.prefix(key + 1).enumerated() {
                #expect(table.find(hash: hash(earlier)) { snapshot[$0] == earlier } == filed, "\(name): find \(filed) after \(position)")
            }
        }
        // Key 2 moves from 255 to 1 << 30; key 3 is replaced by a position; key 4 is removed.
        keyAt[255] = nil
        keyAt[1 << 30] = 2
        table.move(255, to: 1 << 30, hash: hash(2))
        keyAt[9] = 3
        let afterMove = keyAt
        #expect(table.file(9, hash: hash(3), replacing: { afterMove[$0] == 3 }, hashOf: { hash(afterMove[$0]!) }) == 256)
        keyAt[256] = nil
        let beforeRemoval = keyAt
        #expect(table.remove(hash: hash(4), where: { beforeRemoval[$0] == 4 }, hashOf: { hash(beforeRemoval[$0]!) }) == 70_000)
        keyAt[70_000] = nil
        let final = keyAt
        var expected = Dictionary(uniqueKeysWithValues: final.map { ($1, $0) })
        expected[4] = nil
        for key in positions.indices {
            #expect(table.find(hash: hash(key)) { final[$0] == key } == expected[key], "\(name): key \(key) at the end")
        }
        #expect(table.count == positions.count - 1)
    }

    /// A move to a position above the bits positions have had widens them (the owner's
    /// swap-removes only move down; nothing forbids a move up).
    @Test func aMoveUpWidensThePositionBits() {
        let keys = Array(0..<100)
        var table = PositionTable()
        for position in keys.indices {
            table.file(position, hash: keys[position].hashValue, replacing: { _ in false }, hashOf: { keys[$0].hashValue })
        }
        table.move(7, to: 1 << 20, hash: keys[7].hashValue)
        #expect(table.find(hash: keys[7].hashValue) { $0 == 1 << 20 } == 1 << 20)
        for position in keys.indices where position != 7 {
            #expect(table.find(hash: keys[position].hashValue) { $0 == position } == position, "position \(position)")
        }
    }

    /// A table made for a known count has 3/2 buckets a position — 1.5M for P8's million rows,
    /// where the power of two at most 3/4 full was 2,097,152 — and a table grown by doubling is
    /// trimmed to that size; the positions are found in either.
    @Test func aTableMadeOrTrimmedForItsCountHasThreeHalvesBucketsAPosition() {
        let keys = Array(0..<1_000_000)
        var reserved = PositionTable()
        reserved.reserveCapacity(keys.count) { keys[$0].hashValue }
        #expect(reserved.bucketCount == 1_500_000)
        var grown = PositionTable()
        for position in keys.indices {
            grown.file(position, hash: keys[position].hashValue, replacing: { _ in false }, hashOf: { keys[$0].hashValue })
        }
        #expect(grown.bucketCount == 2_097_152)
        grown.trim { keys[$0].hashValue }
        #expect(grown.bucketCount == 1_500_000)
        var lost = 0
        for position in keys.indices where grown.find(hash: keys[position].hashValue, where: { $0 == position }) != position {
            lost += 1
        }
        #expect(lost == 0, "\(lost) positions not found after the trim")
        // A trimmed table grows again by doubling when it is 3/4 full.
        let more = Array(0..<1_200_000)
        for position in keys.count..<more.count {
            grown.file(position, hash: more[position].hashValue, replacing: { _ in false }, hashOf: { more[$0].hashValue })
        }
        #expect(grown.bucketCount == 3_000_000)
        #expect(grown.find(hash: more[1_199_999].hashValue) { $0 == 1_199_999 } == 1_199_999)
        // A table barely larger than its count's size is left as it is.
        var small = PositionTable()
        small.reserveCapacity(100) { $0 }
        for position in 0..<100 { small.file(position, hash: position, replacing: { _ in false }, hashOf: { $0 }) }
        let before = small.bucketCount
        small.trim { $0 }
        #expect(small.bucketCount == before && before == 150)
    }

    @Test func anEmptyTableFindsAndRemovesNothingAndReservingGrowsOnce() {
        var table = PositionTable()
        #expect(table.find(hash: 7) { _ in true } == nil)
        #expect(table.remove(hash: 7, where: { _ in true }, hashOf: { $0 }) == nil)
        let keys = Array(0..<1_000)
        table.reserveCapacity(keys.count) { keys[$0] }
        for position in keys.indices {
            #expect(table.file(position, hash: keys[position], replacing: { _ in false }, hashOf: { _ in fatalError("grew") }) == nil)
        }
        #expect(table.count == 1_000)
        for position in keys.indices { #expect(table.find(hash: keys[position]) { $0 == position } == position) }
    }
}
