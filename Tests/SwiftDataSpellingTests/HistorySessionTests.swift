import Foundation
import LogStore
import LogStoreTestSupport
import Testing

/// The history code of the WWDC24 session "Track model changes with SwiftData history", with
/// only `import SwiftData` changed: the app keeps a token, the widget confirms a stay, the app
/// finds the trips the widget changed.
@Suite struct HistorySessionTests {
    let modelContainer: ModelContainer

    init() throws {
        modelContainer = try ModelContainer(
            for: Trip.self, configurations: LogStoreConfiguration(directory: "/trips", fileSystem: SimulatedFileSystem()))
    }

    func findTrips(in transactions: [DefaultHistoryTransaction]) -> (Set<Trip>, DefaultHistoryToken?) {
        let taskContext = ModelContext(modelContainer)
        var resultTrips: Set<Trip> = []
        for transaction in transactions {
            for change in transaction.changes {
                let modelID = change.changedPersistentIdentifier
                let fetchDescriptor = FetchDescriptor<Trip>(predicate: #Predicate { trip in
                    trip.livingAccommodation?.persistentModelID == modelID
                })
                let fetchResults = try? taskContext.fetch(fetchDescriptor)
                guard let matchedTrip = fetchResults?.first else {
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

    func fetchTransactions(from token: DefaultHistoryToken?) throws -> [DefaultHistoryTransaction] {
        var historyDescriptor = HistoryDescriptor<DefaultHistoryTransaction>()
        if let token {
            historyDescriptor.predicate = #Predicate { transaction in
                (transaction.token > token) && (transaction.author == "widget")
            }
        }
        let context = ModelContext(modelContainer)
        return try context.fetchHistory(historyDescriptor)
    }

    @Test func theAppFindsTheTripsTheWidgetChanged() throws {
        let start = Date(timeIntervalSince1970: 1_750_000_000)
        let app = ModelContext(modelContainer)
        for (index, name) in ["Lisbon", "Kyoto", "Reykjavík"].enumerated() {
            let trip = Trip(name: name, destination: "somewhere", startDate: start + Double(index) * 86_400, endDate: start + 1e6)
            trip.livingAccommodation = LivingAccommodation(address: "\(index) Main St", placeName: "\(name) stay",
                                                           isConfirmed: false)
            app.insert(trip)
        }
        try app.save()
        // The app keeps its token as JSON.
        let saved = try JSONEncoder().encode(try #require(try fetchTransactions(from: nil).last?.token))

        let widget = ModelContext(modelContainer)
        widget.author = "widget"
        let kyoto = try #require(try widget.fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.name == "Kyoto" })).first)
        kyoto.livingAccommodation?.isConfirmed = true
        try widget.save()

        let token = try JSONDecoder().decode(DefaultHistoryToken.self, from: saved)
        let (trips, newToken) = findTrips(in: try fetchTransactions(from: token))
        #expect(trips.map(\.name) == ["Kyoto"])
        #expect(try #require(newToken) > token)
        // Nothing more from the widget after the new token.
        #expect(try fetchTransactions(from: newToken).isEmpty)
    }

    @Test func anExpiredTokenIsASwiftDataError() throws {
        let app = ModelContext(modelContainer)
        app.insert(Trip(name: "Lisbon", destination: "Portugal"))
        try app.save()
        let old = try #require(try fetchTransactions(from: nil).last?.token)
        app.insert(Trip(name: "Porto", destination: "Portugal"))
        try app.save()
        try app.deleteHistory(HistoryDescriptor<DefaultHistoryTransaction>())
        do {
            _ = try fetchTransactions(from: old)
            Issue.record("an expired token was accepted")
        } catch SwiftDataError.historyTokenExpired {
            // SwiftData's spelling matches; LogStore adds where to resume.
        }
        #expect(throws: SwiftDataError.self) { try fetchTransactions(from: old) }
        do { _ = try fetchTransactions(from: old) } catch let error as SwiftDataError {
            #expect(error == .historyTokenExpired)
            #expect(error.resumeToken != nil)
        }
    }
}
