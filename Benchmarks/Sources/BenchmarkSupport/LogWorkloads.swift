import LogStoreEngine

/// `Log.append` of the standard payloads from any number of threads, with the log's defaults
/// except `durability`.
public final class LogAppendWorkload: Workload {
    public let log: Log
    let payloads: Payloads

    public init(directory: String, durability: Durability, payloads: Payloads = .standard) throws {
        var options = LogOptions()
        options.durability = durability
        log = try Log.open(directory: directory + "/store", options: options)
        self.payloads = payloads
    }

    public func perform(thread: Int, index: Int) throws {
        try log.append(payloads[index])
    }

    public var counters: [String: Double] {
        let statistics = log.statistics
        return [
            "records": Double(statistics.appendCount),
            "fdatasyncs": Double(statistics.syncCount),
            "rolls": Double(statistics.rollCount),
            "recordBytes": Double(statistics.byteCount),
        ]
    }

    public var facts: [String: String] {
        let options = log.options
        return [
            "durability": "\(options.durability)",
            "compresses": "\(options.compresses)",
            "segmentByteCountMax": "\(options.segmentByteCountMax)",
            "preallocationAheadByteCount": "\(options.preallocationAheadByteCount)",
        ]
    }

    public func close() throws {
        try log.close()
    }
}
