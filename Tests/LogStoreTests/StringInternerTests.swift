import Foundation
import LogStoreEngine
import LogStoreTestSupport
import SampleTrips
import Testing

@testable import LogStore

/// `StringInterner`: a string decoded from bytes equal to a cached one's is that string (its
/// storage shared); anything else is decoded — bytes that only share a bucket are never taken for
/// one another, and bytes that are not UTF-8 are refused even where a valid string is cached.
@Suite struct StringInternerTests {
    static func decode(_ interner: StringInterner, _ text: String) throws -> String {
        try Array(text.utf8).withUnsafeBytes { try interner.string($0) }
    }

    /// Where a native string's UTF-8 bytes are (nil for one held inline).
    static func storage(_ text: String) -> UnsafeRawPointer? {
        guard text.utf8.count > 15 else { return nil }
        return text.utf8.withContiguousStorageIfAvailable { UnsafeRawPointer($0.baseAddress!) } ?? nil
    }

    @Test func equalBytesShareOneStringAndOthersDecodeAsTheyAre() throws {
        let interner = StringInterner()
        for text in ["Ljubljana, Slovenia", "Tromsø, Norway and more", String(repeating: "x", count: 256)] {
            let first = try Self.decode(interner, text)
            let second = try Self.decode(interner, text)
            #expect(first == text && second == text)
            #expect(Self.storage(first) != nil && Self.storage(first) == Self.storage(second), "\(text) not shared")
        }
        // Inline strings and strings over 256 bytes are decoded as they are.
        for text in ["short", "exactly 15 byte", String(repeating: "y", count: 257)] {
            #expect(try Self.decode(interner, text) == text)
        }
        let long = String(repeating: "y", count: 257)
        let (first, second) = (try Self.decode(interner, long), try Self.decode(interner, long))
        withExtendedLifetime((first, second)) { #expect(Self.storage(first) != Self.storage(second)) }
    }

    /// Strings of one length with the same first and last eight bytes fall in one bucket: each
    /// still decodes to itself, in any order, again and again.
    @Test func bytesSharingABucketAreComparedInFull() throws {
        let interner = StringInterner()
        let texts = (0..<200).map { "prefix--\(String(format: "%06d", $0))--suffix" }
        var random = SeededGenerator(seed: 7)
        for _ in 0..<5_000 {
            let text = texts.randomElement(using: &random)!
            #expect(try Self.decode(interner, text) == text)
        }
        // Same bytes but for one in the middle.
        let a = "0123456789abcdef-A-0123456789abcdef"
        let b = "0123456789abcdef-B-0123456789abcdef"
        #expect(try Self.decode(interner, a) == a)
        #expect(try Self.decode(interner, b) == b)
        #expect(try Self.decode(interner, a) == a)
    }

    @Test func bytesThatAreNotUTF8AreRefusedWhateverIsCached() throws {
        let interner = StringInterner()
        let valid = "0123456789abcdef-é-0123456789abcdef"
        #expect(try Self.decode(interner, valid) == valid)
        var bytes = Array(valid.utf8)
        bytes[bytes.firstIndex(of: 0xC3)!] = 0xFF
        #expect(throws: ByteReaderError.self) { try bytes.withUnsafeBytes { try interner.string($0) } }
        #expect(try Self.decode(interner, valid) == valid)
    }

    /// A store's rows share a repeated string's storage after an open, from a checkpoint and
    /// from a full replay alike (P8: each row kept a copy of its own).
    @Test(arguments: [true, false])
    func rowsOpenedShareRepeatedStrings(fromCheckpoint: Bool) throws {
        let directory = TemporaryDirectory()
        let configuration = LogStoreConfiguration(directory: directory.path, durability: .none)
        do {
            let container = try ModelContainer(for: sampleTripsModels, configuration: configuration)
            let context = ModelContext(container)
            for number in 0..<20 {
                context.insert(
                    Trip(name: "trip \(number)", destination: number.isMultiple(of: 2) ? "Ljubljana, Slovenia" : "Hobart, Australia"))
                try context.save()
            }
            let store = container.dataStore(as: LogStore.self)!
            if fromCheckpoint { _ = try store.checkpoint() }
            try store.close()
        }
        let container = try ModelContainer(for: sampleTripsModels, configuration: configuration)
        let store = container.dataStore(as: LogStore.self)!
        #expect((store.openedFromCheckpointOffset != nil) == fromCheckpoint)
        let destinations = (store.allSnapshots()["Trip"] ?? []).compactMap { snapshot -> String? in
            guard case .string(let text) = snapshot.values["destination"] else { return nil }
            return text
        }
        #expect(destinations.count == 20)
        for destination in ["Ljubljana, Slovenia", "Hobart, Australia"] {
            let storages = Set(destinations.filter { $0 == destination }.map { Self.storage($0) })
            #expect(storages.count == 1 && storages.first! != nil, "\(destination): \(storages.count) copies")
        }
        try store.close()
    }
}
