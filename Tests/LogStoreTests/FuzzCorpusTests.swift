import Foundation
import LogStoreEngine
import Testing

@testable import LogStore

/// Issue 14, item 4: the fuzz corpora (`Tools/fuzz/corpus/<target>/`: the seeds made from the
/// version-1 fixture and a version-2 demo store, and every input a fuzzing run kept, crashers
/// included) are regression inputs, replayed through the same entry point the libFuzzer targets
/// call. A crash, a trap or a hang here is a decoder bug.
@Suite struct FuzzCorpusTests {
    static var corpus: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Tools/fuzz/corpus")
    }

    static func inputs(_ target: _DecoderFuzzing.Target) throws -> [(String, [UInt8])] {
        let folder = corpus.appendingPathComponent(target.rawValue)
        return try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted().map {
            ($0, Array(try Data(contentsOf: folder.appendingPathComponent($0))))
        }
    }

    @Test(arguments: _DecoderFuzzing.Target.allCases)
    func everyCorpusInputDecodesOrFailsCleanly(target: _DecoderFuzzing.Target) throws {
        let inputs = try Self.inputs(target)
        #expect(inputs.count >= 1, "the \(target.rawValue) corpus is empty")
        for (_, bytes) in inputs { _DecoderFuzzing.run(target, bytes) }
    }

    /// The seeds are real encodings, so the fuzzer starts from inputs that reach deep into each
    /// decoder: the schema, bookmark and token seeds decode.
    @Test func theSeedsAreRealEncodings() throws {
        for (name, bytes) in try Self.inputs(.schema) where name.contains("seed") {
            #expect(throws: Never.self, "\(name)") { _ = try SchemaTable.decode(bytes) }
        }
        for (name, bytes) in try Self.inputs(.bookmark) where name.contains("seed") {
            #expect(throws: Never.self, "\(name)") { _ = try BookmarkRecord.decode(bytes, storeID: _DecoderFuzzing.storeID) }
        }
        for (name, bytes) in try Self.inputs(.token) where name.contains("seed") {
            #expect(throws: Never.self, "\(name)") { _ = try JSONDecoder().decode(DefaultHistoryToken.self, from: Data(bytes)) }
        }
    }
}
