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
