#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A pthread mutex with two condition variables: one the syncer sleeps on, one appenders
/// waiting for durability (or for room under the unsynced bound) sleep on. Two conditions keep a
/// finished sync from waking the syncer, and a new request from waking every waiter.
///
/// `@unchecked Sendable`: the pthread objects are heap-allocated once, never moved, and only
/// used through pthread calls, which are thread-safe.
final class ConditionLock: @unchecked Sendable {
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let syncerCondition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private let waiterCondition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        pthread_mutex_init(mutex, nil)
        for condition in [syncerCondition, waiterCondition] {
            var attributes = pthread_condattr_t()
            pthread_condattr_init(&attributes)
            pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
            pthread_cond_init(condition, &attributes)
            pthread_condattr_destroy(&attributes)
        }
    }

    deinit {
        pthread_cond_destroy(syncerCondition)
        pthread_cond_destroy(waiterCondition)
        pthread_mutex_destroy(mutex)
        syncerCondition.deallocate()
        waiterCondition.deallocate()
        mutex.deallocate()
    }

    /// The log's state lock: level ``LockLevel/logState`` in the lock order.
    func lock() {
        LockOrder.willAcquire(.logState)
        pthread_mutex_lock(mutex)
    }

    /// Takes the lock only if it is free now (never waits): `true` when taken.
    func tryLock() -> Bool {
        guard pthread_mutex_trylock(mutex) == 0 else { return false }
        LockOrder.willAcquire(.logState)
        return true
    }

    func unlock() {
        pthread_mutex_unlock(mutex)
        LockOrder.didRelease(.logState)
    }

    func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        lock()
        defer { unlock() }
        return try body()
    }

    /// Wakes the syncer.
    func signalSyncer() { pthread_cond_signal(syncerCondition) }
    /// Wakes every thread waiting for durability or room.
    func broadcastWaiters() { pthread_cond_broadcast(waiterCondition) }

    /// Waits (lock held) until signalled or until `nanoseconds` on the monotonic clock pass.
    func waitSyncer(timeoutNanoseconds: UInt64?) {
        guard let timeoutNanoseconds else {
            pthread_cond_wait(syncerCondition, mutex)
            return
        }
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let total = UInt64(deadline.tv_nsec) + timeoutNanoseconds
        deadline.tv_sec += Int(total / 1_000_000_000)
        deadline.tv_nsec = Int(total % 1_000_000_000)
        pthread_cond_timedwait(syncerCondition, mutex, &deadline)
    }

    /// Waits (lock held) until a waiter broadcast.
    func waitWaiter() { pthread_cond_wait(waiterCondition, mutex) }
}

/// Nanoseconds on the monotonic clock.
func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}
