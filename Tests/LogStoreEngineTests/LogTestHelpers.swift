import Foundation
import LogStoreTestSupport

@testable import LogStoreEngine

let storePath = "/store"

/// Options for a log on a simulated file system.
func simulatedOptions(
    _ fileSystem: SimulatedFileSystem, durability: Durability = .synchronous,
    segmentByteCountMax: UInt64 = 64 * 1024 * 1024, preallocates: Bool = true,
    compresses: Bool = true
) -> LogOptions {
    var options = LogOptions()
    options.fileSystem = fileSystem
    options.durability = durability
    options.segmentByteCountMax = segmentByteCountMax
    options.compresses = compresses
    // Durable-end marks only at close: a mark's sync at an idle moment would be a sync that the
    // fault tests do not expect. The idle marks have tests of their own (DurableEndTests).
    options.durableEndMarkDelay = nil
    if !preallocates { options.preallocationAheadByteCount = 0 }
    // Small steps keep simulated files small.
    options.preallocationChunkByteCount = min(options.preallocationChunkByteCount, 16 * 1024)
    options.preallocationAheadByteCount = preallocates ? min(options.preallocationAheadByteCount, 64 * 1024) : 0
    return options
}

/// Every record from the start of the log to its visible end (with `includingMarks`, the log's
/// own durable-end marks and segment dictionaries too).
func readAll(_ log: Log, includingMarks: Bool = false) throws -> [LogRecord] {
    var iterator = try log.records(from: log.startOffset, includingMarks: includingMarks)
    var records: [LogRecord] = []
    while let record = try iterator.next() { records.append(record) }
    return records
}

/// A payload whose bytes encode its sequence number, so a record can be matched to its append.
func payload(number: Int, byteCount: Int, compressible: Bool, generator: inout SeededGenerator) -> [UInt8] {
    var bytes = withUnsafeBytes(of: UInt64(number).littleEndian) { Array($0) }
    bytes.reserveCapacity(max(byteCount, 8))
    while bytes.count < byteCount {
        bytes.append(
            compressible ? UInt8(truncatingIfNeeded: bytes.count / 7) : UInt8.random(in: 0...255, using: &generator))
    }
    return bytes
}

func sequenceNumber(of record: LogRecord) -> Int {
    Int(record.payload.prefix(8).withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) })
}

func segmentPath(_ baseOffset: UInt64) -> String {
    storePath + "/" + LogFileNames.segment(baseOffset)
}

/// Runs `body` and returns the LogError it throws, or nil.
func logError(_ body: () throws -> Void) -> LogError? {
    do {
        try body()
        return nil
    } catch let error as LogError {
        return error
    } catch {
        return nil
    }
}
