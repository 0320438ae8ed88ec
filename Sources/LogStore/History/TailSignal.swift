import Foundation
import Synchronization

/// Wakes live tails when saves publish (or history is deleted): a generation counter and the
/// continuations of the tails waiting for it to move.
final class TailSignal: Sendable {
    private struct State {
        var generation: UInt64 = 0
        var isClosed = false
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        var nextWaiterID: UInt64 = 0
    }

    private let state = Mutex(State())

    /// The current generation, or `nil` once closed.
    var generation: UInt64? {
        state.withLock { $0.isClosed ? nil : $0.generation }
    }

    /// Moves the generation on and resumes every waiter.
    func signal() {
        let resumed = state.withLock { state in
            state.generation += 1
            defer { state.waiters.removeAll() }
            return Array(state.waiters.values)
        }
        for waiter in resumed { waiter.resume() }
    }

    /// Wakes every waiter for good: their next pass sees `generation == nil` and ends.
    func close() {
        state.withLock { $0.isClosed = true }
        signal()
    }

    /// Returns once the generation is past `generation`, the signal is closed, or the task is
    /// cancelled.
    func wait(after generation: UInt64) async {
        let id = state.withLock { state in
            defer { state.nextWaiterID += 1 }
            return state.nextWaiterID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let waits = state.withLock { state in
                    guard !state.isClosed, state.generation == generation, !Task.isCancelled else { return false }
                    state.waiters[id] = continuation
                    return true
                }
                if !waits { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }
}
