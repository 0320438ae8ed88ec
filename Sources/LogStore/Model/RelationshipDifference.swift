import Synchronization

/// Which models a to-many relationship lost and gained when it was set, by identity, in time
/// linear in the two lists. The usual edits change one place (an append, a removal, an insertion):
/// the common prefix and suffix are skipped by comparing references, and only the middle that is
/// left is compared through sets of identities.
enum RelationshipDifference {
    /// Counts the elements ``between(_:_:)`` looks at, for a test that shows each set stays linear
    /// in the two lists by this count rather than by a clock (`InverseScalingTests`). `nil` — one
    /// task-local read per set, nothing counted — everywhere else.
    @TaskLocal static var visitCounter: VisitCounter?

    /// A count of element visits: one per reference compared in the common prefix or suffix, and
    /// one per element of the changed middle put into or looked up in an identity set.
    final class VisitCounter: Sendable {
        private let visits = Atomic<Int>(0)

        var count: Int { visits.load(ordering: .relaxed) }

        func add(_ count: Int) { visits.add(count, ordering: .relaxed) }
    }

    static func between<Element: AnyObject>(_ before: [Element], _ after: [Element])
        -> (removed: [Element], added: [Element]) {
        let common = min(before.count, after.count)
        var prefix = 0
        while prefix < common, before[prefix] === after[prefix] { prefix += 1 }
        var suffix = 0
        while suffix < common - prefix, before[before.count - 1 - suffix] === after[after.count - 1 - suffix] {
            suffix += 1
        }
        let lost = before[prefix..<(before.count - suffix)], gained = after[prefix..<(after.count - suffix)]
        if lost.isEmpty || gained.isEmpty {
            visitCounter?.add(prefix + suffix)
            return (Array(lost), Array(gained))
        }
        visitCounter?.add(prefix + suffix + 2 * (lost.count + gained.count))
        let lostIdentities = Set(lost.map(ObjectIdentifier.init)), gainedIdentities = Set(gained.map(ObjectIdentifier.init))
        return (lost.filter { !gainedIdentities.contains(ObjectIdentifier($0)) },
                gained.filter { !lostIdentities.contains(ObjectIdentifier($0)) })
    }
}
