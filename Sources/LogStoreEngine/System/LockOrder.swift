import Foundation

/// The lock order of LogStore, engine and model layer together, checked in debug builds.
///
/// Each mutex that can be held while another is taken has a level; a thread may take a lock only
/// if its level is above every level it already holds. In debug builds every acquisition is
/// checked against the calling thread's held levels and a violation stops the process with both
/// names (a deadlock found by a test instead of by a user); release builds compile the checks
/// away.
///
/// The levels, outermost first:
/// 1. ``LockLevel/historyCompaction`` — `LogStore.compactionLock`: one history deletion or
///    retention pass at a time, held across its checkpoint and segment deletions.
/// 2. ``LockLevel/storeState`` — `LogStore.inner`: the model state; saves resolve, encode and
///    `log.write` under it.
/// 3. ``LockLevel/logState`` — `LogCore.conditionLock`: the log's state; the engine never calls
///    up while holding it.
///
/// Leaf locks (the checkpoint bookkeeping's condition, the retention schedule, the tail signal,
/// decoded-history caches, the directory-lock registry) take nothing while held and are not
/// tracked.
package enum LockLevel: Int, Sendable, CustomStringConvertible {
    case historyCompaction = 1
    case storeState = 2
    case logState = 3

    package var description: String {
        switch self {
        case .historyCompaction: "historyCompaction(1)"
        case .storeState: "storeState(2)"
        case .logState: "logState(3)"
        }
    }
}

package enum LockOrder {
    /// Why taking `level` while holding `held` (innermost last) breaks the order, or `nil`.
    package static func violation(acquiring level: LockLevel, holding held: [LockLevel]) -> String? {
        guard let innermost = held.last, innermost.rawValue >= level.rawValue else { return nil }
        return "lock order violated: taking \(level) while holding \(held.map(\.description).joined(separator: " > "))"
    }

    /// Call just before taking a lock of `level`.
    @inline(__always)
    package static func willAcquire(_ level: LockLevel) {
        #if DEBUG
            var held = heldLevels
            if let violation = violation(acquiring: level, holding: held) { preconditionFailure(violation) }
            held.append(level)
            heldLevels = held
        #endif
    }

    /// Call just after releasing a lock of `level` (locks are released innermost first).
    @inline(__always)
    package static func didRelease(_ level: LockLevel) {
        #if DEBUG
            var held = heldLevels
            precondition(held.last == level, "lock \(level) released out of order (held: \(held))")
            held.removeLast()
            heldLevels = held
        #endif
    }

    #if DEBUG
        private static let key = "LogStore.LockOrder.held"

        /// The calling thread's held levels, innermost last.
        private static var heldLevels: [LockLevel] {
            get { (Thread.current.threadDictionary[key] as? [Int] ?? []).compactMap(LockLevel.init(rawValue:)) }
            set { Thread.current.threadDictionary[key] = newValue.map(\.rawValue) }
        }
    #endif
}
