import Foundation
import LogStore
import LogStoreTestSupport
import Testing

/// Enum and `Codable` attributes of `@Model` classes: enums as their raw values, other `Codable`
/// values as JSON, optional or not, through a store on disk.
@Suite struct CodableAttributeTests {
    @Test func enumsAndCodableValuesRoundTripAndTrackChanges() throws {
        let directory = TemporaryDirectory("macros-codable")
        let lisbon = Location(latitude: 38.72, longitude: -9.14)
        do {
            let container = try ModelContainer(for: Place.self,
                                               configurations: LogStoreConfiguration(directory: directory.path))
            let entity = try #require(container.schema.entity(named: "Place"))
            #expect(entity.attributes.map(\.valueType) == [.string, .int, .int, .data, .data, .data])
            #expect(entity.attributes.map(\.isOptional) == [false, false, true, false, false, true])
            let context = ModelContext(container)
            let place = Place(name: "Lisbon", location: lisbon)
            place.priority = .high
            place.waypoints = [lisbon, Location(latitude: 41.15, longitude: -8.61)]
            context.insert(place)
            context.insert(Place(name: "Nowhere", location: Location(latitude: 0, longitude: 0)))
            try context.save()

            // Setting an equal value is no change; a different one updates that attribute alone.
            place.location = Location(latitude: 38.72, longitude: -9.14)
            #expect(!context.hasChanges)
            place.alternative = Location(latitude: 38.7, longitude: -9.1)
            try context.save()
            let store = try #require(container.dataStore(as: LogStore.self))
            let last = try #require(try store.fetchHistory(HistoryDescriptor<DefaultHistoryTransaction>()).last)
            guard case let .update(update) = last.changes.first, last.changes.count == 1 else {
                Issue.record("expected one update, got \(last.changes)")
                return
            }
            #expect(Array(update.values.keys) == ["alternative"])
            try store.close()
        }
        let container = try ModelContainer(for: Place.self, configurations: LogStoreConfiguration(directory: directory.path))
        let context = ModelContext(container)
        let high = Priority.high
        let places = try context.fetch(FetchDescriptor<Place>(predicate: #Predicate { $0.priority == high }))
        #expect(places.map(\.name) == ["Lisbon"])
        let place = try #require(places.first)
        #expect(place.location == lisbon)
        #expect(place.waypoints.count == 2)
        #expect(place.alternative == Location(latitude: 38.7, longitude: -9.1))
        #expect(place.previous == nil)
        let nowhere = try #require(try context.fetch(FetchDescriptor<Place>(predicate: #Predicate { $0.name == "Nowhere" })).first)
        #expect(nowhere.priority == .normal && nowhere.alternative == nil && nowhere.waypoints.isEmpty)
    }
}
