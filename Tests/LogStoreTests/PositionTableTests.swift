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
            case 0..<50:
                let replaced = owner.file(key)
                #expect(replaced == reference[key], "\(name) step \(step): file of \(key) replaced the wrong position")
                if let replaced { owner.keys[replaced] = nil }
                reference[key] = owner.keys.count - 1
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
