import Foundation
import LogStoreEngine

/// Reads transactions out of a log for `fetchHistory`, the live tail and `logstore history`
/// (DECISIONS.md D6): validates token literals, seeks to the lower bound through the sparse
/// index, skips everything at or below the low-water mark, tests token bounds and authors
/// without decoding changes, and evaluates only what is left.
struct HistoryReader {
    let log: Log
    /// The newest intern table (tables only grow, so it decodes every record).
    let table: SchemaTable
    /// L: transactions at or below it are invisible; tokens below it have expired.
    let lowWaterMark: DefaultHistoryToken?
    /// The log's first offset, read *before* L: a compaction publishes L before it deletes
    /// segments, so every record before this offset is at or below L. (Reading the log's start
    /// later could skip records a concurrent compaction deleted after this L was read.)
    let logStartOffset: UInt64

    /// The table's lookups, built once per reader (not per record).
    let decoder: TransactionRecord.Decoder

    /// The open store's author index (D6), read and extended by fetches with an author filter;
    /// `nil` reads every record (a reader made for one pass, such as `logstore history`).
    let authorIndex: HistoryAuthorIndex?

    init(
        log: Log, table: SchemaTable, lowWaterMark: DefaultHistoryToken?, logStartOffset: UInt64,
        authorIndex: HistoryAuthorIndex? = nil
    ) {
        self.log = log
        self.authorIndex = authorIndex
        self.table = table
        self.lowWaterMark = lowWaterMark
        self.logStartOffset = logStartOffset
        storeID = log.storeID
        storeIdentifier = storeID.uuidString
        decoder = TransactionRecord.Decoder(table: table, storeIdentifier: storeIdentifier)
    }

    /// The store's UUID as a string, made once (every transaction carries it).
    let storeIdentifier: String
    let storeID: UUID

    struct Fetched<Transaction> {
        var transactions: [Transaction]
        /// Records read from the log, including those the seek skipped.
        var recordsRead: Int
    }

    /// Checks every token in the query as D6 says: another store's token, one past the visible
    /// end, a lower bound into deleted history, and a token whose check does not match the record
    /// at its offset each throw their own error — before anything is evaluated.
    ///
    /// `deferring`: a token whose record the caller reads itself, as the first record of its
    /// iteration, and checks with ``check(_:against:)`` (``fetch(_:)``, ``deferredCheck(of:)``).
    func validate(_ query: HistoryQuery, deferring deferred: DefaultHistoryToken? = nil) throws(LogStoreError) {
        let end = log.visibleEnd
        for token in query.tokenLiterals {
            guard token.storeIdentifier == log.storeID else {
                throw .historyTokenOfAnotherStore(token, store: log.storeID)
            }
            guard token.offset < end else { throw .historyTokenBeyondEnd(token, end: end) }
        }
        if let bound = query.tokenLowerBound { try checkNotExpired(bound.value, inclusive: bound.inclusive) }
        for token in query.tokenLiterals where token != deferred { try verify(token) }
    }

    /// The query's lower bound when ``verify(_:)`` would read its record and the iteration starts
    /// right there (or just after it): the fetch reads that record once, as the token's check and
    /// as where it starts, instead of seeking to it twice (3.5 % of P6's fetch of 1,000
    /// transactions). Only when it is the query's one token literal, so every error is still
    /// thrown in the order ``validate(_:deferring:)`` alone would throw it.
    func deferredCheck(of query: HistoryQuery) -> DefaultHistoryToken? {
        guard let bound = query.tokenLowerBound, query.tokenLiterals == [bound.value],
            bound.value.storeIdentifier == log.storeID, isCheckedAgainstItsRecord(bound.value)
        else { return nil }
        return bound.value
    }

    /// Whether ``verify(_:)`` checks `token` against the record at its offset: one in the kept
    /// log, past L (a token at L is checked against L).
    private func isCheckedAgainstItsRecord(_ token: DefaultHistoryToken) -> Bool {
        token.offset >= logStartOffset && lowWaterMark.map { token.offset > $0.offset } ?? true
    }

    /// `token > s` needs s ≥ L; `token >= s` needs s > L (D6).
    func checkNotExpired(_ token: DefaultHistoryToken, inclusive: Bool) throws(LogStoreError) {
        guard let mark = lowWaterMark else { return }
        if token.offset < mark.offset || (inclusive && token.offset == mark.offset) {
            throw .historyTokenExpired(resumeToken: mark)
        }
    }

    /// A token at L is checked against L; one in the kept log against its record.
    func verify(_ token: DefaultHistoryToken) throws(LogStoreError) {
        if let mark = lowWaterMark, token.offset == mark.offset {
            guard token.check == mark.check else {
                throw .historyTokenInvalid(
                    token,
                    reason: "the transaction at offset \(token.offset) has check "
                        + "\(mark.check), the token \(token.check)")
            }
            return
        }
        if let mark = lowWaterMark, token.offset > mark.offset, token.offset < logStartOffset {
            // Inside L's record (the records after it start at the log's start): no transaction.
            throw .historyTokenInvalid(token, reason: "no transaction starts at offset \(token.offset)")
        }
        guard isCheckedAgainstItsRecord(token) else { return }
        let record: LogRecord?
        do throws(LogError) { record = try log.firstRecord(atOrAfter: token.offset) } catch { throw .log(error) }
        try check(record.map { ($0.offset, $0.type, $0.payloadCRC) }, against: token)
    }

    /// `record`, the first record at or after `token`'s offset (marks skipped; `nil` at the end),
    /// is the transaction the token names.
    func check(_ record: (offset: UInt64, type: RecordType, payloadCRC: UInt32)?, against token: DefaultHistoryToken)
        throws(LogStoreError)
    {
        guard let record, record.offset == token.offset, record.type == .transaction else {
            throw .historyTokenInvalid(token, reason: "no transaction starts at offset \(token.offset)")
        }
        guard record.payloadCRC == token.check else {
            throw .historyTokenInvalid(
                token,
                reason: "the transaction at offset \(token.offset) has check "
                    + "\(record.payloadCRC), the token \(token.check) (a token from a lost tail or a restored backup)")
        }
    }

    /// Where reading starts: just after L, or at the lower bound, whichever is later.
    func startOffset(for query: HistoryQuery) -> UInt64 {
        var start = logStartOffset
        if let mark = lowWaterMark { start = max(start, mark.offset + 1) }
        if let bound = query.tokenLowerBound {
            start = max(start, bound.inclusive ? bound.value.offset : bound.value.offset + 1)
        }
        return start
    }

    /// The transactions the descriptor selects, in log order (or its sort), at most `fetchLimit`.
    func fetch(_ descriptor: HistoryDescriptor<DefaultHistoryTransaction>) throws -> Fetched<DefaultHistoryTransaction> {
        let query = HistoryQuery(descriptor.predicate)
        let limit = descriptor.sortBy.isEmpty ? descriptor.fetchLimit.map { max(0, $0) } : nil
        // A fetch that reads nothing still checks every token.
        let deferred = limit == 0 ? nil : deferredCheck(of: query)
        try validate(query, deferring: deferred)
        var fetched = Fetched<DefaultHistoryTransaction>(transactions: [], recordsRead: 0)
        if limit == 0 { return fetched }
        // Room for the limit (up to a bound a limit far past what a log holds cannot break), in
        // the result and in the batch: neither grows by copying what it took already.
        let room = limit.map { min($0, 4_096) } ?? 0
        fetched.transactions.reserveCapacity(room)
        // With a deferred check, reading starts at the lower bound's record, which the visit
        // checks first, before anything is evaluated (and takes when the bound includes it).
        let from = min(deferred?.offset ?? startOffset(for: query), log.visibleEnd)
        var records = try iterator(from: from)
        // Every record is read in place: tested (type, token bounds, author) where it lies, and
        // only a record taken is decoded, its payload copied into a chunk the fetch's transactions
        // share (an array per record, with its copy and free, was about a tenth of P6's fetch).
        // The visit's state in one struct the closures below capture without escaping: local
        // variables captured by a local function were boxed and checked for exclusive access on
        // every use (a tenth of the fetch).
        var visit = Visit(reader: self, query: query, capacity: room)
        // An author filter goes through the author index where it covers the log, and files the
        // authors of the records it reads elsewhere.
        if let authorIndex, !visit.authorTests.isEmpty {
            visit.indexing = AuthorIndexing(authorIndex.snapshot(), from: from, tests: visit.authorTests)
        }
        var unchecked = deferred
        // Bounded by the log's visible end: each pass reads one record.
        while true {
            if visit.indexing.isOn && unchecked == nil {
                if let failure = visit.indexing.advance(&records) { throw failure }
            }
            let read: Bool
            let checking = unchecked
            unchecked = nil
            do throws(LogError) {
                if let token = checking {
                    read = try records.next(inPlace: { visit.visit($0, checkingAgainst: token) })
                } else {
                    read = try records.next(inPlace: { visit.visit($0) })
                }
            } catch {
                throw LogStoreError.log(error)
            }
            guard read else {
                // Nothing at or after the token's offset: it names no transaction.
                if let token = checking { try check(nil, against: token) }
                break
            }
            if let failure = visit.failure { throw failure }
            if visit.pastUpperBound { break }
            if visit.indexing.isOn { visit.indexing.read(to: records.offset) }
            // Moved out and into the result, not copied.
            guard let transaction = visit.taken.take() else { continue }
            fetched.transactions.append(consume transaction)
            if query.needsEvaluation, let predicate = descriptor.predicate,
                try !predicate.evaluate(fetched.transactions[fetched.transactions.count - 1])
            {
                // Out of the batch too: the transactions kept would hold what was rejected.
                fetched.transactions.removeLast()
                visit.batch.discardLast()
                continue
            }
            if let limit, fetched.transactions.count >= limit { break }
        }
        fetched.recordsRead = records.recordsRead
        if let authorIndex, visit.indexing.isOn {
            visit.indexing.stop(at: visit.pastUpperBound ? visit.pastUpperBoundOffset : records.offset)
            let (runs, names, snapshotNameCount) = visit.indexing.takeRuns()
            authorIndex.file(
                runs, names: names, snapshotNameCount: snapshotNameCount, generation: visit.indexing.generation,
                logStart: logStartOffset, durableEnd: log.durableEnd)
        }
        if !descriptor.sortBy.isEmpty {
            fetched.transactions.sort(using: descriptor.sortBy)
            if let limit = descriptor.fetchLimit {
                fetched.transactions = Array(fetched.transactions.prefix(max(0, limit)))
            }
            // A limit applied after the sort may keep a few of many read: those few must not hold
            // the batch of everything read (each holds its own payload's chunk instead).
            if fetched.transactions.count < visit.batch.count / 2 {
                fetched.transactions = fetched.transactions.map { $0.detached() }
            }
        }
        return fetched
    }

    func iterator(from offset: UInt64) throws(LogStoreError) -> LogIterator {
        do throws(LogError) { return try log.records(from: min(offset, log.visibleEnd)) } catch { throw .log(error) }
    }

    /// The transaction a record holds: its header fields now, its changes when first asked for.
    /// `strings` holds the author and process identifier strings decoded last, reused while the
    /// records of a run repeat them.
    func decode(_ record: LogRecord, strings: inout TransactionRecord.RepeatedStrings) throws(LogStoreError)
        -> DefaultHistoryTransaction
    {
        let header = try header(at: record.offset) { () throws(ByteReaderError) in
            try TransactionRecord.decodeHeader(record.payload, processIdentifier: true, strings: &strings)
        }
        return DefaultHistoryTransaction(
            token: DefaultHistoryToken(storeIdentifier: storeID, offset: record.offset, check: record.payloadCRC),
            storage: HistoryChanges(payload: record.payload, decoder: decoder, offset: record.offset, header: header))
    }

    /// ``decode(_:strings:)`` of a record read in place: its header and payload go into the
    /// fetch's `batch`, and the transaction is its place there.
    func decode(
        _ view: LogRecordView, strings: inout TransactionRecord.RepeatedStrings, into batch: HistoryBatch
    ) throws(LogStoreError) -> DefaultHistoryTransaction {
        let header = try checkedHeader(at: view.offset) { () throws(ByteReaderError) in
            try TransactionRecord.decodeHeader(view.payload, processIdentifier: true, strings: &strings)
        }
        let index = batch.append(
            offset: view.offset, author: header.author, timestampMicroseconds: header.timestampMicroseconds,
            processIdentifier: header.processIdentifier, payload: view.payload)
        return DefaultHistoryTransaction(
            token: DefaultHistoryToken(storeIdentifier: storeID, offset: view.offset, check: view.payloadCRC),
            batch: batch, index: index)
    }

    /// The header `decode` reads from the transaction record at `offset`, checked to be of a
    /// schema table this reader knows.
    private func header(
        at offset: UInt64, _ decode: () throws(ByteReaderError) -> TransactionRecord.HeaderFields
    ) throws(LogStoreError) -> HistoryChanges.Header {
        let header = try checkedHeader(at: offset, decode)
        return HistoryChanges.Header(
            author: header.author,
            timestamp: Date(timeIntervalSince1970: Double(header.timestampMicroseconds) / 1_000_000),
            storeIdentifier: storeIdentifier, processIdentifier: header.processIdentifier)
    }

    /// The fields `decode` reads from the transaction record at `offset`, checked to be of a
    /// schema table this reader knows.
    private func checkedHeader(
        at offset: UInt64, _ decode: () throws(ByteReaderError) -> TransactionRecord.HeaderFields
    ) throws(LogStoreError) -> TransactionRecord.HeaderFields {
        let header: TransactionRecord.HeaderFields
        do {
            header = try decode()
        } catch {
            throw .corruptRecord(offset: offset, reason: "transaction record: \(error)")
        }
        guard header.schemaVersion <= table.version else {
            throw .corruptRecord(
                offset: offset,
                reason: "transaction record: encoded with schema table version "
                    + "\(header.schemaVersion), newer than \(table.version)")
        }
        return header
    }
}

/// What a fetch does with each record it reads in place: tests it (type, token bounds, author)
/// where it lies and decodes only a record it takes.
private struct Visit {
    let reader: HistoryReader
    let query: HistoryQuery
    /// The query's author tests, compiled for the stored bytes once.
    let authorTests: [HistoryQuery.AuthorBytesTest]
    var strings = TransactionRecord.RepeatedStrings()
    /// The transactions the fetch takes, side by side.
    let batch: HistoryBatch
    /// The transaction of the record visited last, when taken.
    var taken: DefaultHistoryTransaction?
    /// The record visited last is past the token upper bound, and so is every later one.
    var pastUpperBound = false
    /// That record's offset.
    var pastUpperBoundOffset: UInt64 = 0
    var failure: LogStoreError?
    /// The author index's part in the fetch (off unless the fetch has an author filter).
    var indexing = AuthorIndexing()

    init(reader: HistoryReader, query: HistoryQuery, capacity: Int) {
        self.reader = reader
        self.query = query
        authorTests = query.authorTests.map(HistoryQuery.AuthorBytesTest.init)
        batch = HistoryBatch(storeIdentifier: reader.storeIdentifier, decoder: reader.decoder, capacity: capacity)
    }

    /// ``visit(_:)`` of the first record of a fetch whose lower bound's check was deferred
    /// (``HistoryReader/deferredCheck(of:)``): the record must be the token's, checked before
    /// anything else is done with it.
    mutating func visit(_ view: LogRecordView, checkingAgainst token: DefaultHistoryToken) {
        do throws(LogStoreError) { try reader.check((view.offset, view.type, view.payloadCRC), against: token) } catch {
            failure = error
            return
        }
        visit(view)
    }

    mutating func visit(_ view: LogRecordView) {
        if query.isPastUpperBound(view.offset) {
            pastUpperBound = true
            pastUpperBoundOffset = view.offset
            return
        }
        if indexing.isOn {
            visitIndexing(view)
            return
        }
        guard view.type == .transaction, query.matchesTokenBounds(offset: view.offset) else { return }
        do throws(LogStoreError) {
            if !authorTests.isEmpty {
                let matches: Bool
                do {
                    matches = try TransactionRecord.authorMatches(view.payload) { author in
                        authorTests.allSatisfy { $0.matches(author) }
                    }
                } catch {
                    throw LogStoreError.corruptRecord(offset: view.offset, reason: "transaction record: \(error)")
                }
                guard matches else { return }
            }
            taken = try reader.decode(view, strings: &strings, into: batch)
        } catch {
            failure = error
        }
    }

    /// ``visit(_:)`` of a fetch with an author filter and the author index: a record read in
    /// order is filed (its author as a position in the index's names); one reached through the
    /// index must have the author it was filed with. The tests run once per author, not per record.
    private mutating func visitIndexing(_ view: LogRecordView) {
        guard view.type == .transaction else {
            if indexing.expectedOffset != nil {
                failure = indexing.disagreement(at: view.offset, "a record of type \(view.type)")
            }
            return
        }
        do throws(LogStoreError) {
            let author: UnsafeRawBufferPointer?
            do {
                author = try TransactionRecord.Header.Prefix(view.payload).author
            } catch {
                throw LogStoreError.corruptRecord(offset: view.offset, reason: "transaction record: \(error)")
            }
            let position: UInt32
            if let expected = indexing.expectedOffset {
                // The iterator passes over marks and dictionaries: the record handed must be the one filed.
                guard view.offset == expected.offset else {
                    throw indexing.disagreement(at: expected.offset, "not there (the next is at \(view.offset))")
                }
                guard HistoryAuthorIndex.Names.equal(indexing.names[expected.author], author) else {
                    throw indexing.disagreement(at: view.offset, "another author")
                }
                position = expected.author
            } else {
                position = indexing.file(view.offset, author: author)
            }
            guard query.matchesTokenBounds(offset: view.offset), indexing.passes(position) else { return }
            taken = try reader.decode(view, strings: &strings, into: batch)
        } catch {
            failure = error
        }
    }
}

/// A fetch's use of the author index (``HistoryAuthorIndex``): where the index's stretch covers
/// the position, the fetch skips to the next record whose author passes; elsewhere it reads every
/// record and files it in a run of its own, which the index takes in when the fetch ends.
private struct AuthorIndexing {
    let isOn: Bool
    /// The index's stretch when the fetch began (let go before the fetch files its runs, so
    /// that filing appends to the index's arrays in place instead of copying them).
    private var kept: HistoryAuthorIndex.Stretch
    /// The index's names, with the authors this fetch met first appended.
    private(set) var names: HistoryAuthorIndex.Names
    let snapshotNameCount: Int
    /// The index's generation at the snapshot.
    let generation: Int
    /// Where the fetch starts: records before it are not handed to the visit, so a run never
    /// starts before it.
    private let from: UInt64
    /// Per name position, whether the fetch's author tests pass: 0 not worked out yet, 1 yes, 2 no.
    private var verdicts: [UInt8] = []
    /// Runs read whole, in order.
    private(set) var runs: [HistoryAuthorIndex.Stretch] = []
    /// The run being read, record by record (`nil` while reading through the index).
    private var run: HistoryAuthorIndex.Stretch?
    /// In `kept`: the next entry to look at (`nil` until the fetch first reaches the stretch).
    private var cursor: Int?
    /// The record about to be read and its author, when reached through the index.
    private(set) var expectedOffset: (offset: UInt64, author: UInt32)?
    /// The position of the author filed last (the next record's is mostly the same).
    private var lastPosition: UInt32?

    /// The fetch's author tests, compiled for the stored bytes.
    private let tests: [HistoryQuery.AuthorBytesTest]

    init() {
        isOn = false
        tests = []
        kept = HistoryAuthorIndex.Stretch()
        names = HistoryAuthorIndex.Names()
        snapshotNameCount = 0
        generation = 0
        from = 0
    }

    init(_ snapshot: HistoryAuthorIndex.State, from: UInt64, tests: [HistoryQuery.AuthorBytesTest]) {
        isOn = true
        self.tests = tests
        kept = snapshot.stretch
        names = snapshot.names
        snapshotNameCount = snapshot.names.count
        generation = snapshot.generation
        self.from = from
    }

    /// Before reading the next record: through the index when its stretch covers the position
    /// (skipping to the next record whose author passes, or past the stretch when none does);
    /// otherwise a run is read from here.
    /// A record the index names before where reading is (the log changed under the store) is
    /// returned as the error to throw.
    mutating func advance(_ records: inout LogIterator) -> LogStoreError? {
        expectedOffset = nil
        let position = max(records.offset, from)
        guard kept.covers(position), position < records.endOffset else {
            if run == nil { run = HistoryAuthorIndex.Stretch(start: position, end: position) }
            return nil
        }
        // Reading reached the stretch (or starts in it): the run read so far ends here.
        stop(at: position)
        var entry = cursor ?? kept.firstEntry(atOrAfter: position)
        let end = min(kept.end, records.endOffset)
        while entry < kept.offsets.count && kept.offsets[entry] < end {
            if passes(kept.authors[entry]) {
                let offset = kept.offsets[entry]
                guard offset >= records.offset else {
                    return disagreement(at: offset, "behind the record read last, which ended at \(records.offset)")
                }
                cursor = entry + 1
                expectedOffset = (offset, kept.authors[entry])
                records.skip(to: offset)
                return nil
            }
            entry += 1
        }
        cursor = entry
        records.skip(to: end)
        // Past the stretch: a run is read from its end (whatever record is there: a mark, say,
        // which the iterator passes over, still lies in the run).
        if end < records.endOffset { run = HistoryAuthorIndex.Stretch(start: end, end: end) }
        return nil
    }

    /// After a record read in order: the run reaches `offset`.
    mutating func read(to offset: UInt64) {
        if run != nil { run!.end = offset }
    }

    /// The run read so far ends at `offset` (where reading stopped or reached the stretch).
    mutating func stop(at offset: UInt64) {
        guard var finished = run else { return }
        run = nil
        finished.end = max(finished.start, offset)
        if !finished.isEmpty { runs.append(finished) }
    }

    /// Files a record read in order in the current run; its author's position. A run longer
    /// than the index keeps loses its oldest quarter (its start moves up: still complete).
    mutating func file(_ offset: UInt64, author: UnsafeRawBufferPointer?) -> UInt32 {
        let position: UInt32
        if let last = lastPosition, HistoryAuthorIndex.Names.equal(names[last], author) {
            position = last
        } else {
            position = names.position(of: author)
            lastPosition = position
        }
        if run == nil { run = HistoryAuthorIndex.Stretch(start: offset, end: offset) }
        run!.offsets.append(offset)
        run!.authors.append(position)
        if run!.offsets.count > HistoryAuthorIndex.entryCountMax + HistoryAuthorIndex.entryCountMax / 4 {
            run!.keepNewest(HistoryAuthorIndex.entryCountMax)
        }
        return position
    }

    /// What the fetch files: its runs and names; the snapshot of the stretch is let go first.
    mutating func takeRuns() -> ([HistoryAuthorIndex.Stretch], HistoryAuthorIndex.Names, Int) {
        kept = HistoryAuthorIndex.Stretch()
        let taken = runs
        runs = []
        return (taken, names, snapshotNameCount)
    }

    /// Whether the author at `position` passes every test (worked out once per author).
    mutating func passes(_ position: UInt32) -> Bool {
        let index = Int(position)
        if index >= verdicts.count { verdicts.append(contentsOf: repeatElement(0, count: index + 1 - verdicts.count)) }
        if verdicts[index] == 0 {
            let author = names[position]
            let passes =
                author.map { bytes in bytes.withUnsafeBytes { raw in tests.allSatisfy { $0.matches(raw) } } }
                ?? tests.allSatisfy { $0.matches(nil) }
            verdicts[index] = passes ? 1 : 2
        }
        return verdicts[index] == 1
    }

    func disagreement(at offset: UInt64, _ found: String) -> LogStoreError {
        .corruptRecord(
            offset: offset,
            reason: "the history's author index filed a transaction at this offset, and the record read here is "
                + "\(found): the log changed under the open store")
    }
}
