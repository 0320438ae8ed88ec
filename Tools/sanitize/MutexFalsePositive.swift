// The ThreadSanitizer false positive that Tools/sanitize/CTSanMutex removes, with nothing else in
// the program:
//
//   swiftc -parse-as-library -sanitize=thread -g MutexFalsePositive.swift -o mfp && ./mfp
//
// Four tasks increment two counters, each only inside `withLock`: one in a `Mutex` in a
// `static let`, one in a `Mutex` in a class instance. Both totals come out exact (the Mutex does
// exclude), and TSan reports a "Swift access race" inside each closure (Swift 6.3.1, Linux: in 3
// runs out of 3). A contended lock is taken and handed over by `_lockSlow` / `_unlockSlow` in
// libswiftSynchronization.so, through the futex system call; neither is visible to TSan.
// Compiled together with the annotations, the same program reports nothing (3 runs out of 3):
//
//   clang -fsanitize=thread -c CTSanMutex/ctsanmutex.c -I CTSanMutex/include -o ctsanmutex.o
//   swiftc -parse-as-library -sanitize=thread -g MutexFalsePositive.swift ctsanmutex.o -o mfp
import Synchronization

struct Box: ~Copyable { var n = 0 }
enum Static { static let mutex = Mutex(Box()) }
final class Instance: Sendable { let mutex = Mutex(Box()) }

@main struct MutexFalsePositive {
    static func main() async {
        let instance = Instance()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    for _ in 0..<100_000 {
                        Static.mutex.withLock { $0.n += 1 }
                        instance.mutex.withLock { $0.n += 1 }
                    }
                }
            }
            for await _ in group {}
        }
        let counts = (Static.mutex.withLock { $0.n }, instance.mutex.withLock { $0.n })
        print("static \(counts.0), instance \(counts.1) (400000 each expected)")
    }
}
