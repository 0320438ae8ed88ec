import Foundation
import LogStoreEngine
import Logging

let logger = Logger(label: "LogStore")

extension LogStore {
    /// Runs one retention pass with `retention` (the configuration's when `nil`): drops consumers
    /// past the lag or idle limits, then deletes history beyond the byte and age limits, held
    /// back by the remaining consumers' bookmarks unless `force` is set.
    @discardableResult
    ///
    /// In a store shared by several writing processes one process at a time runs a pass (this
    /// waits at most 30 s for another's).
    public func applyRetention(_ retention: HistoryRetention? = nil, force: Bool = false) throws -> HistoryCompaction {
        guard let compaction = try applyRetention(retention, force: force, waits: true) else {
            preconditionFailure("a waiting maintenance pass runs")
        }
        return compaction
    }

    /// ``applyRetention(_:force:)``; without `waits`, returns `nil` at once when another process
    /// of a store shared by writers is running a pass or writing a checkpoint.
    func applyRetention(_ retention: HistoryRetention?, force: Bool, waits: Bool) throws -> HistoryCompaction? {
        let retention = retention ?? configuration.historyRetention
        compactionLock.lock()
        defer { compactionLock.unlock() }
        return try withMaintenance(waits: waits, for: "apply history retention") { () throws -> HistoryCompaction in
            let dropped = try dropConsumers(retention)
            var target = try retentionTarget(retention)
            var heldBack: String?
            if !force { (target, heldBack) = try clampToConsumers(target) }
            var compaction = try compact(to: target)
            compaction.heldBackByConsumer = heldBack
            compaction.droppedConsumers = dropped
            return compaction
        }
    }

    /// The newest transaction the byte and age limits let go, if any.
    private func retentionTarget(_ retention: HistoryRetention) throws(LogStoreError) -> (
        token: DefaultHistoryToken, end: UInt64
    )? {
        var offsetBound: UInt64?
        if let byteCountMax = retention.historyByteCountMax {
            let end = log.visibleEnd
            // Keep the records starting at or after end - max.
            if end > byteCountMax { offsetBound = end - byteCountMax }
        }
        var dateBound: Date?
        if let ageMax = retention.historyAgeMax {
            dateBound = Date(timeIntervalSince1970: Date().timeIntervalSince1970 - Double(ageMax.microseconds) / 1e6)
        }
        // Either limit exceeded deletes: the later of the two targets.
        let byBytes = try offsetBound.flatMap { bound throws(LogStoreError) in
            try newestTransaction(offsetBound: .init(value: bound, inclusive: false), timestampBound: nil)
        }
        let byAge = try dateBound.flatMap { bound throws(LogStoreError) in
            try newestTransaction(offsetBound: nil, timestampBound: .init(value: bound, inclusive: false))
        }
        switch (byBytes, byAge) {
        case (let bytes?, let age?): return bytes.token.offset >= age.token.offset ? bytes : age
        case (let bytes, let age): return bytes ?? age
        }
    }

    /// Drops the consumers past the lag or idle limit (a bookmark-remove record each, logged).
    private func dropConsumers(_ retention: HistoryRetention) throws(LogStoreError) -> [String] {
        guard retention.consumerLagByteCountMax != nil || retention.consumerIdleMax != nil else { return [] }
        let end = log.visibleEnd
        let now = Int64(Date().timeIntervalSince1970 * 1_000_000)
        let start = log.startOffset
        var dropped: [String] = []
        for bookmark in inner.withLock({ $0.bookmarkList }) {
            let lag = end - min(end, bookmark.token.map { $0.offset } ?? start)
            let idle = now - bookmark.lastActivityMicroseconds
            var reason: String?
            if let max = retention.consumerLagByteCountMax, lag > max {
                reason = "it is \(lag) bytes of log behind (the limit is \(max))"
            } else if let max = retention.consumerIdleMax, idle > max.microseconds {
                reason = "it has not acknowledged for \(idle / 1_000_000) s (the limit is \(max))"
            }
            guard let reason else { continue }
            try writeBookmark(.remove, name: bookmark.name, token: bookmark.token)
            let message =
                "History consumer \"\(bookmark.name)\" dropped: \(reason). Its next fetch from its "
                + "bookmark throws historyTokenExpired once history past it is deleted."
            logger.warning("\(message)")
            dropped.append(bookmark.name)
        }
        return dropped
    }

    /// After a save: starts a retention pass on a background thread when a limit is set and
    /// none is running. Passes are at least a second apart; one that finds nothing to delete is
    /// cheap (it reads the records after L up to the bounds).
    func retainIfDue() {
        let retention = configuration.historyRetention
        guard retention.limitsHistory || retention.consumerLagByteCountMax != nil || retention.consumerIdleMax != nil,
            retentionSchedule.claim(intervalNanoseconds: 1_000_000_000)
        else { return }
        let thread = Thread { [self] in
            defer { retentionSchedule.release() }
            // In a store shared by writers, skipped while another process runs one.
            do { _ = try applyRetention(nil, force: false, waits: false) } catch {
                logger.error("History retention failed: \(error)")
            }
        }
        thread.name = "LogStore retention"
        thread.start()
    }
}
