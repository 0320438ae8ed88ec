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

    init(log: Log, table: SchemaTable, lowWaterMark: DefaultHistoryToken?, logStartOffset: UInt64) {
        self.log = log
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
    /// iteration, and checks with ``check(_:against:)`` (``fetch(_:as:)``, ``deferredCheck(of:)``).
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
            bound.value.storeIdentifier == log.storeID, bound.value.offset >= logStartOffset,
            lowWaterMark.map({ bound.value.offset > $0.offset }) ?? true
        else { return nil }
        return bound.value
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
        guard token.offset >= logStartOffset, lowWaterMark.map({ token.offset > $0.offset }) ?? true else { return }
        let record: LogRecord?
        do throws(LogError) { record = try log.firstRecord(atOrAfter: token.offset) } catch { throw .log(error) }
        try check(record, against: token)
    }

    /// `record`, the first record at or after `token`'s offset (marks skipped), is the transaction
    /// the token names.
    func check(_ record: LogRecord?, against token: DefaultHistoryToken) throws(LogStoreError) {
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
    func fetch<Transaction: HistoryTransaction>(
        _ descriptor: HistoryDescriptor<Transaction>, as make: (DefaultHistoryTransaction) -> Transaction
    ) throws -> Fetched<Transaction> {
        let query = HistoryQuery(descriptor.predicate)
        let limit = descriptor.sortBy.isEmpty ? descriptor.fetchLimit.map { max(0, $0) } : nil
        // A fetch that reads nothing still checks every token.
        let deferred = limit == 0 ? nil : deferredCheck(of: query)
        try validate(query, deferring: deferred)
        var fetched = Fetched<Transaction>(transactions: [], recordsRead: 0)
        if limit == 0 { return fetched }
        // Room for the limit (up to a bound a limit far past what a log holds cannot break): the
        // array grows without copying the transactions already taken.
        if let limit { fetched.transactions.reserveCapacity(min(limit, 4_096)) }
        // The lower bound's record, read by the iteration (deferredCheck): checked first, before
        // anything is evaluated; taken by the loop below when the bound includes it.
        var carried: LogRecord?
        var records: LogIterator
        if let deferred {
            records = try iterator(from: deferred.offset)
            let first: LogRecord?
            do throws(LogError) { first = try records.next() } catch { throw LogStoreError.log(error) }
            try check(first, against: deferred)
            if query.tokenLowerBound!.inclusive { carried = first }
        } else {
            records = try iterator(from: startOffset(for: query))
        }
        // An author test passes over most records: it reads them in place, and only a record it
        // may take (or cannot read: the loop then throws) is copied out. Without one, every
        // record is taken, and reading it in place first was slower (the copy-out in a closure:
        // 401-411 vs 462-475 us for P6's 1,000).
        let authorTests = query.authorTests
        // Whether the record accepted last is one whose author could not be read in place: the
        // copy is read again below, to throw; a record the in-place test accepted is not tested twice.
        var authorUnread = false
        var strings = TransactionRecord.RepeatedStrings()
        let accepts = { (view: LogRecordView) -> Bool in
            authorUnread = false
            guard view.type == .transaction, !query.isPastUpperBound(view.offset) else { return true }
            do {
                return try TransactionRecord.authorMatches(view.payload) { author in
                    authorTests.allSatisfy { $0.matches(authorBytes: author) }
                }
            } catch {
                authorUnread = true
                return true
            }
        }
        // Bounded by the log's visible end: each pass takes the carried record or reads one.
        while true {
            let record: LogRecord
            if let first = carried {
                record = first
                carried = nil
                // Not tested in place: the test below reads the copy.
                authorUnread = !authorTests.isEmpty
            } else if let next = try authorTests.isEmpty ? records.next() : records.next(where: accepts) {
                record = next
            } else {
                break
            }
            if query.isPastUpperBound(record.offset) { break }
            guard record.type == .transaction else { continue }
            guard query.matchesTokenBounds(offset: record.offset) else { continue }
            if authorUnread {
                let matches: Bool
                do {
                    matches = try TransactionRecord.authorMatches(record.payload) { author in
                        query.authorTests.allSatisfy { $0.matches(authorBytes: author) }
                    }
                } catch {
                    throw LogStoreError.corruptRecord(offset: record.offset, reason: "transaction record: \(error)")
                }
                guard matches else { continue }
            }
            // Appended where it is made and tested there (a local copy cost a retain and a release
            // of each of its strings and its changes per transaction).
            fetched.transactions.append(make(try decode(record, strings: &strings)))
            if query.needsEvaluation, let predicate = descriptor.predicate,
                try !predicate.evaluate(fetched.transactions[fetched.transactions.count - 1])
            {
                fetched.transactions.removeLast()
                continue
            }
            if let limit, fetched.transactions.count >= limit { break }
        }
        fetched.recordsRead = records.recordsRead
        if !descriptor.sortBy.isEmpty {
            fetched.transactions.sort(using: descriptor.sortBy)
            if let limit = descriptor.fetchLimit {
                fetched.transactions = Array(fetched.transactions.prefix(max(0, limit)))
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
        let header: (schemaVersion: UInt32, author: String?, timestampMicroseconds: Int64, processIdentifier: String)
        do {
            header = try TransactionRecord.decodeHeader(record.payload, processIdentifier: true, strings: &strings)
        } catch {
            throw .corruptRecord(offset: record.offset, reason: "transaction record: \(error)")
        }
        guard header.schemaVersion <= table.version else {
            throw .corruptRecord(
                offset: record.offset,
                reason: "transaction record: encoded with schema table version "
                    + "\(header.schemaVersion), newer than \(table.version)")
        }
        return DefaultHistoryTransaction(
            token: DefaultHistoryToken(storeIdentifier: storeID, offset: record.offset, check: record.payloadCRC),
            storage: HistoryChanges(
                payload: record.payload, decoder: decoder, offset: record.offset,
                header: HistoryChanges.Header(
                    author: header.author,
                    timestamp: Date(timeIntervalSince1970: Double(header.timestampMicroseconds) / 1_000_000),
                    storeIdentifier: storeIdentifier, processIdentifier: header.processIdentifier)))
    }
}
