import ArgumentParser
import Foundation
import LogStore
import LogStoreEngine
import SampleTrips

/// `logstore demo <dir>`: a tour of the model layer with the WWDC24 SampleTrips models.
struct DemoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract:
            "Tour the model layer: save, fetch, update, upsert and delete SampleTrips models in a store (created if missing).",
        discussion: """
            Opens the store through ModelContainer and ModelContext with synchronous durability (each \
            save returns once an fdatasync covers its transaction), then: inserts three trips with \
            bucket list items and living accommodations, fetches them with a #Predicate and a \
            SortDescriptor, confirms an accommodation from a second context, re-inserts a trip with the \
            same unique name and dates (an upsert: the existing trip is updated), and deletes a trip \
            (its bucket list items and accommodation go with it). Each run adds another round.

            Order of a round: insert, upsert, then the history part (the app keeps its token, books a \
            stay, the widget confirms it, the app fetches the widget's changes after its token, history \
            is deleted through them and the saved token expires), then fetch, update and delete — so \
            `logstore history <dir>` afterwards lists this round's update and delete. Afterwards, try \
            `logstore replay <dir>`, `logstore inspect <dir>`, `logstore dump <dir>` and \
            `logstore verify <dir>`. With --json, the tour's lines are printed as one JSON array of \
            strings. When another process has the store open for writing, it refuses (exit code 3) and \
            names it.

            \(ToolExit.helpText)
            """
    )

    @OptionGroup var store: StoreOptions

    func run() throws {
        let directory = store.directory
        var lines: [String] = []
        try reportingErrors(directory: directory) {
            try TripsTour(directory: directory).run { line in
                if store.json { lines.append(line) } else { print(line) }
            }
        }
        if store.json { try printJSON(lines) }
    }
}

/// The tour as a plain function of its directory, printing through `say`.
struct TripsTour {
    var directory: String

    /// Round 1 starts on this day; each round's trips lie in their own seven weeks.
    static let firstRoundStart = Date(timeIntervalSince1970: 1_777_852_800)  // 2026-05-04
    static let roundLength = 49

    func run(say: (String) -> Void) throws {
        let container = try ModelContainer(
            for: sampleTripsModels,
            configuration: LogStoreConfiguration(directory: directory, durability: .synchronous))
        let store = container.dataStore(as: LogStore.self)!
        let app = ModelContext(container)
        app.author = "app"
        let earlierTrips = try app.fetch(FetchDescriptor<Trip>())
        let round = Self.round(after: earlierTrips)
        let names = (lisbon: "Lisbon #\(round)", kyoto: "Kyoto #\(round)", reykjavik: "Reykjavík #\(round)")
        let start = Self.firstRoundStart.addingTimeInterval(Double((round - 1) * Self.roundLength) * 86_400)
        let end = start.addingTimeInterval(Double(Self.roundLength) * 86_400)

        say("LogStore tour, round \(round): the SampleTrips models through ModelContext, in \(directory)")
        describeOpen(store, tripCount: earlierTrips.count, say: say)
        var meter = SaveMeter(store: store)

        // 1. Insert: three trips; the bucket list items and accommodations are inserted with them.
        let trips = Self.trips(names, start: start)
        for trip in trips { app.insert(trip) }
        try app.save()
        let itemCount = trips.reduce(0) { $0 + $1.bucketList.count }
        let stayCount = trips.filter { $0.livingAccommodation != nil }.count
        say(meter.step("insert", "3 trips, \(itemCount) bucket list items, \(stayCount) accommodations", author: app))

        let thisRound = FetchDescriptor<Trip>(
            predicate: #Predicate { $0.startDate >= start && $0.startDate < end },
            sortBy: [SortDescriptor(\.startDate)])
        // 2. Upsert: inserting a trip with the same name and dates updates the existing one.
        let importer = ModelContext(container)
        importer.author = "import"
        let original = trips[2]
        let countBefore = try importer.fetchCount(thisRound)
        let again = Trip(
            name: original.name, destination: "Iceland (Ring Road)", startDate: original.startDate,
            endDate: original.endDate)
        importer.insert(again)
        try importer.save()
        say(meter.step("upsert", "a new Trip named \(original.name), same dates", author: importer))
        let countAfter = try importer.fetchCount(thisRound)
        say(
            "          → updated \(Self.short(original.persistentModelID))"
                + (again.persistentModelID == original.persistentModelID ? " (same identifier)" : "")
                + ": destination \"\(again.destination)\", fetchCount \(countBefore) → \(countAfter)")

        // 3. History: the app keeps a token; the widget's changes after it; then history deletion
        // through them, so the saved token expires. What follows stays in history to look at.
        try historyTour(store: store, container: container, app: app, reykjavik: trips[2], meter: &meter, say: say)

        say("")
        // 4. Fetch: this round's trips, by a #Predicate on dates, sorted by start date.
        say(
            "fetch   #Predicate { $0.startDate >= \(Self.day(start)) && $0.startDate < \(Self.day(end)) }, "
                + "SortDescriptor(\\.startDate):")
        // From a fresh context: `app` still holds its own, older copies of what other contexts saved.
        for trip in try ModelContext(container).fetch(thisRound) { say("          " + Self.line(trip)) }

        // 5. Update from another context: the widget confirms the Kyoto accommodation.
        let widget = ModelContext(container)
        widget.author = "widget"
        let kyotoName = names.kyoto
        let kyoto = try widget.fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.name == kyotoName })).first!
        kyoto.livingAccommodation?.isConfirmed = true
        try widget.save()
        say(
            meter.step(
                "update", "\(kyoto.livingAccommodation?.placeName ?? "-") confirmed (isConfirmed = true)",
                author: widget))

        // 6. Delete: the cascade rules remove the trip's bucket list items and accommodation.
        let lisbon = trips[0]
        let itemsBefore = try app.fetchCount(FetchDescriptor<BucketListItem>())
        let staysBefore = try app.fetchCount(FetchDescriptor<LivingAccommodation>())
        app.delete(lisbon)
        try app.save()
        let itemsGone = itemsBefore - (try app.fetchCount(FetchDescriptor<BucketListItem>()))
        let staysGone = staysBefore - (try app.fetchCount(FetchDescriptor<LivingAccommodation>()))
        say(
            meter.step(
                "delete",
                "\(names.lisbon) + cascade: \(itemsGone) items, \(staysGone) accommodation"
                    + (staysGone == 1 ? "" : "s"), author: app))

        let syncCount = store.logStatistics.syncCount
        try store.close()
        try summarize(round: round, syncCount: syncCount, say: say)
    }

    /// The WWDC24 history scenario: the app saves its token as JSON, books a stay; the widget
    /// confirms it; the app fetches the widget's changes after its token; history is deleted
    /// through the widget's transaction, and the old token has expired.
    private func historyTour(
        store: LogStore, container: ModelContainer, app: ModelContext, reykjavik: Trip,
        meter: inout SaveMeter, say: (String) -> Void
    ) throws {
        say("")
        // The app keeps its token as JSON (in UserDefaults, say).
        let savedJSON = try JSONEncoder().encode(store.currentToken)
        let saved = try JSONDecoder().decode(DefaultHistoryToken.self, from: savedJSON)
        say("history the app saves its token: \(saved.json)")

        // The booking goes through a fresh context of the app: `app` still holds Reykjavík as it
        // inserted it, before the upsert, and a save sends whole models, so saving a change to
        // its stale copy would write the old destination back over the upsert's.
        let booking = ModelContext(container)
        booking.author = "app"
        let name = reykjavik.name
        let trip = try booking.fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.name == name })).first!
        trip.livingAccommodation = LivingAccommodation(address: "Laugavegur 11", placeName: "Hótel Borg")
        try booking.save()
        say(meter.step("book", "Hótel Borg for \(reykjavik.name) (unconfirmed)", author: booking))
        let widget = ModelContext(container)
        widget.author = "widget"
        let stay = try widget.fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.name == name })).first?
            .livingAccommodation
        stay?.isConfirmed = true
        try widget.save()
        say(meter.step("update", "\(stay?.placeName ?? "-") confirmed (isConfirmed = true)", author: widget))

        let widgetChanges = try app.fetchHistory(
            HistoryDescriptor<DefaultHistoryTransaction>(
                predicate: #Predicate { $0.token > saved && $0.author == "widget" }))
        say(
            "fetchHistory #Predicate { $0.token > saved && $0.author == \"widget\" }: \(widgetChanges.count) transaction"
                + (widgetChanges.count == 1 ? "" : "s"))
        for transaction in widgetChanges {
            for change in transaction.changes {
                let (kind, values): (String, [String: AttributeValue]) =
                    switch change {
                    case .insert(let insert): ("insert", insert.values)
                    case .update(let update): ("update", update.values)
                    case .delete(let delete): ("delete", delete.tombstoneValues)
                    }
                say(
                    "          token@\(transaction.transactionIdentifier) \(kind) \(Self.short(change.changedPersistentIdentifier)) "
                        + values.sorted { $0.key < $1.key }.map { "\($0.key) = \(ReplayText.text($0.value))" }.joined(
                            separator: ", "))
            }
        }

        guard let through = widgetChanges.last?.token else { return }
        let compaction = try store.deleteHistory(
            HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token <= through }), force: false)
        let segments = compaction.deletedSegments.count
        say(
            "deleteHistory #Predicate { $0.token <= token@\(through.offset) }: low-water mark "
                + "\(compaction.previousLowWaterMark.map { "token@\($0.offset)" } ?? "none") → "
                + "\(compaction.lowWaterMark.map { "token@\($0.offset)" } ?? "none"), "
                + (segments == 0
                    ? "0 segment files deleted (the one being written is kept)"
                    : "\(segments) segment file\(segments == 1 ? "" : "s") deleted, \(Format.bytes(compaction.reclaimedByteCount))")
        )
        do {
            _ = try app.fetchHistory(
                HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token > saved }))
            say("fetchHistory after the saved token still worked: unexpected, history through it was deleted.")
        } catch let error as LogStoreError {
            guard error.code == .historyTokenExpired else { throw error }
            say("fetchHistory after the saved token → historyTokenExpired: \(error)")
        }
    }

    private func describeOpen(_ store: LogStore, tripCount: Int, say: (String) -> Void) {
        let report = store.recoveryReport
        if report.createdStore {
            say("Created the store \(store.identifier).")
        } else {
            say(
                "Opened the store \(store.identifier): "
                    + (tripCount == 0
                        ? "no trips yet." : "\(tripCount) trip\(tripCount == 1 ? "" : "s") from earlier rounds."))
        }
        for record in report.droppedRecords { say("  recovery dropped \(record)") }
        for file in report.removedTemporaryFiles { say("  recovery removed the temporary file \(file)") }
        for file in report.unknownFiles { say("  note: \(file) is not part of the store; left alone") }
        say("Saves are synchronous: each returns once an fdatasync covers its transaction record.")
        say("")
    }

    /// The state as `logstore replay` folds it from the log, and what the log holds.
    private func summarize(round: Int, syncCount: UInt64, say: (String) -> Void) throws {
        let state = try LogStore.replay(directory: directory)
        let inspection = try Log.inspect(directory: directory)
        let counts = state.entities.map { entity in
            "\(entity.rows.count) \(Self.plural(entity.name, entity.rows.count))"
        }
        let logBytes = inspection.endOffset - inspection.startOffset
        let segments = inspection.segments.count
        say("")
        let source =
            state.checkpointOffset.map {
                "the checkpoint at offset \($0) and the \(Format.grouped(state.transactionCount)) transactions after it"
            } ?? "the log's \(Format.grouped(state.transactionCount)) transactions"
        say("State, folded from \(source): " + counts.joined(separator: ", ") + ".")
        say(
            "Log: \(Format.grouped(inspection.recordCount)) "
                + "records, \(Format.bytes(logBytes)) in \(segments) segment\(segments == 1 ? "" : "s") "
                + "(\(Format.bytes(inspection.fileByteCount)) on disk, preallocated ahead); \(syncCount) fdatasync calls this run."
        )
        say("Look further (`swift run logstore …` from the package directory):")
        say("  logstore replay \(directory)    # the models, folded from the log; --json for scripts")
        say("  logstore inspect \(directory)   # segments, records, bytes")
        say("  logstore verify \(directory)    # check every record")
        say("  logstore history \(directory)   # this round's update and delete, after the low-water mark")
        say("  logstore dump \(directory)      # every record as stored, transactions decoded")
        say("Run the demo again to add round \(round + 1).")
    }

    // MARK: The sample data

    private static func trips(_ names: (lisbon: String, kyoto: String, reykjavik: String), start: Date) -> [Trip] {
        func day(_ offset: Int) -> Date { start.addingTimeInterval(Double(offset) * 86_400) }
        let lisbon = Trip(name: names.lisbon, destination: "Portugal", startDate: day(0), endDate: day(5))
        lisbon.bucketList = [
            BucketListItem(title: "Tram 28", details: "Ride it up to the castle", isInPlan: true),
            BucketListItem(title: "Pastéis de Belém", details: "Warm, with cinnamon"),
        ]
        lisbon.livingAccommodation = LivingAccommodation(address: "Rua da Saudade 3", placeName: "Casa do Fado")
        let kyoto = Trip(name: names.kyoto, destination: "Japan", startDate: day(14), endDate: day(24))
        kyoto.bucketList = [
            BucketListItem(title: "Fushimi Inari", details: "Go at dawn", isInPlan: true),
            BucketListItem(title: "Tea ceremony", details: "In Gion", hasReservation: true, isInPlan: true),
        ]
        kyoto.livingAccommodation = LivingAccommodation(address: "Higashiyama 5", placeName: "Ryokan Sakura")
        let reykjavik = Trip(name: names.reykjavik, destination: "Iceland", startDate: day(35), endDate: day(39))
        return [lisbon, kyoto, reykjavik]
    }

    /// The next round: two trips stay per round; a round whose names are taken is skipped.
    static func round(after trips: [Trip]) -> Int {
        let names = Set(trips.map(\.name))
        var round = trips.count / 2 + 1
        while names.contains("Kyoto #\(round)") || names.contains("Reykjavík #\(round)") { round += 1 }
        return round
    }

    // MARK: Text

    private static func line(_ trip: Trip) -> String {
        let days = "\(day(trip.startDate)) – \(day(trip.endDate))"
        var plans =
            trip.bucketList.isEmpty
            ? "nothing planned yet"
            : "\(trip.bucketList.count) bucket list item\(trip.bucketList.count == 1 ? "" : "s")"
        if let stay = trip.livingAccommodation {
            plans += ", \(stay.placeName)" + (stay.isConfirmed ? " (confirmed)" : " (unconfirmed)")
        }
        return pad(trip.name, 14) + pad(trip.destination, 20) + pad(days, 25) + plans
    }

    private static func day(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle().year().month().day())
    }

    static func short(_ identifier: PersistentIdentifier) -> String {
        "\(identifier.entityName)/\(identifier.primaryKey.uuidString.prefix(8))…"
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }

    private static func plural(_ entityName: String, _ count: Int) -> String {
        let words = entityName.replacing(/([a-z])([A-Z])/) { "\($0.1) \($0.2)" }.lowercased()
        if count == 1 { return words }
        return words.hasSuffix("y") ? words.dropLast() + "ies" : words + "s"
    }
}

/// What each save added to the log: its token (the offset of its transaction record), records,
/// bytes and `fdatasync` calls, from the store's statistics before and after.
struct SaveMeter {
    let store: LogStore
    private var last: LogStatistics

    init(store: LogStore) {
        self.store = store
        last = store.logStatistics
    }

    mutating func step(_ verb: String, _ text: String, author context: ModelContext) -> String {
        let now = store.logStatistics
        defer { last = now }
        let records = now.appendCount - last.appendCount
        let syncs = now.syncCount - last.syncCount
        let token = store.currentToken.map { "token@\($0.offset)" } ?? "no token"
        return TripsTour.pad(verb, 8) + TripsTour.pad(text, 52) + TripsTour.pad(context.author ?? "-", 8)
            + "\(token), \(records) record\(records == 1 ? "" : "s"), \(Format.bytes(now.byteCount - last.byteCount)), "
            + "\(syncs) fdatasync"
    }
}
