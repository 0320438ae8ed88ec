import Synchronization
import Foundation
struct Box: ~Copyable { var n = 0 }
enum E { static let m = Mutex(Box()) }
@main struct M {
    static func main() async {
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<4 { group.addTask { for _ in 0..<10000 { E.m.withLock { $0.n += 1 } } } }
            for await _ in group {}
        }
        print("done", E.m.withLock { $0.n })
    }
}
