import Synchronization

/// A flag that can be set exactly once, from any thread.
final class AtomicFlag: Sendable {
    private let value = Atomic<Bool>(false)

    /// Sets the flag; returns `true` only for the call that set it.
    func setOnce() -> Bool {
        value.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
    }

    var isSet: Bool { value.load(ordering: .acquiring) }
}
