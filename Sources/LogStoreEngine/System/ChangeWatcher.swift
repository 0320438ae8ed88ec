#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import Foundation
import Synchronization

/// Calls a function, on a thread of its own, whenever another process may have published new
/// records: on Linux when the store's `coordination` file is written (inotify, `IN_MODIFY`; the
/// directory is watched for its creation until it exists), elsewhere — or on a file system that
/// is not the real one — every 10 ms. The thread sleeps in `poll` between events: an idle reader
/// costs no CPU. Events that arrive while the function runs, or in the pause after a call that
/// came within the pause (1 ms by default) of the previous one, are folded into one more call. With
/// inotify the watch is armed before the watcher is returned, and the function is called once
/// when the thread starts: nothing published after the watcher was made goes unsignalled.
///
/// Made by ``Log/watchForChanges(_:)``; ``cancel()`` (or releasing it) stops the thread.
public final class ChangeWatcher: Sendable {
    /// How changes are noticed.
    public enum Mechanism: Sendable, Equatable {
        /// inotify on the coordination file (Linux).
        case inotify
        /// A look every ``ChangeWatcher/pollingIntervalNanoseconds``.
        case polling
    }

    /// The interval of the polling fallback.
    public static let pollingIntervalNanoseconds: UInt64 = 10_000_000

    /// With inotify, the pause after each call in which further changes are gathered into the
    /// next call, by default: at most 1,000 calls a second follow however many writes (a change
    /// after an idle spell is still seen at once). ``pauseMilliseconds`` changes it.
    public static let defaultPauseMilliseconds = 1

    /// The pause after each call (inotify only), in milliseconds: a store shared by writers
    /// without a history tail only needs to keep up with the others' segments and maintenance,
    /// and pauses longer; a tail sets it back to ``defaultPauseMilliseconds``.
    public var pauseMilliseconds: Int {
        get { settings.pauseMilliseconds.load(ordering: .relaxed) }
        set { settings.pauseMilliseconds.store(newValue, ordering: .relaxed) }
    }

    public let mechanism: Mechanism
    private let stopped = StopFlag()
    private let settings: WatchSettings
    /// The write end of the pipe that wakes the inotify thread to stop (`-1` when polling).
    private let stopDescriptor: Int32

    init(
        directory: String, fileName: String, usesInotify: Bool, pauseMilliseconds: Int,
        onChange: @escaping @Sendable () -> Void
    ) {
        precondition(pauseMilliseconds >= 0, "a pause is not negative")
        settings = WatchSettings(pauseMilliseconds: pauseMilliseconds)
        #if os(Linux)
            if usesInotify,
                let started = Self.startInotify(
                    directory: directory, fileName: fileName, settings: settings, onChange: onChange)
            {
                mechanism = .inotify
                stopDescriptor = started
                return
            }
        #endif
        mechanism = .polling
        stopDescriptor = -1
        Self.startPolling(stopped, onChange: onChange)
    }

    deinit { cancel() }

    /// Stops the thread; the function is not called after the thread notices (at most one call
    /// already under way finishes).
    public func cancel() {
        guard !stopped.value.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if stopDescriptor >= 0 {
            var byte: UInt8 = 1
            _ = write(stopDescriptor, &byte, 1)
            close(stopDescriptor)
        }
    }

    /// The thread holds only the flag, never the watcher, so releasing the watcher stops it.
    private static func startPolling(_ stopped: StopFlag, onChange: @escaping @Sendable () -> Void) {
        let thread = Thread {
            while !stopped.value.load(ordering: .acquiring) {
                let request = timespec(tv_sec: 0, tv_nsec: Int(ChangeWatcher.pollingIntervalNanoseconds))
                var remaining = request
                // Bounded: each interrupted sleep resumes with what is left.
                while withUnsafePointer(to: remaining, { nanosleep($0, &remaining) }) != 0 && errno == EINTR {}
                if stopped.value.load(ordering: .acquiring) { break }
                onChange()
            }
        }
        thread.name = "LogStore change watcher"
        thread.start()
    }

    #if os(Linux)
        /// Starts the inotify thread; returns the write end of its stop pipe, or `nil` when inotify
        /// is not available (then the caller polls).
        private static func startInotify(
            directory: String, fileName: String, settings: WatchSettings, onChange: @escaping @Sendable () -> Void
        ) -> Int32? {
            let inotify = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
            guard inotify >= 0 else { return nil }
            let filePath = directory.hasSuffix("/") ? directory + fileName : directory + "/" + fileName
            guard inotify_add_watch(inotify, directory, UInt32(IN_CREATE | IN_MOVED_TO)) >= 0 else {
                close(inotify)
                return nil
            }
            var pipeEnds: [Int32] = [0, 0]
            guard pipe(&pipeEnds) == 0 else {
                close(inotify)
                return nil
            }
            // pipe2 needs _GNU_SOURCE; no exec happens between these lines in the engine's own code.
            for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
            let stopRead = pipeEnds[0]
            // Armed here, before the thread runs: a publication after the watcher is made is
            // always signalled (armed on the thread, one landing before it was missed). The
            // thread's first call covers any publication before the watch was armed.
            let initialFileWatch = inotify_add_watch(inotify, filePath, UInt32(IN_MODIFY))
            let thread = Thread {
                defer {
                    close(inotify)
                    close(stopRead)
                }
                var fileWatch = initialFileWatch
                var stop = pollfd(fd: stopRead, events: Int16(POLLIN), revents: 0)
                if poll(&stop, 1, 0) != 0 { return }  // cancelled before the thread ran
                onChange()
                var lastCall: UInt64 = 0
                var buffer = [UInt8](repeating: 0, count: 4096)
                var descriptors = [
                    pollfd(fd: inotify, events: Int16(POLLIN), revents: 0),
                    pollfd(fd: stopRead, events: Int16(POLLIN), revents: 0),
                ]
                // Each pass sleeps until an event or the stop byte; it ends with the stop byte.
                while true {
                    descriptors[0].revents = 0
                    descriptors[1].revents = 0
                    let ready = poll(&descriptors, 2, -1)
                    if ready < 0 && errno == EINTR { continue }
                    if ready < 0 || descriptors[1].revents != 0 { return }
                    // Drain every queued event: one call answers them all.
                    while buffer.withUnsafeMutableBytes({ read(inotify, $0.baseAddress, $0.count) }) > 0 {}
                    if fileWatch < 0 { fileWatch = inotify_add_watch(inotify, filePath, UInt32(IN_MODIFY)) }
                    onChange()
                    // Coalesce: writes during the pause wait for one call after it (their events
                    // stay queued). Busy writers write the file once per turn and per sync
                    // (thousands of times a second, this process's own writes included); a
                    // wake-up each cost a context switch, a `poll`, a `read` and the function. An
                    // idle store's first change is still seen at once; a stop ends the pause, an
                    // interrupted one just ends early.
                    // Only a call that follows the previous one within the pause pauses: a
                    // store's save writes the file twice (the turn, then the durable end after
                    // its fdatasync, often within a millisecond), and a pause after every call
                    // delayed the second event — the one that matters — by up to the pause
                    // (the remote-change p50 went from 0.98 to 1.62 ms).
                    let pause = Int32(clamping: settings.pauseMilliseconds.load(ordering: .relaxed))
                    // After a pause the next call is measured from its end, so a steady stream
                    // of events gets one call per pause (measured from before the pause, every
                    // other call escaped it: found by review).
                    let now = monotonicNanoseconds()
                    if pause > 0, now &- lastCall < UInt64(pause) * 1_000_000 {
                        if poll(&descriptors[1], 1, pause) > 0 { return }
                        lastCall = monotonicNanoseconds()
                    } else {
                        lastCall = now
                    }
                }
            }
            thread.name = "LogStore change watcher"
            thread.start()
            return pipeEnds[1]
        }
    #endif
}

/// What the watcher thread reads of its settings (the thread holds this, never the watcher).
private final class WatchSettings: Sendable {
    let pauseMilliseconds: Atomic<Int>
    init(pauseMilliseconds: Int) { self.pauseMilliseconds = Atomic(pauseMilliseconds) }
}

private final class StopFlag: Sendable {
    let value = Atomic<Bool>(false)
}
