import Foundation
import Testing
@testable import LogStoreEngine

@Test func smokeRoundTripOnDisk() throws {
    let directory = NSTemporaryDirectory() + "logstore-smoke-\(UUID())"
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let log = try Log.open(directory: directory)
    var positions: [LogPosition] = []
    for index in 0..<100 {
        positions.append(try log.append(Array(repeating: UInt8(index), count: index * 10)))
    }
    try log.close()
    let reopened = try Log.open(directory: directory)
    var iterator = try reopened.records(from: 0)
    var count = 0
    while let record = try iterator.next() {
        #expect(record.offset == positions[count].offset)
        #expect(record.payload == Array(repeating: UInt8(count), count: count * 10))
        count += 1
    }
    #expect(count == 100)
    print(reopened.statistics, reopened.recoveryReport)
}
