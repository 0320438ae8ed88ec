import CFutex

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Bytes of a file mapped shared between processes (``FileHandle/mapShared(byteCount:)``), used
/// only as 32-bit words read and changed atomically: waited on with the futex system call
/// (`WAKE`, FORMAT.md §10.2), or read as the coordination file's slots (§10.1). Unmapped when
/// the last reference goes, so a thread still using a word (a waiter woken after its store
/// closed) never touches an unmapped page.
public final class SharedMapping: @unchecked Sendable {
    // @unchecked: `address` never changes, and every access to the bytes is atomic (CFutex).
    private let address: UnsafeMutableRawPointer
    let byteCount: Int

    init(address: UnsafeMutableRawPointer, byteCount: Int) {
        precondition(Int(bitPattern: address) % 4096 == 0, "mmap returns page-aligned addresses")
        self.address = address
        self.byteCount = byteCount
    }

    deinit { _ = munmap(address, byteCount) }

    /// Sets every word to zero. Only when no other process is using the page (the store opened
    /// alone: `LOCK` held exclusively; a process still closing may have a thread between its two
    /// counts, which the saturating decrement absorbs).
    func zero() {
        // Word by word, atomically: a process that was closing may still touch a word.
        for offset in stride(from: 0, to: byteCount, by: 4) { cfutex_store(word(at: offset), 0) }
    }

    /// `count` bytes from byte `offset` (both multiples of 4), read word by word, each word
    /// atomically: bytes another process rewrites meanwhile may mix old and new words, which the
    /// checksum of what they hold tells (the coordination file's slots, FORMAT.md §10.1).
    func loadBytes(at offset: Int, count: Int) -> [UInt8] {
        precondition(offset >= 0 && offset % 4 == 0 && count % 4 == 0 && offset + count <= byteCount)
        var bytes = [UInt8](repeating: 0, count: count)
        bytes.withUnsafeMutableBytes { out in
            for index in stride(from: 0, to: count, by: 4) {
                out.storeBytes(of: cfutex_load(word(at: offset + index)), toByteOffset: index, as: UInt32.self)
            }
        }
        return bytes
    }

    /// The word at byte `offset` (a multiple of 4 inside the mapping).
    func word(at offset: Int) -> UnsafeMutablePointer<UInt32> {
        precondition(offset >= 0 && offset % 4 == 0 && offset + 4 <= byteCount)
        return (address + offset).assumingMemoryBound(to: UInt32.self)
    }
}

/// How a process waiting for `TURN`, `SYNC` or `MAINTENANCE` sleeps until the holder — in any
/// process — lets go, instead of retrying its `flock` on a timer (FORMAT.md §10.2, `WAKE`). Two
/// words of the shared mapping: a release counter, +1 after every release, and a count of
/// sleepers, so that a release nobody waits for costs no system call.
///
/// The handshake cannot lose a wake-up: a waiter reads the counter *before* it tries the `flock`,
/// counts itself among the sleepers (a sequentially consistent add), then sleeps only while the
/// counter still has the value it read (the kernel compares it under its hash-bucket lock, after a
/// full barrier). A release adds to the counter, then reads the sleepers' count (both sequentially
/// consistent): either the kernel's compare sees the new counter and the sleep returns at once, or
/// the release sees the sleeper and its wake-up queues behind the sleeper on that bucket lock. A holder that dies releases
/// its `flock` without a wake-up (the kernel drops it), and a process of a build without `WAKE`
/// never wakes anyone: every sleep is bounded (``WakeChannel/sleepNanosecondsMax``), after which
/// the waiter tries the `flock` again.
struct WakeChannel: Sendable {
    let mapping: SharedMapping
    /// Byte offset of the release counter; the sleepers' count is the next word.
    let offset: Int

    /// The longest sleep between two tries of the `flock` when no wake-up comes.
    static let sleepNanosecondsMax: UInt64 = 2_000_000

    /// How many threads (of any process) sleep on this lock now, or a count a killed sleeper left
    /// high (tests).
    var sleepers: UInt32 { cfutex_load(mapping.word(at: offset + 4)) }

    /// The release counter, read before each try.
    func releases() -> UInt32 { cfutex_load(mapping.word(at: offset)) }

    /// Sleeps until a release after `observed` (or at most `nanoseconds`). Returns `false` when
    /// the futex call failed without sleeping (no futex, or a seccomp filter refusing it): the
    /// caller must pause some other way, or it would spin.
    func sleep(unlessReleasedSince observed: UInt32, nanoseconds: UInt64) -> Bool {
        let sleepers = mapping.word(at: offset + 4)
        _ = cfutex_add(sleepers, 1)
        let failure = cfutex_wait(mapping.word(at: offset), observed, nanoseconds)
        // Never below 0: the page may have been zeroed while this thread was counted (a process
        // that opened the store alone while this one was closing).
        cfutex_decrement_saturating(sleepers)
        return failure == 0
    }

    /// Wakes this process's own sleepers without a release (the lock is closing: they look again
    /// and find it closed).
    func wakeSleepers() {
        cfutex_wake_all(mapping.word(at: offset))
    }

    /// After a release: moves the counter, and wakes the sleepers if there are any.
    func signalRelease() {
        _ = cfutex_add(mapping.word(at: offset), 1)
        if cfutex_load(mapping.word(at: offset + 4)) != 0 {
            cfutex_wake_all(mapping.word(at: offset))
        }
    }
}
