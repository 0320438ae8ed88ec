import LogStoreEngine
import Testing

@testable import LogStore

/// Stored strings decode ASCII on a fast path; everything else is validated as UTF-8.
@Suite struct ValueCodecStringTests {
    static func read(_ bytes: [UInt8]) throws -> String {
        var writer = ByteWriter()
        writer.writeLengthPrefixed(bytes)
        return try ByteReader.read(writer.bytes) { reader throws(ByteReaderError) in try ValueCodec.readString(&reader)
        }
    }

    @Test func asciiAndOtherUTF8RoundTrip() throws {
        for text in ["", "Trip 1000001", "Lisbon, Portugal", "Tromsø, Norway", "e\u{301}", "日本", "🚋"] {
            #expect(try Self.read(Array(text.utf8)) == text)
        }
    }

    @Test func invalidUTF8IsRefused() {
        for bytes: [UInt8] in [[0xFF], [0x41, 0xC3], [0xE0, 0x80, 0x80], [0x41, 0x80, 0x42]] {
            #expect(throws: ByteReaderError.self) { try Self.read(bytes) }
        }
    }
}
