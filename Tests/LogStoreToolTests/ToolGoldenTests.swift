import Foundation
import LogStore
import LogStoreEngine
import LogStoreTestSupport
import SampleTrips
import Testing

@testable import LogStoreCommands

/// The fixture every golden test builds: a trip with items and a stay (app), the stay confirmed
/// (widget), a second trip (no author), that trip deleted (app), and a registered consumer.
/// Deterministic apart from identifiers, times and process ids, which the goldens mask.
struct Fixture {
    let store = TemporaryStore()
    var directory: String { store.directory }
    var tokens: [DefaultHistoryToken] = []

    init() throws {
        var configuration = LogStoreConfiguration(directory: store.directory, durability: .synchronous)
        configuration.durableEndMarkDelay = nil  // idle time must not add records
        let container = try ModelContainer(for: sampleTripsModels, configuration: configuration)
        let logStore = container.dataStore(as: LogStore.self)!
        let day = { (n: Double) in Date(timeIntervalSince1970: 1_777_852_800 + n * 86_400) }

        let app = ModelContext(container)
        app.author = "app"
        let lisbon = Trip(name: "Lisbon", destination: "Portugal", startDate: day(0), endDate: day(5))
        lisbon.bucketList = [
            BucketListItem(title: "Tram 28", details: "Ride it up to the castle", isInPlan: true),
            BucketListItem(title: "Pastéis de Belém", details: "Warm, with cinnamon"),
        ]
        lisbon.livingAccommodation = LivingAccommodation(address: "Rua da Saudade 3", placeName: "Casa do Fado")
        app.insert(lisbon)
        try app.save()
        tokens.append(logStore.currentToken!)

        let widget = ModelContext(container)
        widget.author = "widget"
        let stay = try widget.fetch(FetchDescriptor<LivingAccommodation>()).first!
        stay.isConfirmed = true
        try widget.save()
        tokens.append(logStore.currentToken!)

        let anonymous = ModelContext(container)
        let kyoto = Trip(name: "Kyoto", destination: "Japan", startDate: day(14), endDate: day(24))
        anonymous.insert(kyoto)
        try anonymous.save()
        tokens.append(logStore.currentToken!)

        let kyotoAgain = try app.fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.name == "Kyoto" })).first!
        app.delete(kyotoAgain)
        try app.save()
        tokens.append(logStore.currentToken!)

        try logStore.registerHistoryConsumer("shipper", after: tokens[0])
        try logStore.close()
    }

    /// Flips one byte in the payload of the first transaction record: damage below the durable
    /// end the close stated, so corruption (not a torn tail).
    func damageFirstTransaction() throws {
        let segment = directory + "/" + "00000000000000000000.log"
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: segment))
        defer { try? handle.close() }
        // The segment header and the schema record come first; the first transaction starts at
        // tokens[0].offset (base offset 0, so the file position is the offset plus the segment header).
        let position = try Fixture.filePosition(ofOffset: tokens[0].offset, in: directory) + 40
        try handle.seek(toOffset: position)
        let byte = try handle.read(upToCount: 1)!.first!
        try handle.seek(toOffset: position)
        try handle.write(contentsOf: [byte ^ 0x5A])
    }

    /// Where a log offset lies in the first segment file (after its header).
    static func filePosition(ofOffset offset: UInt64, in directory: String) throws -> UInt64 {
        let segment = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasSuffix(".log") }
            .sorted().first!
        let base = UInt64(segment.dropLast(4))!
        return offset - base + UInt64(FormatConstants.segmentHeaderByteCount)
    }
}

/// Every command's `--help`, and each command's output on the fixture, against golden files
/// (masked of ids, times, offsets); `LOGSTORE_UPDATE_GOLDEN=1 swift test --filter ToolGoldenTests`
/// rewrites them.
@Suite struct ToolGoldenTests {
    static let commands = [
        "inspect", "verify", "replay", "history", "dump", "export", "import", "compact", "repair", "demo", "ship",
    ]

    @Test func helpOfEveryCommand() throws {
        let root = try Tool.run(["--help"])
        #expect(root.status == 0)
        #expect(root.stdout.contains("Exit codes: 0 ok; 1 damage found"))
        try Golden.check("help", root.stdout)
        for command in Self.commands {
            let run = try Tool.run([command, "--help"])
            #expect(run.status == 0, "\(command) --help")
            // Wrapped at the help's width: compare with the line breaks as spaces.
            let words = run.stdout.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            #expect(words.contains("Exit codes: 0 ok"), "\(command) --help names the exit codes")
            try Golden.check("help-\(command)", run.stdout)
        }
    }

    @Test func inspectAndVerify() throws {
        let fixture = try Fixture()
        let inspect = try Tool.run(["inspect", fixture.directory])
        #expect(inspect.status == 0 && inspect.stderr.isEmpty)
        #expect(inspect.stdout.contains("Consumers      shipper: processed through token@\(fixture.tokens[0].offset)"))
        #expect(inspect.stdout.contains("Writer         none"))
        try Golden.check("inspect", inspect.stdout, directories: [fixture.directory])
        let inspectJSON = try Tool.run(["inspect", fixture.directory, "--json"])
        #expect(inspectJSON.status == 0)
        try Golden.check("inspect-json", inspectJSON.stdout, directories: [fixture.directory])

        let verify = try Tool.run(["verify", fixture.directory])
        #expect(verify.status == 0)
        #expect(verify.stdout.hasSuffix("clean.\n"))
        try Golden.check("verify", verify.stdout, directories: [fixture.directory])
        let verifyJSON = try Tool.run(["verify", fixture.directory, "--json"])
        #expect(verifyJSON.status == 0)
        try Golden.check("verify-json", verifyJSON.stdout, directories: [fixture.directory])
    }

    @Test func replay() throws {
        let fixture = try Fixture()
        // Piped: JSON.
        let piped = try Tool.run(["replay", fixture.directory])
        #expect(piped.status == 0)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(piped.stdout.utf8)) as? [String: Any])
        #expect((object["entities"] as? [String: Any])?["Trip"].map { ($0 as? [Any])?.count } == 1)
        #expect(object["cutShort"] is NSNull)
        try Golden.check("replay-json", piped.stdout, directories: [fixture.directory])
        // On a terminal: tables.
        try Golden.check(
            "replay", ReplayCommand.text(try LogStore.replay(directory: fixture.directory)),
            directories: [fixture.directory])
        // --entity, --until.
        let trips = try Tool.run(["replay", fixture.directory, "--entity", "Trip"])
        #expect(trips.status == 0)
        let tripsObject = try JSONSerialization.jsonObject(with: Data(trips.stdout.utf8)) as? [String: Any]
        #expect((tripsObject?["entities"] as? [String: Any]).map { Array($0.keys) } == ["Trip"])
        let until = try Tool.run(["replay", fixture.directory, "--until", fixture.tokens[2].json, "--entity", "Trip"])
        #expect(until.status == 0)
        let untilObject = try JSONSerialization.jsonObject(with: Data(until.stdout.utf8)) as? [String: Any]
        #expect(((untilObject?["entities"] as? [String: Any])?["Trip"] as? [Any])?.count == 2)  // Kyoto not yet deleted
        try Golden.check("replay-until-entity", until.stdout, directories: [fixture.directory])
        let unknown = try Tool.run(["replay", fixture.directory, "--entity", "Hotel"])
        #expect(unknown.status == 64)
        #expect(unknown.stderr.contains("no entity Hotel; its entities are "))
    }

    @Test func history() throws {
        let fixture = try Fixture()
        let piped = try Tool.run(["history", fixture.directory])
        #expect(piped.status == 0)
        let lines = piped.stdout.split(separator: "\n")
        #expect(lines.count == 4)
        try Golden.check("history-json-lines", piped.stdout, directories: [fixture.directory])
        let widget = try Tool.run(["history", fixture.directory, "--author", "widget"])
        #expect(widget.stdout.split(separator: "\n").count == 1)
        #expect(widget.stdout.contains(#""author":"widget""#))
        let limited = try Tool.run(["history", fixture.directory, "--after", fixture.tokens[0].json, "--limit", "2"])
        let limitedTokens = try limited.stdout.split(separator: "\n").map {
            try JSONDecoder().decode(TokenLine.self, from: Data($0.utf8)).token
        }
        #expect(limitedTokens == [fixture.tokens[1], fixture.tokens[2]])
        let transactions = try HistoryCommand.fetch(directory: fixture.directory, after: nil, author: nil, limit: nil)
        try Golden.check(
            "history",
            HistoryCommand.text(transactions, directory: fixture.directory, after: nil, author: nil).joined(
                separator: "\n"),
            directories: [fixture.directory])
    }

    struct TokenLine: Decodable {
        var token: DefaultHistoryToken
    }

    @Test func dump() throws {
        let fixture = try Fixture()
        let piped = try Tool.run(["dump", fixture.directory])
        #expect(piped.status == 0)
        let objects = try piped.stdout.split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])
        }
        #expect(objects.map { $0["type"] as? String } == [
            "schema", "transaction", "transaction", "transaction", "transaction", "bookmark", "durable-end-mark",
        ])
        #expect(objects.filter { $0["transaction"] != nil }.count == 4)
        try Golden.check("dump-json-lines", piped.stdout, directories: [fixture.directory])
        var text: [String] = []
        try LogStore.readRecords(directory: fixture.directory) { record in
            text += DumpCommand.text(record)
            return true
        }
        try Golden.check("dump", text.joined(separator: "\n"), directories: [fixture.directory])
        let two = try Tool.run(["dump", fixture.directory, "--from", String(fixture.tokens[1].offset), "--limit", "2"])
        #expect(two.stdout.split(separator: "\n").count == 2)
        #expect(two.stdout.hasPrefix(#"{"compressed""#) && two.stdout.contains(#""offset":\#(fixture.tokens[1].offset)"#))
    }

    @Test func exportThenImportReproducesTheState() throws {
        let fixture = try Fixture()
        let export = try Tool.run(["export", fixture.directory, "--history"])
        #expect(export.status == 0)
        try Golden.check("export-history", export.stdout, directories: [fixture.directory])
        let importDirectory = TemporaryDirectory("import")
        let target = importDirectory.path
        let imported = try Tool.run(["import", target], input: Data(export.stdout.utf8))
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stdout.contains("Imported 4 models into the new store"))
        #expect(imported.stdout.contains("4 history transactions in the input were skipped"))
        try Golden.check("import", imported.stdout, directories: [target])

        let original = try LogStore.replay(directory: fixture.directory)
        let copy = try LogStore.replay(directory: target)
        #expect(copy.storeIdentifier != original.storeIdentifier)
        #expect(copy.schema == original.schema)
        #expect(Self.comparable(copy) == Self.comparable(original))
        // The export of the import is the export, but for the store line and the history.
        let again = try Tool.run(["export", target])
        let models = { (text: String) in text.split(separator: "\n").filter { $0.contains(#""kind":"model""#) } }
        #expect(models(again.stdout) == models(export.stdout).map { Substring(Self.replacing($0, original, copy)) })
        // A cut-short export is refused before anything is written.
        let cut = export.stdout.split(separator: "\n").dropLast().joined(separator: "\n")
        let refusedDirectory = TemporaryDirectory("import")
        let refusedTarget = refusedDirectory.path
        let refused = try Tool.run(["import", refusedTarget], input: Data(cut.utf8))
        #expect(refused.status == 2)
        #expect(refused.stderr.contains("cut short"))
        #expect(!FileManager.default.fileExists(atPath: refusedTarget))
        // Through files: export --output (a summary, here as JSON) and import --input.
        let files = TemporaryDirectory("files")
        try FileManager.default.createDirectory(atPath: files.path, withIntermediateDirectories: true)
        let file = files.appending("trips.jsonl")
        let written = try Tool.run(["export", fixture.directory, "--output", file, "--json"])
        #expect(written.status == 0, "\(written.stderr)")
        let summary = try JSONSerialization.jsonObject(with: Data(written.stdout.utf8)) as? [String: Any]
        #expect(summary?["models"] as? Int == 4 && summary?["transactions"] as? Int == 0)
        let rewritten = try Tool.run(["export", fixture.directory, "--output", file])
        #expect(rewritten.status == 2 && rewritten.stderr.contains("already exists"))
        let fromFile = try Tool.run(["import", files.appending("copy"), "--input", file, "--json"])
        #expect(fromFile.status == 0, "\(fromFile.stderr)")
        #expect(Self.comparable(try LogStore.replay(directory: files.appending("copy"))) == Self.comparable(original))
        // Into an existing store: refused.
        let occupied = try Tool.run(["import", fixture.directory], input: Data(export.stdout.utf8))
        #expect(occupied.status == 2 && occupied.stderr.contains("is not empty"))
    }

    /// Entities with rows as (primary key, values with references reduced to entity/key).
    static func comparable(_ state: StoreState) -> [String: [String: [String: String]]] {
        var result: [String: [String: [String: String]]] = [:]
        for entity in state.entities {
            for row in entity.rows {
                result[entity.name, default: [:]][row.persistentIdentifier.primaryKey.uuidString] = row.values.mapValues {
                    "\($0.mapReferences { id in try? PersistentIdentifier.identifier(for: "-", entityName: id.entityName, primaryKey: id.primaryKey) })"
                }
            }
        }
        return result
    }

    static func replacing(_ line: Substring, _ original: StoreState, _ copy: StoreState) -> String {
        line.replacingOccurrences(of: original.storeIdentifier.uuidString, with: copy.storeIdentifier.uuidString)
    }

    @Test func compactPrintsWhatWent() throws {
        let fixture = try Fixture()
        let run = try Tool.run(["compact", fixture.directory, "--through", fixture.tokens[1].json, "--force"])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("Deleted history through token@\(fixture.tokens[1].offset)."))
        try Golden.check("compact", run.stdout, directories: [fixture.directory])
        let history = try Tool.run(["history", fixture.directory])
        #expect(history.stdout.split(separator: "\n").count == 2)
    }

    @Test func demoLeavesHistoryToLookAt() throws {
        let store = TemporaryStore()
        let demo = try Tool.run(["demo", store.directory])
        #expect(demo.status == 0, "\(demo.stderr)")
        #expect(demo.stdout.contains("fetchHistory after the saved token → historyTokenExpired: "))
        var masked = demo.stdout.replacingOccurrences(
            of: #"\d+ (record|fdatasync)"#, with: "<k> $1", options: .regularExpression)
        masked = masked.replacingOccurrences(of: #"\d+(\.\d)? (B|KiB|MiB)"#, with: "<bytes>", options: .regularExpression)
        try Golden.check("demo", masked, directories: [store.directory])
        let history = try Tool.run(["history", store.directory])
        #expect(history.status == 0)
        let authors = history.stdout.split(separator: "\n").map {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["author"] as? String
        }
        #expect(authors == ["widget", "app"])
    }
}
