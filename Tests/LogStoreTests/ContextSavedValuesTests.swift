import Foundation
import LogStore
import LogStoreTestSupport
import SampleTrips
import Testing

/// After a save, the values the context remembers for the models it inserted are taken from the
/// save request, with the permanent identifiers of the other models of the same save in their
/// references: they must equal what encoding the models now gives, or the next save would
/// write spurious updates.
@Suite struct ContextSavedValuesTests {
    @Test func insertedModelsWithReferencesHaveNoChangesAfterTheirSave() throws {
        let container = try makeContainer(SimulatedFileSystem())
        let context = ModelContext(container)
        let trip = Trip(name: "Lisbon", destination: "Portugal", startDate: day(1), endDate: day(8))
        trip.bucketList = [BucketListItem(title: "Tram 28", details: "early"), BucketListItem(title: "Belém", details: "")]
        trip.livingAccommodation = LivingAccommodation(address: "Rua Augusta 1", placeName: "Pensão")
        context.insert(trip)
        try context.save()
        #expect(!trip.persistentModelID.isTemporary)
        #expect(trip.bucketList.allSatisfy { !$0.persistentModelID.isTemporary })
        #expect(!context.hasChanges)

        // A real change after that is still seen, and only it is written.
        trip.bucketList[1].details = "pastéis"
        #expect(context.hasChanges)
        try context.save()
        #expect(!context.hasChanges)
        let fetched = try ModelContext(container).fetch(FetchDescriptor<BucketListItem>())
        #expect(Set(fetched.map(\.details)) == ["early", "pastéis"])
    }
}
