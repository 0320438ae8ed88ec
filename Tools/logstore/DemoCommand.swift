import ArgumentParser
import Foundation
import LogStoreEngine

/// `logstore demo <dir>`: creates the store if missing and appends a sample workload.
struct DemoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Append a sample workload of JSON events to a store (creating it if missing) and read it back.",
        discussion: """
            Each run appends another round with synchronous durability: every append returns after \
            an fdatasync covers it. Afterwards, try `logstore inspect <dir>` and `logstore verify <dir>`.
            """
    )

    @Argument(help: "The store directory (created when missing).")
    var directory: String

    @Option(help: "Records to append.")
    var count = 1_000

    @Option(help: "Roll to a new segment before one would pass this many bytes (default: 64 MiB). Small values show several segments.")
    var segmentSize: UInt64?

    func validate() throws {
        guard count > 0, count <= 1_000_000 else { throw ValidationError("--count must be between 1 and 1000000.") }
        if let segmentSize, segmentSize < 4096 { throw ValidationError("--segment-size must be at least 4096.") }
    }

    func run() throws {
        var demo = LogDemo(directory: directory, recordCount: count)
        if let segmentSize { demo.segmentByteCountMax = segmentSize }
        try reportingStoreErrors { () throws(LogError) in try demo.run { print($0) } }
    }
}

/// The demo as a plain function of its inputs, printing through `say`.
struct LogDemo {
    var directory: String
    var recordCount: Int
    /// How many records at the end are read back and shown.
    var readBackCount = 3
    var segmentByteCountMax = LogOptions().segmentByteCountMax

    func run(say: (String) -> Void) throws(LogError) {
        var options = LogOptions()
        options.durability = .synchronous
        options.segmentByteCountMax = segmentByteCountMax
        let log = try Log.open(directory: directory, options: options)
        describeOpen(log, say: say)
        let round = try appendRound(to: log, say: say)
        try readBack(log, from: round.positions.suffix(readBackCount).first!.offset, say: say)
        try log.close()
        say("")
        say("Closed. Run the demo again to append another round, and look at the store with")
        say("  logstore inspect \(directory)")
        say("  logstore verify \(directory)")
        say("(`swift run logstore …` from the package directory).")
    }

    private func describeOpen(_ log: Log, say: (String) -> Void) {
        let report = log.recoveryReport
        if report.createdStore {
            say("Created a new store at \(directory) (store \(log.storeID)).")
        } else {
            let segments = log.segmentBaseOffsets.count
            say("Opened the store at \(directory) (store \(log.storeID)): \(segments) segment\(segments == 1 ? "" : "s"), "
                + "log offsets \(log.startOffset) ..< \(log.visibleEnd).")
        }
        for record in report.droppedRecords { say("  recovery dropped \(record)") }
        for file in report.removedTemporaryFiles { say("  recovery removed the temporary file \(file)") }
        for file in report.unknownFiles { say("  note: \(file) is not part of the store; left alone") }
    }

    private struct Round {
        var positions: [LogPosition]
        var rawByteCount: Int
    }

    private func appendRound(to log: Log, say: (String) -> Void) throws(LogError) -> Round {
        say("Appending \(Format.grouped(recordCount)) JSON events with synchronous durability "
            + "(each append returns after an fdatasync covers it)...")
        var workload = DemoWorkload(seed: log.visibleEnd &+ 0x5EED)
        let payloads = (0..<recordCount).map { workload.event(number: $0) }
        var positions: [LogPosition] = []
        positions.reserveCapacity(recordCount)
        let clock = ContinuousClock()
        let started = clock.now
        for payload in payloads { positions.append(try log.append(payload)) }
        let elapsed = Format.seconds(clock.now - started)
        let statistics = log.statistics
        let rawByteCount = payloads.reduce(0) { $0 + $1.count }
        let storedPayloadByteCount = statistics.byteCount - UInt64(FormatConstants.recordHeaderByteCount * recordCount)
        say("Appended \(Format.grouped(recordCount)) records at offsets \(positions.first!.offset) ... "
            + "\(positions.last!.offset) (the log now ends at \(positions.last!.endOffset)).")
        say("  payloads: \(Format.bytes(rawByteCount)) raw, \(Format.bytes(storedPayloadByteCount)) stored "
            + "(\(Format.ratio(Double(storedPayloadByteCount) / Double(max(rawByteCount, 1)))); LZ4 keeps a "
            + "compressed payload only when it is smaller), \(Format.bytes(statistics.byteCount)) written with headers")
        say("  elapsed: " + String(format: "%.3f s", elapsed) + ", "
            + "\(Format.grouped(Int((Double(recordCount) / max(elapsed, 1e-9)).rounded()))) appends/s")
        say("  syncs: \(Format.grouped(statistics.syncCount)) fdatasync calls ("
            + String(format: "%.2f", statistics.appendsPerSync) + " appends per sync), "
            + "\(statistics.rollCount) segment roll\(statistics.rollCount == 1 ? "" : "s")")
        return Round(positions: positions, rawByteCount: rawByteCount)
    }

    private func readBack(_ log: Log, from offset: UInt64, say: (String) -> Void) throws(LogError) {
        say("The last \(readBackCount) records, read back:")
        var records = try log.records(from: offset)
        while let record = try records.next() {
            let text = String(decoding: record.payload.prefix(72), as: UTF8.self)
            say("  offset \(record.offset): \(record.payload.count) bytes"
                + (record.isCompressed ? " (stored in \(record.recordByteCount - 32) with LZ4)" : "")
                + ": \(text)\(record.payload.count > 72 ? "…" : "")")
        }
    }
}

/// A deterministic mix of JSON events: small page views (incompressible at this size), orders
/// with repetitive line items (compress well), and signed uploads carrying random hex (do not).
struct DemoWorkload {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    /// SplitMix64: a fixed-seed generator, so a round's payloads depend only on where it starts.
    private mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var value = state
        value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
        value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
        return value ^ (value >> 31)
    }

    private mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }

    mutating func event(number: Int) -> [UInt8] {
        let user = "user-\(below(500))"
        let text: String
        switch below(10) {
        case 0..<6:
            text = #"{"n":\#(number),"kind":"page.view","user":"\#(user)","path":"/products/\#(below(10_000))","ms":\#(below(900))}"#
        case 6..<9:
            let items = (0..<(2 + below(30))).map { _ in
                #"{"sku":"SKU-\#(below(40))","quantity":\#(1 + below(3)),"price":"\#(below(100)).99","gift":false}"#
            }
            text = #"{"n":\#(number),"kind":"order.created","user":"\#(user)","currency":"EUR","items":[\#(items.joined(separator: ","))]}"#
        default:
            let signature = (0..<(16 + below(48))).map { _ in String(next(), radix: 16) }.joined()
            text = #"{"n":\#(number),"kind":"upload.signed","user":"\#(user)","signature":"\#(signature)"}"#
        }
        return Array(text.utf8)
    }
}
