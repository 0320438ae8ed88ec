import Foundation
import LogStore
import LogStoreEngine

/// The WWDC24 history session's `findTrips`: for each change a widget made to a living
/// accommodation, the app fetches the trips staying there —
/// `#Predicate<Trip> { $0.livingAccommodation?.persistentModelID == modelID }` — with a new
/// context, as the session's change handler does. The store holds `tripCount` trips, each with
/// its own accommodation; one operation is one such fetch (one widget change), and each must find
/// exactly its one trip.
public final class FindTripsWorkload: Workload, @unchecked Sendable {
    // @unchecked: one thread; the harness reads counters between iterations.
    public let container: ModelContainer
    let logStore: LogStore
    let accommodations: [PersistentIdentifier]
    let tripCount: Int
    var fetches = 0

    public init(directory: String, tripCount: Int = 5_000) throws {
        self.tripCount = tripCount
        container = try ModelContainer(
            for: tripModels, configuration: LogStoreConfiguration(directory: directory + "/store", durability: .none))
        logStore = try container.dataStore(as: LogStore.self).unwrap(or: "the container's store is not a LogStore")
        var accommodations: [LivingAccommodation] = []
        for start in stride(from: 0, to: tripCount, by: 1_000) {
            let context = ModelContext(container)
            var batch: [LivingAccommodation] = []
            for index in start..<min(tripCount, start + 1_000) {
                let trip = Trip(TripValues(index: index))
                let accommodation = LivingAccommodation(address: "\(index) Main Street", placeName: "Hotel \(index)")
                trip.livingAccommodation = accommodation
                context.insert(trip)
                batch.append(accommodation)
            }
            try context.save()
            accommodations += batch
        }
        self.accommodations = accommodations.map(\.persistentModelID)
        guard self.accommodations.allSatisfy({ !$0.isTemporary }) else {
            throw HarnessError("an accommodation kept a temporary identifier after its save")
        }
    }

    public func perform(thread: Int, index: Int) throws {
        // Spread over the store (a prime stride), not the same few rows each time.
        let modelID = accommodations[(index &* 7_919) % accommodations.count]
        let context = ModelContext(container)
        let trips = try context.fetch(
            FetchDescriptor<Trip>(predicate: #Predicate<Trip> { $0.livingAccommodation?.persistentModelID == modelID }))
        guard trips.count == 1, trips[0].livingAccommodation?.persistentModelID == modelID else {
            throw HarnessError("findTrips found \(trips.count) trips for \(modelID), expected its one trip")
        }
        fetches += 1
    }

    public var counters: [String: Double] { ["fetches": Double(fetches)] }

    public var facts: [String: String] {
        ["trips": String(tripCount), "store": "LogStore", "fetchesAtEnd": String(fetches)]
    }

    public func close() throws {
        try logStore.close()
    }
}

/// The WWDC24 history session's whole `findTrips` pass, as the app runs it when the widget has
/// changed things: `fetchTransactions(from: token)` (history after the app's token with
/// `author == "widget"`, in a new context) and `findTrips(in:)` (for each change, the trips whose
/// `livingAccommodation?.persistentModelID` is the changed identifier, in a new task context,
/// kept in a set by the change's kind). The store holds `tripCount` trips, each with its own
/// accommodation; after the token the widget made `widgetChanges` saves with author "widget",
/// each confirming one accommodation (an update of `isConfirmed`). One operation is one pass over
/// all of them; each pass must find exactly the `widgetChanges` trips the widget changed.
///
/// `.store` is the session's code verbatim (the store answers the predicate, PredicatePushDown);
/// `.inMemory` is its peer in the same run: the same pass with each change's predicate evaluated
/// in memory (`Predicate.evaluate` over every Trip fetched by the task context), which is what the
/// context did before the store recognised the predicate.
public final class FindTripsPassWorkload: Workload, @unchecked Sendable {
    // @unchecked: one thread; the harness reads counters between iterations.
    public enum Evaluation: String, Sendable {
        /// `#Predicate` in the `FetchDescriptor`: the store filters.
        case store
        /// Every Trip fetched, the predicate evaluated on each with `Predicate.evaluate`.
        case inMemory
    }

    public let container: ModelContainer
    let logStore: LogStore
    let evaluation: Evaluation
    let token: DefaultHistoryToken
    let tripCount: Int
    let widgetChanges: Int
    /// The names of the trips whose accommodations the widget confirmed.
    let changedTripNames: Set<String>
    var passes = 0
    var changes = 0
    var historyNanoseconds: UInt64 = 0
    var tripFetchNanoseconds: UInt64 = 0
    /// CPU time of the measuring thread over the passes: on a busy machine, what a pass costs
    /// apart from waiting for a core.
    var cpuNanoseconds: UInt64 = 0

    public init(directory: String, evaluation: Evaluation, tripCount: Int = 5_000, widgetChanges: Int = 100) throws {
        precondition(widgetChanges <= tripCount, "more widget changes than accommodations")
        self.evaluation = evaluation
        self.tripCount = tripCount
        self.widgetChanges = widgetChanges
        container = try ModelContainer(
            for: tripModels, configuration: LogStoreConfiguration(directory: directory + "/store", durability: .none))
        logStore = try container.dataStore(as: LogStore.self).unwrap(or: "the container's store is not a LogStore")
        for start in stride(from: 0, to: tripCount, by: 1_000) {
            let app = ModelContext(container)
            for index in start..<min(tripCount, start + 1_000) {
                let trip = Trip(TripValues(index: index))
                trip.livingAccommodation = LivingAccommodation(
                    address: "\(index) Main Street", placeName: "Hotel \(index)")
                app.insert(trip)
            }
            try app.save()
        }
        // The app keeps its token.
        token = try ModelContext(container).fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).last
            .unwrap(or: "no history after building the trips").token
        // The widget confirms stays, one save each, spread over the store (a prime stride).
        let widget = ModelContext(container)
        widget.author = "widget"
        let accommodations = try widget.fetch(FetchDescriptor<LivingAccommodation>())
        guard accommodations.count == tripCount else {
            throw HarnessError("\(accommodations.count) accommodations stored, expected \(tripCount)")
        }
        var names: Set<String> = []
        var chosen: Set<Int> = []
        for change in 0..<widgetChanges {
            var position = (change &* 7_919) % tripCount
            while !chosen.insert(position).inserted { position = (position + 1) % tripCount }
            let accommodation = accommodations[position]
            accommodation.isConfirmed = true
            try widget.save()
            names.insert(try accommodation.trip.unwrap(or: "an accommodation without its trip").name)
        }
        changedTripNames = names
        guard changedTripNames.count == widgetChanges else {
            throw HarnessError("the widget changed \(changedTripNames.count) distinct trips, expected \(widgetChanges)")
        }
    }

    /// The session's `fetchTransactions(from:)`.
    func fetchTransactions(from token: DefaultHistoryToken?) throws -> [DefaultHistoryTransaction] {
        var historyDescriptor = HistoryDescriptor<DefaultHistoryTransaction>()
        if let token {
            historyDescriptor.predicate = #Predicate { transaction in
                (transaction.token > token) && (transaction.author == "widget")
            }
        }
        let context = ModelContext(container)
        return try context.fetchHistory(historyDescriptor)
    }

    /// The session's `findTrips(in:)` (its `try?` is a `try` here: a failed fetch fails the
    /// benchmark instead of skipping the change), each change's fetch as `evaluation` says.
    func findTrips(in transactions: [DefaultHistoryTransaction]) throws -> (Set<Trip>, DefaultHistoryToken?) {
        let taskContext = ModelContext(container)
        var resultTrips: Set<Trip> = []
        for transaction in transactions {
            for change in transaction.changes {
                let modelID = change.changedPersistentIdentifier
                let predicate = #Predicate<Trip> { trip in
                    trip.livingAccommodation?.persistentModelID == modelID
                }
                let fetchResults: [Trip]
                switch evaluation {
                case .store:
                    let fetchDescriptor = FetchDescriptor<Trip>(predicate: predicate)
                    fetchResults = try taskContext.fetch(fetchDescriptor)
                case .inMemory:
                    fetchResults = try taskContext.fetch(FetchDescriptor<Trip>()).filter { try predicate.evaluate($0) }
                }
                changes += 1
                guard let matchedTrip = fetchResults.first else {
                    continue
                }
                switch change {
                case .insert(_ as DefaultHistoryInsert<LivingAccommodation>):
                    resultTrips.insert(matchedTrip)
                case .update(_ as DefaultHistoryUpdate<LivingAccommodation>):
                    resultTrips.update(with: matchedTrip)
                case .delete(_ as DefaultHistoryDelete<LivingAccommodation>):
                    resultTrips.remove(matchedTrip)
                default:
                    break
                }
            }
        }
        return (resultTrips, transactions.last?.token)
    }

    public func perform(thread: Int, index: Int) throws {
        let cpuStart = Self.threadCPUNanoseconds()
        let start = monotonicNanoseconds()
        let transactions = try fetchTransactions(from: token)
        let fetched = monotonicNanoseconds()
        let (trips, newToken) = try findTrips(in: transactions)
        historyNanoseconds += fetched - start
        tripFetchNanoseconds += monotonicNanoseconds() - fetched
        cpuNanoseconds += Self.threadCPUNanoseconds() - cpuStart
        guard transactions.count == widgetChanges, Set(trips.map(\.name)) == changedTripNames,
            let newToken, newToken > token
        else {
            throw HarnessError(
                "findTrips found \(trips.count) trips in \(transactions.count) transactions, expected the widget's \(widgetChanges)"
            )
        }
        passes += 1
    }

    public var counters: [String: Double] {
        [
            "passes": Double(passes), "changes": Double(changes),
            "historyNanoseconds": Double(historyNanoseconds), "tripFetchNanoseconds": Double(tripFetchNanoseconds),
            "cpuNanoseconds": Double(cpuNanoseconds),
        ]
    }

    /// CPU time of the calling thread (`CLOCK_THREAD_CPUTIME_ID`).
    static func threadCPUNanoseconds() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    public var facts: [String: String] {
        [
            "trips": String(tripCount), "widgetChanges": String(widgetChanges), "store": "LogStore",
            "evaluation": evaluation.rawValue,
        ]
    }

    public func close() throws {
        try logStore.close()
    }
}
