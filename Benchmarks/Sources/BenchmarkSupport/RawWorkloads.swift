import Benchmark
import Foundation
import LogStoreEngine

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The machine's limit for an append loop: `pwrite` each payload at the end of what was written,
/// then (when `syncs`) `fdatasync`. With `preallocatedByteCount` the file is first filled with
/// zeros and fdatasynced, so the loop overwrites allocated blocks and `fdatasync` has no file-size
/// change to commit — the engine's situation (D1); the write position wraps at the end.
/// Single-threaded.
public final class RawAppendWorkload: Workload, @unchecked Sendable {
    let descriptor: Int32
    let payloads: Payloads
    let syncs: Bool
    let preallocatedByteCount: Int?
    var position = 0
    var syncCount = 0
    var byteCount = 0

    public init(directory: String, syncs: Bool, preallocatedByteCount: Int?, payloads: Payloads = .standard) throws {
        let path = directory + "/raw.log"
        descriptor = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw POSIXFailure("open \(path)") }
        self.payloads = payloads
        self.syncs = syncs
        self.preallocatedByteCount = preallocatedByteCount
        if let preallocatedByteCount {
            let chunk = [UInt8](repeating: 0, count: 1 << 20)
            var offset = 0
            while offset < preallocatedByteCount {
                let count = min(chunk.count, preallocatedByteCount - offset)
                try chunk.withUnsafeBytes { try writeFully($0.baseAddress!, count: count, at: offset) }
                offset += count
            }
            guard fdatasync(descriptor) == 0 else { throw POSIXFailure("fdatasync") }
        }
        // The new file's directory entry, so that the first measured syncs do not pay for it.
        guard fsync(descriptor) == 0 else { throw POSIXFailure("fsync") }
        let directoryDescriptor = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryDescriptor >= 0 {
            _ = fsync(directoryDescriptor)
            closeDescriptor(directoryDescriptor)
        }
    }

    public func perform(thread: Int, index: Int) throws {
        let payload = payloads[index]
        if let preallocatedByteCount, position + payload.count > preallocatedByteCount { position = 0 }
        try payload.withUnsafeBytes { try writeFully($0.baseAddress!, count: $0.count, at: position) }
        position += payload.count
        byteCount += payload.count
        if syncs {
            guard fdatasync(descriptor) == 0 else { throw POSIXFailure("fdatasync") }
            syncCount += 1
        }
    }

    private func writeFully(_ bytes: UnsafeRawPointer, count: Int, at offset: Int) throws {
        var done = 0
        while done < count {
            let written = pwrite(descriptor, bytes + done, count - done, off_t(offset + done))
            if written < 0 {
                if errno == EINTR { continue }
                throw POSIXFailure("pwrite")
            }
            done += written
        }
    }

    public var counters: [String: Double] {
        ["fdatasyncs": Double(syncCount), "bytes": Double(byteCount)]
    }

    public var facts: [String: String] {
        ["preallocatedByteCount": preallocatedByteCount.map(String.init) ?? "none", "syncs": "\(syncs)"]
    }

    public func close() throws {
        closeDescriptor(descriptor)
    }
}

/// The engine's LZ4 (`LZ4.compressIfSmaller`) on blocks cut from the standard payloads.
/// Single-threaded.
public final class LZ4CompressWorkload: Workload, @unchecked Sendable {
    let blocks: [[UInt8]]
    var inputBytes = 0
    var storedBytes = 0
    var compressedCount = 0

    public init(blockByteCount: Int, blockCount: Int = 64, payloads: Payloads = .standard) {
        blocks = payloads.blocks(count: blockCount, byteCount: blockByteCount)
    }

    public func perform(thread: Int, index: Int) throws {
        let block = blocks[index % blocks.count]
        let compressed = block.withUnsafeBytes { LZ4.compressIfSmaller($0) }
        inputBytes += block.count
        storedBytes += compressed?.count ?? block.count
        if compressed != nil { compressedCount += 1 }
        blackHole(compressed)
    }

    public var counters: [String: Double] {
        ["inputBytes": Double(inputBytes), "storedBytes": Double(storedBytes), "compressed": Double(compressedCount)]
    }
}

#if canImport(Glibc)
    private func closeDescriptor(_ descriptor: Int32) { _ = Glibc.close(descriptor) }
#elseif canImport(Darwin)
    private func closeDescriptor(_ descriptor: Int32) { _ = Darwin.close(descriptor) }
    // Darwin has no fdatasync; fsync is the nearest (and not a durable barrier there either).
    private func fdatasync(_ descriptor: Int32) -> Int32 { fsync(descriptor) }
#endif

public struct POSIXFailure: Error, CustomStringConvertible {
    public var description: String
    public init(_ operation: String) {
        description = "\(operation) failed: \(String(cString: strerror(errno))) (errno \(errno))"
    }
}
