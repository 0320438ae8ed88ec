import Foundation

/// How much history a store keeps (DECISIONS.md D7). Every limit is off by default: history is
/// kept until deleted. Retention runs off the save path, on a background thread, once a limit is
/// exceeded; ``LogStore/applyRetention(_:force:)`` runs one pass now.
public struct HistoryRetention: Sendable, Hashable {
    /// Keep at most about this many bytes of history (whole segments are deleted, so up to one
    /// segment more stays).
    public var historyByteCountMax: UInt64?
    /// Delete transactions older than this.
    public var historyAgeMax: Duration?
    /// A registered consumer more than this many bytes of log behind is dropped.
    public var consumerLagByteCountMax: UInt64?
    /// A registered consumer that has not acknowledged for this long is dropped.
    public var consumerIdleMax: Duration?

    /// Retention with these limits (each off when `nil`, the default).
    public init(
        historyByteCountMax: UInt64? = nil, historyAgeMax: Duration? = nil,
        consumerLagByteCountMax: UInt64? = nil, consumerIdleMax: Duration? = nil
    ) {
        self.historyByteCountMax = historyByteCountMax
        self.historyAgeMax = historyAgeMax
        self.consumerLagByteCountMax = consumerLagByteCountMax
        self.consumerIdleMax = consumerIdleMax
    }

    var limitsHistory: Bool { historyByteCountMax != nil || historyAgeMax != nil }
}

/// At most one background retention pass at a time, and not more often than an interval.
final class RetentionSchedule: @unchecked Sendable {
    // @unchecked: the fields are only touched with `lock` held.
    private let lock = NSLock()
    private var running = false
    private var lastStartNanoseconds: UInt64 = 0

    func claim(intervalNanoseconds: UInt64) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        let now = DispatchTime.now().uptimeNanoseconds
        guard !running, lastStartNanoseconds == 0 || now - lastStartNanoseconds >= intervalNanoseconds else {
            return false
        }
        running = true
        lastStartNanoseconds = now
        return true
    }

    func release() {
        lock.lock()
        running = false
        lock.unlock()
    }
}

extension Duration {
    /// Whole microseconds (negative durations count as zero).
    var microseconds: Int64 {
        let (seconds, attoseconds) = components
        return max(0, seconds) * 1_000_000 + max(0, attoseconds) / 1_000_000_000_000
    }
}
