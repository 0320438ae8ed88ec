import Foundation
import LogStoreEngine

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A value behind a plain pthread mutex: a thread that finds it locked sleeps at once.
///
/// The store's save lock is held for a whole resolve + encode + write (tens of microseconds), by
/// up to as many savers as the app has threads, on machines with as few as 2 cores. The standard
/// library's `Mutex` spins before it sleeps (then takes a priority-inheritance futex); measured
/// here with 8 savers on 2 cores, that spinning took 35% of the samples and kept the lock holder
/// off a core. Saves still take the lock in turn, so offsets and state application keep one order.
///
/// `@unchecked Sendable`: `value` is only touched between `pthread_mutex_lock` and
/// `pthread_mutex_unlock`; the mutex is heap-allocated once and never moved.
final class SleepingMutex<Value>: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private var value: Value
    /// Its place in the lock order (checked in debug builds).
    private let level: LockLevel

    init(level: LockLevel, _ value: Value) {
        self.value = value
        self.level = level
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func withLock<Result, E: Error>(_ body: (inout Value) throws(E) -> Result) throws(E) -> Result {
        LockOrder.willAcquire(level)
        pthread_mutex_lock(mutex)
        defer {
            pthread_mutex_unlock(mutex)
            LockOrder.didRelease(level)
        }
        return try body(&value)
    }
}

/// An `NSLock` with a place in the lock order (checked in debug builds).
final class OrderedLock: @unchecked Sendable {
    // @unchecked: NSLock is thread-safe; `level` is immutable.
    private let base = NSLock()
    private let level: LockLevel

    init(_ level: LockLevel) { self.level = level }

    func lock() {
        LockOrder.willAcquire(level)
        base.lock()
    }

    func unlock() {
        base.unlock()
        LockOrder.didRelease(level)
    }
}
