import Foundation
import LogStoreTestSupport
import Testing

@testable import LogStoreEngine

@Suite struct CorruptionTests {
    /// A closed store of several small segments, as durable bytes.
    static func makeStore() throws -> (files: [String: [UInt8]], records: [LogRecord], bases: [UInt64]) {
        let fileSystem = SimulatedFileSystem()
        let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem, segmentByteCountMax: 1024))
        var generator = SeededGenerator(seed: 21)
        for number in 0..<30 {
            try log.append(
                payload(number: number, byteCount: 120, compressible: number % 2 == 0, generator: &generator))
        }
        let records = try readAll(log)
        let bases = log.segmentBaseOffsets
        try log.close()
        var files: [String: [UInt8]] = [:]
        for name in fileSystem.fileNames(in: storePath) {
            files[storePath + "/" + name] = fileSystem.durableBytes(at: storePath + "/" + name)
        }
        return (files, records, bases)
    }

    @Test(arguments: [true, false])
    func aFlippedBitAnywhereInASealedSegmentIsDetected(withIndex: Bool) throws {
        let (files, records, bases) = try Self.makeStore()
        #expect(bases.count >= 4)
        let sealed = segmentPath(bases[1])
        let size = files[sealed]!.count
        // Sealed segments are trimmed to their last record: every byte is header or record.
        #expect(UInt64(size) == bases[2] - bases[1] + 64)
        for position in 0..<size {
            let fileSystem = SimulatedFileSystem()
            for (path, bytes) in files where withIndex || !path.hasSuffix(".index") {
                try fileSystem.setBytes(bytes, at: path)
            }
            try fileSystem.corruptByte(at: position, in: sealed, mask: UInt8(1 << (position % 8)))
            let error = logError {
                let log = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
                defer { try? log.close() }
                _ = try readAll(log)
            }
            #expect(error?.code == .corruption, "flip at \(position) not detected")
            #expect(error?.file == sealed, "flip at \(position): error names \(error?.file ?? "nothing")")
            if position >= 64, let offset = error?.offset {
                // The error points at the damaged record (the one holding the flipped byte) or the start of the damage.
                let flipped = bases[1] + UInt64(position) - 64
                let record = records.last { $0.offset <= flipped }!
                #expect(offset == record.offset, "flip at \(position): offset \(offset), record at \(record.offset)")
            }
        }
    }

    @Test func aSegmentOfAnotherStoreIsCorruption() throws {
        let (files, _, bases) = try Self.makeStore()
        let fileSystem = SimulatedFileSystem()
        for (path, bytes) in files { try fileSystem.setBytes(bytes, at: path) }
        let foreign = SegmentHeader(storeID: UUID(), baseOffset: bases[2]).encoded()
        var bytes = files[segmentPath(bases[2])]!
        bytes.replaceSubrange(0..<64, with: foreign)
        try fileSystem.setBytes(bytes, at: segmentPath(bases[2]))
        let error = logError { _ = try Log.open(directory: storePath, options: simulatedOptions(fileSystem)) }
        #expect(error?.code == .corruption)
        #expect(error?.file == segmentPath(bases[2]))
        #expect(error?.message.contains("belongs to store") == true)
    }

    @Test func aNewerSegmentOrStoreVersionIsRefusedByName() throws {
        let (files, _, bases) = try Self.makeStore()
        let fileSystem = SimulatedFileSystem()
        for (path, bytes) in files { try fileSystem.setBytes(bytes, at: path) }
        let meta = try StoreMeta.decode(files[storePath + "/store.meta"]!).get()
        let newer = SegmentHeader(
            formatVersion: FormatConstants.formatVersion + 1, storeID: meta.storeID,
            baseOffset: bases[3]
        ).encoded()
        var bytes = files[segmentPath(bases[3])]!
        bytes.replaceSubrange(0..<64, with: newer)
        try fileSystem.setBytes(bytes, at: segmentPath(bases[3]))
        let error = logError { _ = try Log.open(directory: storePath, options: simulatedOptions(fileSystem)) }
        #expect(error?.code == .newerFormatVersion)
        #expect(error?.file == segmentPath(bases[3]))

        var newerMeta = meta
        newerMeta.formatVersion += 1
        try fileSystem.setBytes(newerMeta.encoded(), at: storePath + "/store.meta")
        let metaError = logError { _ = try Log.openReadOnly(directory: storePath, fileSystem: fileSystem) }
        #expect(metaError?.code == .newerFormatVersion)
        #expect(metaError?.message.contains("version \(FormatConstants.formatVersion + 1)") == true)
    }

    @Test func repairCutsAtTheFirstBadRecordAndDeletesWhatFollows() throws {
        let (files, records, bases) = try Self.makeStore()
        let fileSystem = SimulatedFileSystem()
        for (path, bytes) in files { try fileSystem.setBytes(bytes, at: path) }
        try fileSystem.setBytes(
            Array("checkpoint".utf8), at: storePath + "/checkpoint-\(LogFileNames.padded(bases[3])).ckpt")
        let damaged = records.first { $0.offset > bases[1] + 10 }!
        try fileSystem.corruptByte(at: Int(damaged.offset - bases[1]) + 64 + 40, in: segmentPath(bases[1]))
        var options = simulatedOptions(fileSystem)
        options.repairs = true
        let log = try Log.open(directory: storePath, options: options)
        let report = log.recoveryReport
        #expect(report.truncatedAt == damaged.offset)
        #expect(report.deletedSegments == bases[2...].map(LogFileNames.segment))
        #expect(report.deletedCheckpoints.count == 1)
        #expect(try readAll(log) == records.filter { $0.offset < damaged.offset })
        try log.append(Array("after repair".utf8))
        try log.close()
        let reopened = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        #expect(try readAll(reopened).last?.payload == Array("after repair".utf8))
        #expect(!reopened.recoveryReport.droppedAnything)
        try reopened.close()
    }
}

@Suite struct RepairOfHeadersTests {
    @Test func repairRewritesADamagedSegmentHeaderAndKeepsItsRecords() throws {
        let (files, records, bases) = try CorruptionTests.makeStore()
        let fileSystem = SimulatedFileSystem()
        for (path, bytes) in files { try fileSystem.setBytes(bytes, at: path) }
        try fileSystem.corruptByte(at: 20, in: segmentPath(bases[1]), mask: 0x01)
        #expect(
            logError { _ = try Log.open(directory: storePath, options: simulatedOptions(fileSystem)) }?.code
                == .corruption)
        var options = simulatedOptions(fileSystem)
        options.repairs = true
        let log = try Log.open(directory: storePath, options: options)
        #expect(log.recoveryReport.rewrittenSegmentHeaders == [LogFileNames.segment(bases[1])])
        #expect(log.recoveryReport.droppedRecords.isEmpty)
        #expect(try readAll(log) == records)
        try log.close()
        let reopened = try Log.open(directory: storePath, options: simulatedOptions(fileSystem))
        #expect(try readAll(reopened) == records)
        try reopened.close()
    }

    @Test func repairRebuildsADamagedStoreMetaFromTheSegmentHeaders() throws {
        let (files, records, _) = try CorruptionTests.makeStore()
        let fileSystem = SimulatedFileSystem()
        for (path, bytes) in files { try fileSystem.setBytes(bytes, at: path) }
        let original = try StoreMeta.decode(files[storePath + "/store.meta"]!).get()
        try fileSystem.corruptByte(at: 20, in: storePath + "/store.meta")
        let refused = logError { _ = try Log.open(directory: storePath, options: simulatedOptions(fileSystem)) }
        #expect(refused?.code == .corruption)
        #expect(refused?.message.contains("logstore repair") == true)
        var options = simulatedOptions(fileSystem)
        options.repairs = true
        let log = try Log.open(directory: storePath, options: options)
        #expect(log.recoveryReport.rebuiltStoreMeta)
        #expect(log.storeID == original.storeID)
        #expect(try readAll(log) == records)
        try log.close()
    }
}
