import Synchronization

/// Stops offering LZ4 every payload while payloads keep coming out no smaller. Random or
/// encrypted payloads never compress, and a failed try is not free — against a segment dictionary
/// (FORMAT.md §6.8) it cost a quarter of the engine's appends per second on random 200-byte
/// payloads (441.7 K against 586 K without dictionaries). After ``failureRunBeforeBackingOff``
/// failed tries in a row only one payload in ``tryInterval`` is tried, until one shrinks; then
/// every payload is tried again; so it is after a roll to a segment with another dictionary.
///
/// The cost: in a stream where compressible payloads are rare among incompressible ones, up to
/// `tryInterval − 1` compressible payloads in a row may be stored raw after a run of failures.
/// What is stored stays valid either way (a raw record is always allowed); only its size changes.
final class CompressionBackoff: Sendable {
    static let failureRunBeforeBackingOff = 8
    static let tryInterval = 16

    /// Failed tries in a row (capped, so it never wraps).
    private let failureRun = Atomic<Int>(0)
    /// Payloads passed over since backing off began (counts on; only its residue matters).
    private let passedOver = Atomic<Int>(0)

    init() {}

    /// Whether the next payload should be offered to LZ4.
    func shouldTry() -> Bool {
        guard isBackingOff else { return true }
        return passedOver.wrappingAdd(1, ordering: .relaxed).newValue % Self.tryInterval == 0
    }

    /// Starts over: every payload is tried again. Called when payloads are compressed against
    /// another dictionary (a roll): a payload that did not shrink alone or against the old one
    /// says nothing about the new one.
    func reset() { failureRun.store(0, ordering: .relaxed) }

    /// Whether payloads are being passed over now.
    var isBackingOff: Bool { failureRun.load(ordering: .relaxed) >= Self.failureRunBeforeBackingOff }

    /// The outcome of a try.
    func record(shrank: Bool) {
        if shrank {
            if failureRun.load(ordering: .relaxed) != 0 { failureRun.store(0, ordering: .relaxed) }
        } else if failureRun.load(ordering: .relaxed) < Self.failureRunBeforeBackingOff {
            failureRun.wrappingAdd(1, ordering: .relaxed)
        }
    }
}

extension Log {
    /// Whether this log is passing payloads over without offering them to LZ4 (tests).
    var compressionBackoffIsBackingOff: Bool { core.compressionBackoff.isBackingOff }
}
