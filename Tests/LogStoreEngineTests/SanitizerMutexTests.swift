import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Under ThreadSanitizer (`Tools/sanitize/run.sh thread`), a `Mutex` several threads contend is
/// not reported as a race. Tools/sanitize/CTSanMutex tells TSan about the standard library's
/// `Mutex` slow paths (a futex TSan does not see); without it this test makes that run fail with a
/// "Swift access race" in the closure below, as the same loop does in
/// Tools/sanitize/MutexFalsePositive.swift. TSan reports do not reach the test: `run.sh` counts
/// them and fails the run (with `halt_on_error=1` the first one ends the process).
///
/// Runs only when the TSan runtime is in the process; elsewhere it would check nothing the
/// standard library does not already.
@Suite struct SanitizerMutexTests {
    static var underThreadSanitizer: Bool {
        #if canImport(Glibc)
            return dlsym(UnsafeMutableRawPointer(bitPattern: 0), "__tsan_acquire") != nil
        #else
            return false
        #endif
    }

    @Test(.enabled(if: underThreadSanitizer))
    func aContendedMutexIsNotReportedAsARace() {
        struct Counts: ~Copyable {
            var increments = 0
            var byThread: [Int] = [0, 0, 0, 0]
        }
        let counts = Mutex(Counts())
        let threadCount = 4
        let iterations = 50_000
        let done = DispatchSemaphore(value: 0)
        for thread in 0..<threadCount {
            Thread {
                defer { done.signal() }
                for _ in 0..<iterations {
                    counts.withLock {
                        $0.increments += 1
                        $0.byThread[thread] += 1
                    }
                }
            }.start()
        }
        for _ in 0..<threadCount { done.wait() }
        let (increments, byThread) = counts.withLock { ($0.increments, $0.byThread) }
        #expect(increments == threadCount * iterations)
        #expect(byThread == Array(repeating: iterations, count: threadCount))
    }
}
