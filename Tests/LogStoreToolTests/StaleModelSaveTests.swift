import Foundation
import LogStore
import SampleTrips
import Testing

/// What the demo's booking ran into (found while building `logstore demo`): a context saving a
/// change to one property of a model it holds with a stale value in another property writes the
/// stale value back, undoing another context's save. `makeSaveRequest` sends whole models (the
/// `DataStore` contract: snapshots), and LogStore records every value that differs from its
/// own — so the unchanged, stale `destination` differs and is written. SwiftData writes only the
/// changed properties. Kept as a known issue until the context sends (or the store is told) which
/// properties changed; the demo books through a fresh context meanwhile.
@Suite struct StaleModelSaveTests {
    @Test func aSaveOfOnePropertyDoesNotWriteBackAnotherContextsChange() throws {
        let store = TemporaryStore()
        let (container, logStore) = try store.open()
        defer { try? logStore.close() }
        let app = ModelContext(container)
        let start = Date(timeIntervalSince1970: 1_777_852_800)
        let trip = Trip(name: "Reykjavík", destination: "Iceland", startDate: start, endDate: start.addingTimeInterval(86_400))
        app.insert(trip)
        try app.save()

        let other = ModelContext(container)
        let copy = try #require(try other.fetch(FetchDescriptor<Trip>()).first)
        copy.destination = "Iceland (Ring Road)"
        try other.save()

        // `app` still holds destination "Iceland"; it changes only the accommodation.
        trip.livingAccommodation = LivingAccommodation(address: "Laugavegur 11", placeName: "Hótel Borg")
        try app.save()

        let state = try LogStore.replay(directory: store.directory)
        let saved = try #require(state.entity(named: "Trip")?.rows.first)
        withKnownIssue("a save sends whole models; the stale destination is written back") {
            #expect(saved.values["destination"] == .string("Iceland (Ring Road)"))
        }
    }
}
