import Foundation
import LogStoreEngine
import Synchronization
import Testing

@testable import LogStore

/// The save writer of a store shared by writing processes: saves are written in the order they
/// were called, whether on the writer's thread or — a synchronous save finding it idle — on the
/// caller's own.
@Suite struct SaveWriterTests {
    /// Records the order in which jobs and turns happen.
    final class Trace: Sendable {
        let events = Mutex<[String]>([])
        func add(_ event: String) { events.withLock { $0.append(event) } }
        var all: [String] { events.withLock { $0 } }
    }

    @Test func aJobRunOnItsCallersThreadKeepsLaterJobsBehindIt() throws {
        let trace = Trace()
        let writer = SaveWriter(beginTurn: { trace.add("begin"); return nil }, endTurn: { trace.add("end") })
        defer { writer.stop() }
        let inside = DispatchSemaphore(value: 0)
        let finish = DispatchSemaphore(value: 0)
        let ranHere = Atomic<Bool>(false)
        let first = Thread {
            let caller = pthread_self()
            let result = writer.runHereIfIdle { turn in
                guard case .held = turn else { return trace.add("first: no turn") }
                trace.add(pthread_equal(pthread_self(), caller) != 0 ? "first, on its caller's thread" : "first, elsewhere")
                inside.signal()
                // Bounded: the test signals within its own 10 s.
                _ = finish.wait(timeout: .now() + 10)
            }
            ranHere.store(result, ordering: .sequentiallyConsistent)
        }
        first.start()
        #expect(inside.wait(timeout: .now() + 10) == .success)
        // Called while the first is being written: it is not run here, and it is queued behind.
        let second = writer.runHereIfIdle { _ in trace.add("second, here") }
        #expect(!second)
        let secondDone = DispatchSemaphore(value: 0)
        writer.submit { turn in
            guard case .held = turn else { return trace.add("second: no turn") }
            trace.add("second")
            secondDone.signal()
        }
        // The writer thread must leave the queued job alone while the first is written.
        usleep(100_000)
        #expect(trace.all == ["begin", "first, on its caller's thread"])
        #expect(writer.backlog.queued == 1 && writer.backlog.running == 1)
        finish.signal()
        #expect(secondDone.wait(timeout: .now() + 10) == .success)
        // (The writer thread's "end" may or may not be there yet.)
        #expect(trace.all.prefix(5) == ["begin", "first, on its caller's thread", "end", "begin", "second"])
        while !ranHere.load(ordering: .sequentiallyConsistent) { usleep(1_000) }  // bounded: the first returned
        #expect(writer.ranHereCount == 1)
        // Idle again once the writer thread has ended its batch (bounded: 10 s): the next
        // synchronous job runs here.
        let deadline = Date().addingTimeInterval(10)
        while writer.backlog != (0, 0) && Date() < deadline { usleep(1_000) }
        #expect(writer.runHereIfIdle { _ in trace.add("third") })
        #expect(trace.all.suffix(3) == ["begin", "third", "end"])
    }

    @Test func aStoppedWriterRunsNothingHere() {
        let writer = SaveWriter(beginTurn: { nil }, endTurn: {})
        writer.stop()
        #expect(!writer.runHereIfIdle { _ in Issue.record("ran after stop") })
    }
}
