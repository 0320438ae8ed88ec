import Foundation
import Synchronization

/// A progress bar on standard error for a long command: drawn only when standard error is a
/// terminal and the command has run longer than ``delay``, redrawn a few times a second, erased
/// when it finishes. Nothing at all when standard error is piped or redirected.
///
/// With a total (bytes of log to read) it draws a bar and a percentage; without one (a command
/// that is a single library call, such as `verify`) the elapsed time.
final class ProgressBar: Sendable {
    /// How long a command runs before the bar appears.
    static let delay: Duration = .seconds(1)

    private struct State {
        var done: UInt64 = 0
        var total: UInt64?
        var finished = false
        var drawn = false
    }

    private let label: String
    private let state: Mutex<State>
    private let started = ContinuousClock.now

    private init(label: String, total: UInt64?) {
        self.label = label
        state = Mutex(State(total: total))
    }

    /// Starts the clock; the drawing thread runs only on a terminal.
    static func start(_ label: String, total: UInt64? = nil) -> ProgressBar {
        let progress = ProgressBar(label: label, total: total)
        if isatty(STDERR_FILENO) != 0 {
            let thread = Thread { [progress] in progress.drawUntilFinished() }
            thread.start()
        }
        return progress
    }

    /// How far the work has come, in the units of the total.
    func update(_ done: UInt64, total: UInt64? = nil) {
        state.withLock {
            $0.done = done
            if let total { $0.total = total }
        }
    }

    /// Stops drawing and erases the bar. Idempotent.
    func finish() {
        state.withLock { state in
            guard !state.finished else { return }
            state.finished = true
            if state.drawn { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
        }
    }

    private func drawUntilFinished() {
        while true {
            Thread.sleep(forTimeInterval: 0.2)
            let elapsed = ContinuousClock.now - started
            let keepGoing = state.withLock { state -> Bool in
                guard !state.finished else { return false }
                guard elapsed >= Self.delay else { return true }
                FileHandle.standardError.write(Data(("\r\u{1B}[K" + line(state, elapsed: elapsed)).utf8))
                state.drawn = true
                return true
            }
            if !keepGoing { return }
        }
    }

    private func line(_ state: State, elapsed: Duration) -> String {
        let seconds = Int(elapsed.components.seconds)
        guard let total = state.total, total > 0 else { return "\(label)… \(seconds) s" }
        let fraction = min(1, Double(state.done) / Double(total))
        let width = 30
        let filled = Int(fraction * Double(width))
        return "\(label) [" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
            + "] " + String(format: "%3.0f%%", fraction * 100) + " \(Format.bytes(state.done)) of \(Format.bytes(total)), \(seconds) s"
    }
}
