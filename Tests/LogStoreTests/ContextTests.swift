import Foundation
import LogStore
import LogStoreEngine
import LogStoreTestSupport
import SampleTrips
import Testing

func makeContainer(_ fileSystem: SimulatedFileSystem, directory: String = "/trips") throws -> ModelContainer {
    try ModelContainer(for: sampleTripsModels, configuration: LogStoreConfiguration(directory: directory, fileSystem: fileSystem))
}

func day(_ number: Int) -> Date { Date(timeIntervalSince1970: Double(number) * 86_400) }

@Suite struct ContextTests {
    @Test func insertSaveFetchAndReopen() throws {
        let fileSystem = SimulatedFileSystem()
        do {
            let container = try makeContainer(fileSystem)
            let context = ModelContext(container)
            let trip = Trip(name: "Lisbon", destination: "Portugal", startDate: day(1), endDate: day(5))
            trip.bucketList = [BucketListItem(title: "Tram 28", details: "ride it")]
            trip.livingAccommodation = LivingAccommodation(address: "Rua 1", placeName: "Casa")
            context.insert(trip)
            #expect(trip.persistentModelID.isTemporary)
            #expect(context.hasChanges)
            try context.save()
            #expect(!trip.persistentModelID.isTemporary)
            #expect(!context.hasChanges)
            trip.destination = "Lisboa"
            #expect(context.hasChanges)
            try context.save()
            try container.dataStore(as: LogStore.self)!.close()
        }
        let container = try makeContainer(fileSystem)
        let context = ModelContext(container)
        let trips = try context.fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.name == "Lisbon" }))
        #expect(trips.count == 1)
        #expect(trips.first?.destination == "Lisboa")
        #expect(trips.first?.bucketList.map(\.title) == ["Tram 28"])
        #expect(trips.first?.livingAccommodation?.placeName == "Casa")
        #expect(try context.fetchCount(FetchDescriptor<BucketListItem>()) == 1)
    }
}
