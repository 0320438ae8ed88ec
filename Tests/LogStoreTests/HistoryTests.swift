import Foundation
import LogStoreEngine
import LogStoreTestSupport
import SampleTrips
import Testing

@testable import LogStore

/// History (DECISIONS.md D6, D7): fetching after a token, author filters with Swift semantics,
/// tombstones, token validation, deleteHistory and the low-water mark, consumers holding history
/// back, and compaction that survives power cuts.
@Suite struct HistoryTests {
    static let directory = "/history"

    static func open(
        _ fileSystem: SimulatedFileSystem, segmentByteCountMax: UInt64 = 64 * 1024 * 1024,
        durability: Durability = .synchronous
    ) throws -> (ModelContainer, LogStore) {
        let configuration = LogStoreConfiguration(
            directory: directory, durability: durability,
            segmentByteCountMax: segmentByteCountMax,
            checkpointIntervalByteCount: 0, fileSystem: fileSystem)
        let container = try ModelContainer(for: sampleTripsModels, configuration: configuration)
        return (container, container.dataStore(as: LogStore.self)!)
    }

    /// Saves one trip per call through a fresh context and returns the save's token.
    @discardableResult
    static func saveTrip(_ container: ModelContainer, _ number: Int, author: String? = nil) throws -> DefaultHistoryToken {
        let context = ModelContext(container)
        context.author = author
        context.insert(
            Trip(
                name: "trip \(number)", destination: "place \(number)", startDate: day(number),
                endDate: day(number + 3)))
        try context.save()
        return try #require(container.dataStore(as: LogStore.self)!.currentToken)
    }

    static func tokens(_ transactions: [DefaultHistoryTransaction]) -> [DefaultHistoryToken] { transactions.map(\.token) }

    static func after(_ token: DefaultHistoryToken) -> HistoryDescriptor<DefaultHistoryTransaction> {
        HistoryDescriptor(predicate: #Predicate { $0.token > token })
    }

    // MARK: The WWDC24 scenario

    /// The widget confirms a living accommodation; the app fetches what the widget changed since
    /// its saved JSON token, finds exactly that trip, and keeps the new token. A trip deleted
    /// later is seen through its tombstone's preserved values.
    @Test func widgetChangesAreFoundAfterTheAppsSavedToken() throws {
        let fileSystem = SimulatedFileSystem()
        let (container, store) = try Self.open(fileSystem)
        let app = ModelContext(container)
        let paris = Trip(name: "Paris", destination: "France", startDate: day(10), endDate: day(14))
        paris.livingAccommodation = LivingAccommodation(address: "1 Rue de Rivoli", placeName: "Hôtel")
        let rome = Trip(name: "Rome", destination: "Italy", startDate: day(20), endDate: day(25))
        rome.livingAccommodation = LivingAccommodation(address: "Via del Corso 2", placeName: "Albergo")
        app.insert(paris)
        app.insert(rome)
        try app.save()
        // The app keeps its token as JSON (in UserDefaults, say).
        let savedJSON = try JSONEncoder().encode(try #require(store.currentToken))

        // The widget (another context with its own author) confirms Paris's accommodation; the app
        // itself renames Rome.
        let widget = ModelContext(container)
        widget.author = "widget"
        let widgetParis = try #require(try widget.fetch(FetchDescriptor<Trip>()).first { $0.name == "Paris" })
        widgetParis.livingAccommodation?.isConfirmed = true
        try widget.save()
        rome.destination = "Lazio"
        try app.save()

        let token = try JSONDecoder().decode(DefaultHistoryToken.self, from: savedJSON)
        let descriptor = HistoryDescriptor<DefaultHistoryTransaction>(
            predicate: #Predicate { $0.token > token && $0.author == "widget" })
        let transactions = try app.fetchHistory(descriptor)
        #expect(transactions.count == 1)
        let changes = try #require(transactions.first?.changes)
        #expect(changes.count == 1)
        guard case .update(let update as DefaultHistoryUpdate<LivingAccommodation>) = changes.first else {
            Issue.record("expected an update of a LivingAccommodation, got \(changes)")
            return
        }
        #expect(update.changedPersistentIdentifier == paris.livingAccommodation?.persistentModelID)
        #expect(update.updatedAttributeNames == ["isConfirmed"])
        #expect(update[\LivingAccommodation.isConfirmed] == true)
        #expect(update.updatedAttributes.map { $0 as AnyKeyPath } == [\LivingAccommodation.isConfirmed])
        #expect(transactions.first?.author == "widget")
        #expect(transactions.first?.processIdentifier == LogStore.processIdentifier)
        #expect(transactions.first?.storeIdentifier == store.identifier)
        // The app stores the newest token it has seen.
        let newToken = try #require(transactions.last?.token)
        #expect(newToken > token)

        // Rome is deleted; history keeps its name and dates (preserveValueOnDeletion), not its
        // destination. Its accommodation goes with it (cascade), as its own change.
        app.delete(rome)
        try app.save()
        let deletion = try #require(try app.fetchHistory(Self.after(newToken)).last)
        let deletes = deletion.changes.compactMap { change -> (any HistoryDelete)? in
            if case .delete(let delete) = change { return delete }
            return nil
        }
        #expect(deletes.count == 2)
        let tripDelete = try #require(deletes.compactMap { $0 as? DefaultHistoryDelete<Trip> }.first)
        let tripTombstone = tripDelete.tombstone
        #expect(tripTombstone[\Trip.name] == "Rome")
        #expect(tripTombstone[\Trip.startDate] == day(20))
        #expect(tripTombstone[\Trip.destination] == nil)
        #expect(tripTombstone["endDate"] == .date(day(25)))
        #expect(deletes.contains { $0.changedPersistentIdentifier.entityName == LivingAccommodation.entityName })
        // Read without the model types (the store itself, the tool), the same change answers by names.
        let untyped = try #require(try store.fetchHistory(Self.after(newToken)).last)
        #expect(untyped.changes == deletion.changes)
        guard case .delete(let untypedDelete) = untyped.changes.first(where: { $0.changedPersistentIdentifier == tripDelete.changedPersistentIdentifier }) else {
            Issue.record("expected the trip's delete")
            return
        }
        #expect(untypedDelete is DefaultHistoryDelete<UntypedModel>)
        #expect(untypedDelete.tombstoneValues["name"] == .string("Rome"))
    }

    // MARK: Fetch semantics

    /// `author != "x"` includes transactions without an author, as Swift says; `== nil` finds
    /// exactly those; the pushed-down answer equals `Predicate.evaluate` over all history.
    /// A transaction is a value: setting a field of a copy changes that copy only, and keeps its
    /// changes (decoded or not yet), its token and the fields not set.
    @Test func settingAFieldOfAFetchedTransactionChangesThatCopyOnly() throws {
        let (container, store) = try Self.open(SimulatedFileSystem())
        try Self.saveTrip(container, 1, author: "app")
        try Self.saveTrip(container, 2, author: "widget")
        let fetched = try store.fetchHistory(HistoryDescriptor())
        #expect(fetched.count == 2)
        for (index, original) in fetched.enumerated() {
            // The first copy is made before its changes are decoded, the second after.
            if index == 1 { _ = original.changes }
            var copy = original
            copy.author = "edited"
            copy.processIdentifier = "1@elsewhere"
            let later = original.timestamp.addingTimeInterval(60)
            copy.timestamp = later
            copy.storeIdentifier = "another"
            #expect(original.author == (index == 0 ? "app" : "widget"))
            #expect(original.processIdentifier == LogStore.processIdentifier)
            #expect(original.storeIdentifier == store.identifier)
            #expect(copy.author == "edited" && copy.processIdentifier == "1@elsewhere")
            #expect(copy.timestamp == later && copy.storeIdentifier == "another")
            #expect(copy.token == original.token && copy.id == original.id)
            #expect(copy.changes == original.changes && copy.changes.count == 1)
            #expect(copy != original)
            copy.author = original.author
            copy.processIdentifier = original.processIdentifier
            copy.timestamp = original.timestamp
            copy.storeIdentifier = original.storeIdentifier
            #expect(copy == original && copy.hashValue == original.hashValue)
            // Set over and over before its changes are read: no chain of objects to read or free
            // (review found one as deep as the number of sets).
            var edited = try store.fetchHistory(HistoryDescriptor())[index]
            for round in 0..<200_000 { edited.timestamp = Date(timeIntervalSince1970: Double(round)) }
            #expect(edited.changes == original.changes && edited.timestamp.timeIntervalSince1970 == 199_999)
            // Printed with its fields, as when each was stored.
            let printed = String(describing: original)
            #expect(printed.contains("author: Optional(\"\(original.author!)\")") && printed.contains("processIdentifier:"))
            // Typed by the container's models, the fields stay.
            let typed = original.typed(by: ["Trip": Trip.self])
            #expect(typed.author == original.author && typed.timestamp == original.timestamp)
            #expect(typed.changes.count == 1)
        }
        try store.close()
    }

    /// A fetch copies the payloads it takes into shared chunks: transactions of every size —
    /// empty, small, larger than a chunk — keep their bytes after the fetch, on any thread, and
    /// spanning many chunks.
    @Test func fetchedTransactionsKeepTheirChangesAcrossPayloadChunks() async throws {
        let (container, store) = try Self.open(SimulatedFileSystem())
        var names: [String] = []
        for number in 0..<300 {
            // Every 50th name is larger than a chunk (32 KiB): it gets a chunk of its own.
            let name = number % 50 == 7 ? String(repeating: "n\(number % 10)", count: 20_000) : "trip \(number)"
            names.append(name)
            let context = ModelContext(container)
            context.insert(Trip(name: name, destination: "place \(number)", startDate: day(number)))
            try await context.save()
        }
        let fetched = try store.fetchHistory(HistoryDescriptor())
        #expect(fetched.count == 300)
        // Read on other threads, after the fetch returned: the changes decode from the chunks.
        let decoded = await withTaskGroup(of: (Int, String?).self) { group in
            for (index, transaction) in fetched.enumerated() {
                group.addTask {
                    guard case .insert(let insert) = transaction.changes.first else { return (index, nil) }
                    guard case .string(let name)? = insert.values["name"] else { return (index, nil) }
                    return (index, name)
                }
            }
            var names = [String?](repeating: nil, count: fetched.count)
            for await (index, name) in group { names[index] = name }
            return names
        }
        #expect(decoded == names)
        try store.close()
    }

    /// A fetch's batch (``HistoryBatch``) holds each transaction's header and payload where it
    /// said: payloads of every size — empty, small, larger than a chunk — in chunks of at most
    /// 32 KiB (or one of a larger payload's own size), and authors and process identifiers kept
    /// once per run of equal ones.
    @Test func aHistoryBatchHoldsEveryTransactionWhereItSaidItIs() {
        let batch = HistoryBatch(
            storeIdentifier: "store", decoder: TransactionRecord.Decoder(table: SchemaTable(), storeIdentifier: "store"),
            capacity: 0)
        var random = CheckpointTests.Random(state: 42)
        var kept: [(index: Int32, offset: UInt64, author: String?, micros: Int64, process: String, bytes: [UInt8])] = []
        let processes = ["1@host A", "2@host B"]
        for index in 0..<2_000 {
            let count = index % 97 == 0 ? 40_000 : index % 13 == 0 ? 0 : Int(random.next() % 600)
            let bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            // Runs of one process's saves, every third without an author.
            let process = processes[index / 100 % 2]
            let author: String? = index % 3 == 0 ? nil : index % 10 == 9 ? "widget" : "app"
            let offset = UInt64(index) * 1_000 + 7
            let micros = Int64(index) * 1_000_000 + 123
            let place = bytes.withUnsafeBytes {
                batch.append(
                    offset: offset, author: author, timestampMicroseconds: micros, processIdentifier: process, payload: $0)
            }
            #expect(place == Int32(index))
            kept.append((place, offset, author, micros, process, bytes))
        }
        var mismatches = 0
        for entry in kept {
            let same =
                batch.offset(at: entry.index) == entry.offset && batch.author(at: entry.index) == entry.author
                && batch.timestamp(at: entry.index) == Date(timeIntervalSince1970: Double(entry.micros) / 1_000_000)
                && batch.processIdentifier(at: entry.index) == entry.process
                && Array(batch.payload(at: entry.index)) == entry.bytes
            if !same { mismatches += 1 }
        }
        #expect(mismatches == 0)
        // 2,000 payloads of ~300 bytes in chunks of up to 32 KiB, plus one per large payload.
        #expect(batch.chunkCapacities.allSatisfy { $0 <= HistoryBatch.chunkByteCountMax || $0 == 40_000 })
        #expect(batch.chunkCapacities.count < 60)
        // An author or process identifier is kept again only where it differs from the last of
        // its kind: "app" after each "widget", "widget" 200 times, the process 20 times.
        #expect(batch.stringCount < 700)
    }

    /// A record whose author is not UTF-8 (its CRC matching: a writer bug or a crafted file) is
    /// refused by every fetch that reaches it, whatever its author test — not skipped quietly by
    /// one filter and refused by another.
    @Test func anAuthorThatIsNotUTF8IsCorruptionWhateverTheFilter() throws {
        let (container, store) = try Self.open(SimulatedFileSystem())
        let first = try Self.saveTrip(container, 0, author: "app")
        let table = store.inner.withLock { $0.table }
        let record = TransactionRecord(
            schemaVersion: table.version, author: "\u{e9}MARK", timestampMicroseconds: 1,
            processIdentifier: LogStore.processIdentifier, changes: [])
        var payload = record.encoded(table: table)
        // "é" is C3 A9 in UTF-8: C3 followed by "M" is not UTF-8.
        let mark = Array("\u{e9}MARK".utf8)
        let at = try #require(payload.indices.first { payload[$0...].starts(with: mark) })
        payload[at + 1] = UInt8(ascii: "M")
        payload[at + 2] = UInt8(ascii: "M")
        _ = try store.log.write(payload, type: .transaction)
        try store.log.sync()
        let filters: [Predicate<DefaultHistoryTransaction>] = [
            #Predicate { $0.author == "x" }, #Predicate { $0.author != "x" }, #Predicate { $0.author == nil },
            #Predicate { $0.author != nil }, #Predicate { $0.author == "\u{e9}" }, #Predicate { $0.token > first },
        ]
        for (index, predicate) in filters.enumerated() {
            #expect(throws: LogStoreError.self, "filter \(index)") {
                try store.fetchHistory(HistoryDescriptor(predicate: predicate))
            }
        }
        #expect(throws: LogStoreError.self) { try store.fetchHistory(HistoryDescriptor()) }
        try store.close()
    }

    @Test func authorFiltersFollowSwiftSemantics() throws {
        let (container, store) = try Self.open(SimulatedFileSystem())
        let authors: [String?] = [nil, "app", "widget", nil, "widget", "Widget", "app", nil]
        for (number, author) in authors.enumerated() { try Self.saveTrip(container, number, author: author) }
        let all = try store.fetchHistory(HistoryDescriptor())
        #expect(all.map(\.author) == authors)
        let notWidget = try store.fetchHistory(HistoryDescriptor(predicate: #Predicate { $0.author != "widget" }))
        #expect(notWidget.map(\.author) == authors.filter { $0 != "widget" })
        let noAuthor = try store.fetchHistory(HistoryDescriptor(predicate: #Predicate { $0.author == nil }))
        #expect(noAuthor.count == 3)
        let someAuthor = try store.fetchHistory(HistoryDescriptor(predicate: #Predicate { $0.author != nil }))
        #expect(someAuthor.count == 5)
        let name: String? = "app"
        let captured = try store.fetchHistory(HistoryDescriptor(predicate: #Predicate { $0.author == name }))
        #expect(captured.map(\.author) == ["app", "app"])
        // A term the store does not push down goes through Predicate.evaluate, after the pushed ones.
        let third = all[2].token
        let mixed = #Predicate<DefaultHistoryTransaction> {
            $0.token >= third && $0.author != "app" && $0.changes.count == 1
        }
        let expected = try all.filter { try mixed.evaluate($0) }
        #expect(try store.fetchHistory(HistoryDescriptor(predicate: mixed)) == expected)
        #expect(expected.map(\.author) == ["widget", nil, "widget", "Widget", nil])
    }

    /// Limits, sorts, inclusive and exclusive bounds on both sides, bounds written either way round.
    @Test func tokenBoundsLimitsAndSorts() throws {
        let (container, store) = try Self.open(SimulatedFileSystem())
        var tokens: [DefaultHistoryToken] = []
        for number in 0..<10 {
            tokens.append(try Self.saveTrip(container, number, author: number.isMultiple(of: 2) ? "even" : nil))
        }
        let (low, high) = (tokens[2], tokens[7])
        #expect(
            Self.tokens(
                try store.fetchHistory(HistoryDescriptor(predicate: #Predicate { $0.token > low && $0.token <= high })))
                == Array(tokens[3...7]))
        #expect(
            Self.tokens(
                try store.fetchHistory(HistoryDescriptor(predicate: #Predicate { low <= $0.token && high > $0.token })))
                == Array(tokens[2...6]))
        var limited = HistoryDescriptor<DefaultHistoryTransaction>(predicate: #Predicate { $0.token > low })
        limited.fetchLimit = 3
        #expect(Self.tokens(try store.fetchHistory(limited)) == Array(tokens[3...5]))
        var newestFirst = HistoryDescriptor<DefaultHistoryTransaction>(sortBy: [
            SortDescriptor(\.transactionIdentifier, order: .reverse)
        ])
        newestFirst.fetchLimit = 2
        #expect(Self.tokens(try store.fetchHistory(newestFirst)) == [tokens[9], tokens[8]])
        #expect(try store.fetchHistory(Self.after(tokens[9])).isEmpty)
    }

    /// A fetch's transactions are places in one batch (``HistoryBatch``): setting a field or
    /// typing one makes it an object of its own with the same fields and changes, leaving the
    /// others as they were, and it equals a transaction made from its fields.
    @Test func aTransactionOfABatchIsSetTypedAndComparedAsOneOfItsOwn() throws {
        let (container, store) = try Self.open(SimulatedFileSystem())
        for number in 0..<6 { try Self.saveTrip(container, number, author: number.isMultiple(of: 3) ? "widget" : "app") }
        let fetched = try store.fetchHistory(HistoryDescriptor())
        #expect(fetched.count == 6)
        #expect(fetched.allSatisfy { $0.batchCount == 6 })
        let original = fetched[3]
        let made = DefaultHistoryTransaction(
            token: original.token, author: original.author, timestamp: original.timestamp,
            storeIdentifier: original.storeIdentifier, processIdentifier: original.processIdentifier,
            changes: original.changes)
        #expect(made.batchCount == nil)
        #expect(made == original && original == made && made.hashValue == original.hashValue)
        var edited = original
        edited.author = "edited"
        #expect(edited.batchCount == nil)
        #expect(edited.author == "edited" && original.author == "widget" && fetched[3].author == "widget")
        #expect(edited.timestamp == original.timestamp && edited.processIdentifier == original.processIdentifier)
        #expect(edited.changes == original.changes && edited != original)
        let typed = try ModelContext(container).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        #expect(typed.map(\.token) == fetched.map(\.token) && typed.map(\.author) == fetched.map(\.author))
        guard case .insert(let insert) = typed[3].changes.first else {
            Issue.record("the typed transaction has no insert")
            return
        }
        #expect(insert is DefaultHistoryInsert<Trip>)
        try store.close()
    }

    /// What a fetch returns holds only what it returns: a transaction its predicate rejects is
    /// taken back out of the batch, and the few a sorted fetch's limit keeps of many detach from
    /// it. Seen failing without either (batches of 40; transactions in a batch).
    @Test func aFetchKeepsInItsBatchOnlyWhatItReturns() throws {
        let (container, store) = try Self.open(SimulatedFileSystem())
        var tokens: [DefaultHistoryToken] = []
        for number in 0..<40 {
            tokens.append(try Self.saveTrip(container, number, author: number.isMultiple(of: 4) ? "widget" : "app"))
        }
        // Evaluated in memory (not pushed down): every transaction is read, a quarter kept.
        let everyFourth = #Predicate<DefaultHistoryTransaction> { $0.author == "widget" || $0.changes.count == 0 }
        let filtered = try store.fetchHistory(HistoryDescriptor(predicate: everyFourth))
        #expect(Self.tokens(filtered) == stride(from: 0, to: 40, by: 4).map { tokens[$0] })
        #expect(filtered.allSatisfy { $0.batchCount == 10 })
        #expect(filtered.allSatisfy { $0.author == "widget" && $0.changes.count == 1 })
        var newestTwo = HistoryDescriptor<DefaultHistoryTransaction>(sortBy: [
            SortDescriptor(\.transactionIdentifier, order: .reverse)
        ])
        newestTwo.fetchLimit = 2
        let newest = try store.fetchHistory(newestTwo)
        #expect(Self.tokens(newest) == [tokens[39], tokens[38]])
        #expect(newest.allSatisfy { $0.batchCount == nil })
        #expect(newest.map(\.author) == ["app", "app"] && newest.allSatisfy { $0.changes.count == 1 })
        try store.close()
    }

    /// Tokens are checked before anything is evaluated: another store's, one past the end, and
    /// one whose check does not match each throw their own error.
    @Test func badTokensThrowTheirOwnErrors() throws {
        let (container, store) = try Self.open(SimulatedFileSystem())
        let token = try Self.saveTrip(container, 1)
        try Self.saveTrip(container, 2)
        let foreign = DefaultHistoryToken(storeIdentifier: UUID(), offset: token.offset, check: token.check)
        #expect(throws: LogStoreError.historyTokenOfAnotherStore(foreign, store: store.log.storeID)) {
            try store.fetchHistory(Self.after(foreign))
        }
        let beyond = DefaultHistoryToken(storeIdentifier: token.storeIdentifier, offset: store.logEndOffset + 10, check: 1)
        #expect(throws: LogStoreError.historyTokenBeyondEnd(beyond, end: store.logEndOffset)) {
            try store.fetchHistory(Self.after(beyond))
        }
        let wrongCheck = DefaultHistoryToken(
            storeIdentifier: token.storeIdentifier, offset: token.offset, check: token.check ^ 1)
        do {
            _ = try store.fetchHistory(Self.after(wrongCheck))
            Issue.record("a token with the wrong check was accepted")
        } catch let error as LogStoreError where error.code == .historyTokenInvalid {
            #expect(error.token == wrongCheck)
        }
        let inside = DefaultHistoryToken(storeIdentifier: token.storeIdentifier, offset: token.offset + 1, check: token.check)
        #expect {
            try store.fetchHistory(HistoryDescriptor(predicate: #Predicate { $0.token < inside }))
        } throws: { error in
            if case LogStoreError.historyTokenInvalid = error { return true }
            return false
        }
    }

    /// A save lost in a power cut, whose offset a new save then reuses: the old token is invalid.
    @Test func aTokenFromALostTailIsInvalid() throws {
        let fileSystem = SimulatedFileSystem()
        let (container, store) = try Self.open(fileSystem, durability: .none)
        try Self.saveTrip(container, 1)
        try store.log.sync()
        let lost = try Self.saveTrip(container, 2, author: "lost")
        let cut = fileSystem.powerCut(.nothingUnsynced)
        try store.close()

        let (reopenedContainer, reopened) = try Self.open(cut, durability: .none)
        let reused = try Self.saveTrip(reopenedContainer, 3, author: "new")
        #expect(reused.offset == lost.offset)
        #expect(reused.check != lost.check)
        #expect {
            try reopened.fetchHistory(Self.after(lost))
        } throws: { error in
            if case LogStoreError.historyTokenInvalid = error { return (error as? LogStoreError)?.token == lost }
            return false
        }
        try reopened.close()
    }

    // MARK: deleteHistory

    /// With no consumers: after deleteHistory(token <= t), `token > t` returns exactly the later
    /// saves, any older token expires with resumeToken t, the state is untouched — and all of
    /// that again after reopening.
    @Test func deletingHistoryExpiresOlderTokens() throws {
        let fileSystem = SimulatedFileSystem()
        var (container, store) = try Self.open(fileSystem, segmentByteCountMax: 1024)
        var tokens: [DefaultHistoryToken] = []
        for number in 0..<40 { tokens.append(try Self.saveTrip(container, number)) }
        let stateBefore = store.allSnapshots()
        let segmentsBefore = store.log.segmentBaseOffsets.count
        let cutoff = tokens[24]
        let compaction = try store.deleteHistory(
            HistoryDescriptor(predicate: #Predicate { $0.token <= cutoff }), force: false)
        #expect(compaction.lowWaterMark == cutoff)
        #expect(!compaction.deletedSegments.isEmpty)
        #expect(store.log.segmentBaseOffsets.count == segmentsBefore - compaction.deletedSegments.count)
        #expect(compaction.reclaimedByteCount > 0)

        for round in 0..<2 {
            #expect(store.historyLowWaterMark == cutoff, "round \(round)")
            #expect(Self.tokens(try store.fetchHistory(Self.after(cutoff))) == Array(tokens[25...]), "round \(round)")
            #expect(Self.tokens(try store.fetchHistory(HistoryDescriptor())) == Array(tokens[25...]), "round \(round)")
            for older in [tokens[0], tokens[10], tokens[23]] {
                #expect(throws: LogStoreError.historyTokenExpired(resumeToken: cutoff)) {
                    try store.fetchHistory(Self.after(older))
                }
            }
            #expect(throws: LogStoreError.historyTokenExpired(resumeToken: cutoff)) {
                try store.fetchHistory(HistoryDescriptor(predicate: #Predicate { $0.token >= cutoff }))
            }
            // The state is untouched.
            #expect(store.allSnapshots() == stateBefore, "round \(round)")
            #expect(try ModelContext(container).fetchCount(FetchDescriptor<Trip>()) == 40)
            try store.close()
            (container, store) = try Self.open(fileSystem, segmentByteCountMax: 1024)
        }
        // Saves after the deletion carry on, and history folds from the checkpoint at L.
        let later = try Self.saveTrip(container, 100)
        #expect(Self.tokens(try store.fetchHistory(Self.after(tokens[39]))) == [later])
        try store.close()
    }

    /// A compacted store verifies clean; without the checkpoint at L, verify reports corruption
    /// and the open refuses instead of folding a partial log; replay and history read-only work.
    @Test func aCompactedStoreVerifiesAndNeedsItsCheckpoint() throws {
        let fileSystem = SimulatedFileSystem()
        let (container, store) = try Self.open(fileSystem, segmentByteCountMax: 1024)
        var tokens: [DefaultHistoryToken] = []
        for number in 0..<30 { tokens.append(try Self.saveTrip(container, number)) }
        let cutoff = tokens[20]
        try store.deleteHistory(HistoryDescriptor(predicate: #Predicate { $0.token <= cutoff }))
        let trips = store.allSnapshots()[Trip.entityName]
        try store.close()
        // Replay and time travel fold from the checkpoint at L; positions at or below L expired.
        let replayed = try LogStore.replay(directory: Self.directory, fileSystem: fileSystem)
        #expect(replayed.entity(named: Trip.entityName)?.rows == trips)
        let asOf = try LogStore.replay(directory: Self.directory, fileSystem: fileSystem, until: .token(tokens[25]))
        #expect(asOf.entity(named: Trip.entityName)?.rows.count == 26)
        for expired in [tokens[3], cutoff] {
            #expect(throws: LogStoreError.historyTokenExpired(resumeToken: cutoff)) {
                try LogStore.replay(directory: Self.directory, fileSystem: fileSystem, until: .token(expired))
            }
        }
        #expect(try Log.verify(directory: Self.directory, fileSystem: fileSystem).problems == [])
        let readOnly = try LogStore.fetchHistory(directory: Self.directory, fileSystem: fileSystem, HistoryDescriptor())
        #expect(Self.tokens(readOnly) == Array(tokens[21...]))
        #expect(throws: LogStoreError.historyTokenExpired(resumeToken: cutoff)) {
            try LogStore.fetchHistory(directory: Self.directory, fileSystem: fileSystem, Self.after(tokens[3]))
        }

        for name in try fileSystem.contentsOfDirectory(Self.directory) where CheckpointFileName.offset(name) != nil {
            try fileSystem.removeFile(Self.directory + "/" + name)
        }
        #expect(try Log.verify(directory: Self.directory, fileSystem: fileSystem).hasCorruption)
        #expect(throws: LogStoreError.self) { _ = try Self.open(fileSystem, segmentByteCountMax: 1024) }
    }

    /// On a full disk a save fails; once a checkpoint records L, compaction writes no file (it
    /// only deletes segments), so it completes and frees space: the next save works (D7).
    @Test func compactionFreesSpaceOnAFullDisk() throws {
        let fileSystem = SimulatedFileSystem()
        let (container, store) = try Self.open(fileSystem, segmentByteCountMax: 1024)
        var tokens: [DefaultHistoryToken] = []
        for number in 0..<30 { tokens.append(try Self.saveTrip(container, number)) }
        let cutoff = tokens[20]
        // The first attempt records L (checkpoint written) but cannot delete the segments.
        fileSystem.failRemove(path: .suffix(".log"))
        #expect(throws: (any Error).self) {
            try store.deleteHistory(HistoryDescriptor(predicate: #Predicate { $0.token <= cutoff }))
        }
        fileSystem.clearFaults()
        #expect(store.historyLowWaterMark == cutoff)
        // The disk fills up.
        fileSystem.setCapacity(byteCount: fileSystem.usedByteCount)
        #expect(throws: (any Error).self) {
            for number in 100..<140 { try Self.saveTrip(container, number) }
        }
        let used = fileSystem.usedByteCount
        let compaction = try store.deleteHistory(
            HistoryDescriptor(predicate: #Predicate { $0.token <= cutoff }), force: false)
        #expect(!compaction.deletedSegments.isEmpty)
        #expect(fileSystem.usedByteCount < used)
        try Self.saveTrip(container, 200)
        try store.close()
    }

    /// deleteHistory() with no predicate deletes everything up to the newest transaction but
    /// never the segment being written; saves after it survive a reopen.
    @Test func deletingAllHistoryKeepsTheSegmentBeingWritten() throws {
        let fileSystem = SimulatedFileSystem()
        let (container, store) = try Self.open(fileSystem, segmentByteCountMax: 1024)
        for number in 0..<30 { try Self.saveTrip(container, number) }
        let newest = try #require(store.currentToken)
        let lastSegment = try #require(store.log.segmentBaseOffsets.last)
        try ModelContext(container).deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        #expect(store.historyLowWaterMark == newest)
        #expect(store.log.segmentBaseOffsets == [lastSegment])
        #expect(try store.fetchHistory(HistoryDescriptor()).isEmpty)
        let after = try Self.saveTrip(container, 31)
        let state = store.allSnapshots()
        try store.close()

        let (_, reopened) = try Self.open(fileSystem, segmentByteCountMax: 1024)
        #expect(reopened.allSnapshots() == state)
        #expect(Self.tokens(try reopened.fetchHistory(Self.after(newest))) == [after])
        try reopened.close()
    }

    /// Only upper bounds on token and timestamp (or none) are accepted.
    @Test func deleteHistoryAcceptsOnlyUpperBounds() throws {
        let (container, store) = try Self.open(SimulatedFileSystem())
        let first = try Self.saveTrip(container, 1, author: "a")
        let second = try Self.saveTrip(container, 2, author: "a")
        for predicate in [
            #Predicate<DefaultHistoryTransaction> { $0.author == "a" },
            #Predicate<DefaultHistoryTransaction> { $0.token > first },
            #Predicate<DefaultHistoryTransaction> { $0.token <= second || $0.author == nil },
        ] {
            #expect {
                try store.deleteHistory(HistoryDescriptor(predicate: predicate))
            } throws: { error in
                if case LogStoreError.unsupportedFeature = error { return true }
                return false
            }
        }
        #expect(store.historyLowWaterMark == nil)
        // A timestamp bound (ANDed with a token bound) is accepted: everything saved up to now, but
        // not past `second`.
        let now = Date()
        try store.deleteHistory(HistoryDescriptor(predicate: #Predicate { $0.timestamp <= now && $0.token < second }))
        #expect(store.historyLowWaterMark == first)
        try store.deleteHistory(HistoryDescriptor(predicate: #Predicate { $0.timestamp < now }))
        #expect(store.historyLowWaterMark == second)
    }

    /// A registered consumer's bookmark older than t holds the deletion back unless forced; once
    /// forced past it, the consumer's next fetch from its bookmark expires.
    @Test func consumersHoldHistoryBack() throws {
        let fileSystem = SimulatedFileSystem()
        var (container, store) = try Self.open(fileSystem, segmentByteCountMax: 1024)
        var tokens: [DefaultHistoryToken] = []
        for number in 0..<20 { tokens.append(try Self.saveTrip(container, number)) }
        try store.registerHistoryConsumer("sync", after: tokens[5])
        try store.registerHistoryConsumer("widget")
        try store.acknowledgeHistory("widget", through: tokens[12])
        #expect(store.historyConsumers.map(\.name) == ["sync", "widget"])
        let cutoff = tokens[15]
        let clamped = try store.deleteHistory(
            HistoryDescriptor(predicate: #Predicate { $0.token <= cutoff }), force: false)
        #expect(clamped.lowWaterMark == tokens[5])
        #expect(clamped.heldBackByConsumer == "sync")
        #expect(Self.tokens(try store.fetchHistory(Self.after(tokens[5]))) == Array(tokens[6...]))

        // Bookmarks are records in the log: they survive a reopen.
        try store.close()
        (container, store) = try Self.open(fileSystem, segmentByteCountMax: 1024)
        #expect(store.historyConsumers.map(\.token) == [tokens[5], tokens[12]])
        try store.acknowledgeHistory("sync", through: tokens[9])
        // Held back by the acknowledged bookmark: L stops at tokens[9].
        try store.deleteHistory(HistoryDescriptor(predicate: #Predicate { $0.token <= cutoff }))
        #expect(store.historyLowWaterMark == tokens[9])
        try store.deleteHistory(HistoryDescriptor(predicate: #Predicate { $0.token <= cutoff }), force: true)
        #expect(store.historyLowWaterMark == cutoff)
        #expect(throws: LogStoreError.historyTokenExpired(resumeToken: cutoff)) {
            try store.fetchHistory(Self.after(tokens[12]))
        }
        try store.unregisterHistoryConsumer("sync")
        #expect(throws: LogStoreError.unknownConsumer("sync")) {
            try store.acknowledgeHistory("sync", through: tokens[19])
        }
        try store.close()
    }

    // MARK: Properties

    /// Random saves (inserts, updates, cascade deletes) by random authors: history after any
    /// token is exactly the saves made after it, in order; folding all history from an empty
    /// state gives the current state.
    @Test(arguments: 0..<6)
    func historyIsExactlyTheSaves(seed: Int) throws {
        var random = CheckpointTests.Random(state: UInt64(seed) &* 7919 &+ 11)
        var names = 0
        let (container, store) = try Self.open(SimulatedFileSystem(), segmentByteCountMax: 2048)
        var saves: [DefaultHistoryToken] = []
        for _ in 0..<30 {
            let before = store.currentToken
            try CheckpointTests.randomSaves(container, count: 1, random: &random, names: &names)
            if let token = store.currentToken, token != before { saves.append(token) }
        }
        #expect(Self.tokens(try store.fetchHistory(HistoryDescriptor())) == saves)
        for (index, token) in saves.enumerated() {
            #expect(Self.tokens(try store.fetchHistory(Self.after(token))) == Array(saves[(index + 1)...]))
        }
        var folded = FoldState()
        for transaction in try store.fetchHistory(HistoryDescriptor()) {
            for change in transaction.changes { folded.apply(change.resolved) }
        }
        #expect(Self.snapshots(folded, store: store) == store.allSnapshots())
    }

    static func snapshots(_ state: FoldState, store: LogStore) -> [String: [DefaultSnapshot]] {
        var result: [String: [DefaultSnapshot]] = [:]
        for entity in store.schema.entities {
            result[entity.name] = state.rows(of: entity.name).map {
                DefaultSnapshot(
                    persistentIdentifier: .permanent(for: store.identifier, entityName: entity.name, primaryKey: $0.0),
                    values: $0.1.values.dictionary)
            }
        }
        return result
    }

    // MARK: Crash-safe compaction

    /// A fault at each step of a compaction (checkpoint write, rename, directory syncs, each
    /// pruned checkpoint, index and segment unlink) stops it there; a power cut then leaves a
    /// store that opens with the same state and L either the old or the new one — the new one
    /// whenever the deletion returned — with later history intact, and a second compaction from
    /// there works. Seeds vary the path: the state after L folded from the log start (no
    /// checkpoint), from a checkpoint, or copied (L is the newest transaction).
    @Test(arguments: 0..<19)
    func aPowerCutAtAnyStepOfCompactionLosesNothing(point: Int) throws {
        for seed in 0..<3 {
            let fileSystem = SimulatedFileSystem()
            let (container, store) = try Self.open(fileSystem, segmentByteCountMax: 1024)
            var tokens: [DefaultHistoryToken] = []
            for number in 0..<30 { tokens.append(try Self.saveTrip(container, number)) }
            if seed == 1 { _ = try store.checkpoint() }
            let count = seed == 2 ? 34 : 40
            for number in 30..<count { tokens.append(try Self.saveTrip(container, number)) }
            let expected = store.allSnapshots()
            let cutoff = tokens[33]
            let directory = SimulatedFileSystem.PathFilter.exactly(Self.directory)
            switch point {
            case 0: fileSystem.failOpen(path: .suffix(".ckpt.tmp"))
            case 1: fileSystem.failWrite(after: 1, path: .suffix(".ckpt.tmp"))
            case 2: fileSystem.failSync(path: .suffix(".ckpt.tmp"))
            case 3: fileSystem.failRename(path: .suffix(".ckpt"))
            case 4...12: fileSystem.failSyncDirectory(after: point - 4, path: directory)
            case 13...14: fileSystem.failRemove(after: point - 13, path: .suffix(".log"))
            case 15: fileSystem.failRemove(after: 1, path: .suffix(".index"))
            case 16: fileSystem.failRemove(path: .suffix(".ckpt"))
            default: break
            }
            var completed = false
            do {
                try store.deleteHistory(HistoryDescriptor(predicate: #Predicate { $0.token <= cutoff }), force: false)
                completed = true
            } catch {}
            let cut = fileSystem.powerCut(seed: UInt64(point * 10 + seed))
            fileSystem.clearFaults()
            try? store.close()

            let (reopenedContainer, reopened) = try Self.open(cut, segmentByteCountMax: 1024)
            let context = "point \(point) seed \(seed)"
            #expect(reopened.allSnapshots() == expected, "\(context)")
            let mark = reopened.historyLowWaterMark
            #expect(mark == nil || mark == cutoff, "\(context)")
            if completed { #expect(mark == cutoff, "\(context)") }
            #expect(Self.tokens(try reopened.fetchHistory(Self.after(cutoff))) == Array(tokens[34...]), "\(context)")
            if mark == cutoff {
                // The reopen finished the deletion: no segment wholly at or below L is left.
                let bases = reopened.log.segmentBaseOffsets
                #expect(bases.count == 1 || bases[1] > cutoff.offset, "\(context): \(bases)")
            }
            // And the next compaction, folding from whatever the cut left, agrees.
            let later = try Self.saveTrip(reopenedContainer, 99)
            let second = tokens[count - 1]
            try reopened.deleteHistory(HistoryDescriptor(predicate: #Predicate { $0.token <= second }))
            #expect(reopened.historyLowWaterMark == second, "\(context)")
            #expect(Self.tokens(try reopened.fetchHistory(HistoryDescriptor())) == [later], "\(context)")
            let state = reopened.allSnapshots()
            try reopened.close()
            let (_, third) = try Self.open(cut, segmentByteCountMax: 1024)
            #expect(third.allSnapshots() == state, "\(context)")
            try third.close()
        }
    }
}

/// The live tail (D10), retention (D7) and the seek cost of a token bound.
@Suite struct HistoryTailAndRetentionTests {
    typealias H = HistoryTests

    /// The tail yields what is retained after its token, then each new save as it happens.
    @Test func theTailYieldsNewSavesAsTheyHappen() async throws {
        let (container, store) = try H.open(SimulatedFileSystem())
        let first = try H.saveTrip(container, 0)
        let second = try H.saveTrip(container, 1)
        let received = Task { () -> [DefaultHistoryToken] in
            var tokens: [DefaultHistoryToken] = []
            for try await transaction in store.historyTail(after: first) {
                tokens.append(transaction.token)
                if tokens.count == 3 { break }
            }
            return tokens
        }
        try await Task.sleep(for: .milliseconds(50))
        let third = try H.saveTrip(container, 2)
        try await Task.sleep(for: .milliseconds(20))
        let fourth = try H.saveTrip(container, 3)
        #expect(try await received.value == [second, third, fourth])
        try store.close()
    }

    /// Cancelling the task ends the tail; closing the store ends it too.
    @Test func theTailEndsOnCancellationAndClose() async throws {
        let (container, store) = try H.open(SimulatedFileSystem())
        try H.saveTrip(container, 0)
        let waiting = Task { () -> Int in
            var count = 0
            for try await _ in store.historyTail() { count += 1 }
            return count
        }
        try await Task.sleep(for: .milliseconds(50))
        waiting.cancel()
        #expect(try await waiting.value == 1)

        let untilClose = Task { () -> Int in
            var count = 0
            for try await _ in store.historyTail(after: store.currentToken) { count += 1 }
            return count
        }
        try await Task.sleep(for: .milliseconds(50))
        try store.close()
        #expect(try await untilClose.value == 0)
    }

    /// A tail whose position history deletion passes throws historyTokenExpired with L.
    @Test func theTailExpiresWhenDeletionPassesIt() async throws {
        let (container, store) = try H.open(SimulatedFileSystem())
        var tokens: [DefaultHistoryToken] = []
        for number in 0..<4 { tokens.append(try H.saveTrip(container, number)) }
        var iterator = store.historyTail(after: tokens[0]).makeAsyncIterator()
        #expect(try await iterator.next()?.token == tokens[1])
        let cutoff = tokens[2]
        try store.deleteHistory(HistoryDescriptor(predicate: #Predicate { $0.token <= cutoff }))
        await #expect(throws: LogStoreError.historyTokenExpired(resumeToken: cutoff)) { _ = try await iterator.next() }
        // A tail from L itself reads on.
        var resumed = store.historyTail(after: cutoff).makeAsyncIterator()
        #expect(try await resumed.next()?.token == tokens[3])
        try store.close()
    }

    /// The byte limit keeps about that much history (plus at most a segment); the age limit
    /// deletes what is older; a consumer holds both back until it lags or idles too long, and
    /// is then dropped (its next fetch from its bookmark expires).
    @Test func retentionLimitsHistoryAndDropsLaggingConsumers() throws {
        let (container, store) = try H.open(SimulatedFileSystem(), segmentByteCountMax: 1024)
        var tokens: [DefaultHistoryToken] = []
        for number in 0..<60 { tokens.append(try H.saveTrip(container, number)) }
        try store.registerHistoryConsumer("laggard", after: tokens[3])
        let byBytes = HistoryRetention(historyByteCountMax: 2048)
        let heldBack = try store.applyRetention(byBytes)
        #expect(heldBack.lowWaterMark == tokens[3])
        #expect(heldBack.heldBackByConsumer == "laggard")

        let dropping = HistoryRetention(historyByteCountMax: 2048, consumerLagByteCountMax: 4096)
        let compaction = try store.applyRetention(dropping)
        #expect(compaction.droppedConsumers == ["laggard"])
        #expect(store.historyConsumers.isEmpty)
        let mark = try #require(compaction.lowWaterMark)
        #expect(store.logEndOffset - mark.offset <= 2048 + 300)
        #expect(store.logEndOffset - store.log.startOffset <= 2048 + 1024 + 300)
        #expect(throws: LogStoreError.historyTokenExpired(resumeToken: mark)) {
            try store.fetchHistory(H.after(tokens[3]))
        }
        let retained = try store.fetchHistory(HistoryDescriptor())
        #expect(retained.first.map { $0.token.offset >= store.logEndOffset - 2048 } == true)
        #expect(H.tokens(retained) == tokens.filter { $0 > mark })

        // Age: what was saved before the pause goes, what was saved after stays.
        Thread.sleep(forTimeInterval: 0.4)
        let recent = try H.saveTrip(container, 100)
        try store.applyRetention(HistoryRetention(historyAgeMax: .milliseconds(200)))
        #expect(store.historyLowWaterMark == tokens[59])
        #expect(H.tokens(try store.fetchHistory(HistoryDescriptor())) == [recent])
        try store.close()
    }

    /// With limits in the configuration, retention runs by itself after saves, off the save path.
    @Test func retentionRunsInTheBackground() throws {
        let fileSystem = SimulatedFileSystem()
        var configuration = LogStoreConfiguration(
            directory: H.directory, segmentByteCountMax: 1024,
            checkpointIntervalByteCount: 0, fileSystem: fileSystem)
        configuration.historyRetention = HistoryRetention(historyByteCountMax: 2048)
        let container = try ModelContainer(for: sampleTripsModels, configuration: configuration)
        let store = try #require(container.dataStore(as: LogStore.self))
        for number in 0..<40 { try H.saveTrip(container, number) }
        let deadline = Date().addingTimeInterval(10)
        while store.log.startOffset == 0 || store.logEndOffset - store.log.startOffset > 2048 + 1024 + 300 {
            guard Date() < deadline else { break }
            try H.saveTrip(container, 1000 + Int(store.logEndOffset % 1000))
            Thread.sleep(forTimeInterval: 0.05)
        }
        #expect(store.log.startOffset > 0)
        #expect(store.logEndOffset - store.log.startOffset <= 2048 + 1024 + 300)
        try store.close()
    }

    /// Fetching 1,000 transactions after a token near the end reads about 1,000 records whatever
    /// the log's length: the seek goes through the segment list and the sparse index.
    @Test func seekCostDoesNotGrowWithTheLog() throws {
        let long = ProcessInfo.processInfo.environment["LOGSTORE_LONG"] != nil
        var reads: [Int: Int] = [:]
        for count in [10_000, long ? 1_000_000 : 200_000] {
            let temporary = TemporaryDirectory("seek")
            let directory = temporary.path
            defer { temporary.remove() }
            let configuration = LogStoreConfiguration(
                directory: directory, durability: .none, checkpointIntervalByteCount: 0)
            let container = try ModelContainer(for: sampleTripsModels, configuration: configuration)
            let store = try #require(container.dataStore(as: LogStore.self))
            try H.saveTrip(container, 0, author: "seed")
            // The same encoded save, appended `count` times straight to the log (fast; history
            // reading does not care that the changes repeat).
            let seed = try #require(store.currentToken)
            let payload = try #require(try store.log.firstRecord(atOrAfter: seed.offset)).payload
            var positions: [LogPosition] = []
            positions.reserveCapacity(count)
            for _ in 0..<count { positions.append(try store.log.write(payload, type: .transaction)) }
            let near = positions[count - 1_001]
            let token = DefaultHistoryToken(storeIdentifier: store.log.storeID, offset: near.offset, check: near.payloadCRC)
            var descriptor = H.after(token)
            descriptor.fetchLimit = 1_000
            let fetched = try store.fetchHistoryCounting(descriptor)
            #expect(fetched.transactions.count == 1_000)
            #expect(fetched.transactions.first?.token.offset == positions[count - 1_000].offset)
            let byAuthor = try store.fetchHistoryCounting(
                HistoryDescriptor(
                    predicate: #Predicate {
                        $0.token > token && $0.author == "seed"
                    }))
            #expect(byAuthor.transactions.count == 1_000)
            reads[count] = fetched.recordsRead
            // The index keeps a record start every indexIntervalByteCount bytes of log (records
            // as stored: compressed against the segment's dictionary, FORMAT.md §6.8).
            let recordByteCount = Int(positions[count - 1].endOffset - positions[count - 1].offset)
            let perInterval = Int(FormatConstants.indexIntervalByteCount) / recordByteCount + 2
            #expect(
                fetched.recordsRead <= 1_000 + perInterval + 1,
                "\(count) transactions: \(fetched.recordsRead) records read")
            // The records between the index entry and the token are passed over by their headers
            // alone (not read): the token's record, the 1,000 after it, and at most a durable-end
            // mark or two the syncer may have put among them.
            #expect(fetched.recordsRead <= 1_003, "\(count) transactions: \(fetched.recordsRead) records read")
            #expect(byAuthor.recordsRead <= 1_000 + perInterval + 1)
            try store.close()
        }
        print("records read for 1,000 transactions after a token near the end:", reads.sorted { $0.key < $1.key })
    }
}

/// The token literals a history query validates, found by walking the expression tree through
/// views of the common nodes (no reflection there), against a walk that reflects every node.
@Suite struct HistoryTokenLiteralTests {
    /// Every `DefaultHistoryToken` in the tree by reflection alone: the independent answer.
    static func reflected(_ expression: Any) -> [DefaultHistoryToken] {
        var found: [DefaultHistoryToken] = []
        var worklist: [Any] = [expression]
        while let next = worklist.popLast() {
            if let token = next as? DefaultHistoryToken {
                found.append(token)
                continue
            }
            worklist += Mirror(reflecting: next).children.map(\.value)
        }
        return found
    }

    @Test func theWalkFindsWhatReflectionFindsInEveryShape() {
        let store = UUID()
        let (a, b, c) = (
            DefaultHistoryToken(storeIdentifier: store, offset: 10, check: 1),
            DefaultHistoryToken(storeIdentifier: store, offset: 20, check: 2),
            DefaultHistoryToken(storeIdentifier: UUID(), offset: 30, check: 3)
        )
        let optional: DefaultHistoryToken? = b
        let listed = [a, c]
        let name = "widget"
        let shapes: [(Predicate<DefaultHistoryTransaction>, [DefaultHistoryToken])] = [
            (#Predicate { $0.token > a }, [a]),
            (#Predicate { a < $0.token }, [a]),
            (#Predicate { $0.token > a && $0.author == name }, [a]),
            (#Predicate { $0.author == name && $0.token >= a && $0.token < b }, [a, b]),
            (#Predicate { $0.token <= a || $0.token > c }, [a, c]),
            (#Predicate { !($0.token > b) }, [b]),
            (#Predicate { $0.token == a || $0.token != b }, [a, b]),
            (#Predicate { (optional ?? c) == $0.token }, [b, c]),
            (#Predicate { listed.contains($0.token) }, [a, c]),
            (#Predicate { $0.author == nil && ($0.token > a ? $0.token < c : false) }, [a, c]),
            (#Predicate { $0.author != name }, []),
        ]
        for (index, (predicate, expected)) in shapes.enumerated() {
            let walked = HistoryQuery.tokenLiterals(in: predicate.expression)
            #expect(walked == Self.reflected(predicate.expression), "shape \(index)")
            #expect(Set(walked.map(\.offset)) == Set(expected.map(\.offset)), "shape \(index)")
            #expect(HistoryQuery(predicate).tokenLiterals == walked, "shape \(index)")
        }
    }
}

/// History push-down against `Predicate.evaluate`: random authors (nil, mixed case, composed and
/// decomposed "é"), a catalogue of predicate shapes with random token constants, limits.
@Suite struct HistoryPushDownTests {
    @Test(arguments: 0..<4)
    func pushedDownEqualsEvaluate(seed: Int) throws {
        var random = CheckpointTests.Random(state: UInt64(seed) &+ 77)
        let (container, store) = try HistoryTests.open(SimulatedFileSystem())
        // The Kelvin sign is canonically equivalent to "K": an ASCII operand and a non-ASCII author
        // can still be equal strings.
        let authors: [String?] = [nil, "app", "App", "widget", "caf\u{e9}", "cafe\u{301}", "", "K", "\u{212A}"]
        var tokens: [DefaultHistoryToken] = []
        for number in 0..<24 {
            tokens.append(try HistoryTests.saveTrip(container, number, author: authors.randomElement(using: &random)!))
        }
        let all = try store.fetchHistory(HistoryDescriptor())
        #expect(HistoryTests.tokens(all) == tokens)
        for _ in 0..<40 {
            let low = tokens.randomElement(using: &random)!
            let high = tokens.randomElement(using: &random)!
            let name = authors.randomElement(using: &random)!
            let catalogue: [Predicate<DefaultHistoryTransaction>] = [
                #Predicate { $0.token > low },
                #Predicate { $0.token >= low && $0.token < high },
                #Predicate { low < $0.token && high >= $0.token },
                #Predicate { $0.author == name },
                #Predicate { $0.author != name },
                #Predicate { name == $0.author && $0.token > low },
                #Predicate { $0.author == nil || $0.token <= high },
                #Predicate { !($0.author == name) },
                #Predicate { $0.token > low && $0.author != nil && $0.author != "app" },
                #Predicate { $0.token > low && ($0.author ?? "") == "caf\u{e9}" },
                #Predicate { $0.token > low && $0.token > high && $0.author != name },
            ]
            // Shapes 0–5 and 8 are answered without Predicate.evaluate; the others need it.
            #expect(
                catalogue.map { HistoryQuery($0).needsEvaluation }
                    == [false, false, false, false, false, false, true, true, false, true, false])
            for (index, predicate) in catalogue.enumerated() {
                let expected = try all.filter { try predicate.evaluate($0) }
                var descriptor = HistoryDescriptor<DefaultHistoryTransaction>(predicate: predicate)
                #expect(try store.fetchHistory(descriptor) == expected, "shape \(index)")
                let limit = Int.random(in: 0...5, using: &random)
                descriptor.fetchLimit = limit
                #expect(
                    try store.fetchHistory(descriptor) == Array(expected.prefix(limit)), "shape \(index) limit \(limit)"
                )
            }
        }
        try store.close()
    }
}
