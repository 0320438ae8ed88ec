import Foundation
import LogStore
import SampleTrips
import Testing

/// The library rule `logstore import` relies on: an insert whose identifier is already a
/// permanent one of the store keeps it, and must name a model that does not exist.
@Suite struct ImportIdentifierTests {
    static func trip(_ identifier: PersistentIdentifier, name: String) -> DefaultSnapshot {
        DefaultSnapshot(
            persistentIdentifier: identifier,
            values: [
                "name": .string(name), "destination": .string("Iceland"), "startDate": .date(Date(timeIntervalSince1970: 0)),
                "endDate": .date(Date(timeIntervalSince1970: 86_400)),
            ])
    }

    @Test func anInsertKeepsAPermanentIdentifierOfItsStore() throws {
        let store = TemporaryStore()
        let (_, logStore) = try store.open()
        defer { try? logStore.close() }
        let key = UUID()
        let kept = try PersistentIdentifier.identifier(for: logStore.identifier, entityName: "Trip", primaryKey: key)
        let result = try logStore.save(DataStoreSaveChangesRequest(inserted: [Self.trip(kept, name: "kept")]))
        #expect(result.remappedIdentifiers[kept] == kept)
        #expect(try LogStore.replay(directory: store.directory).entity(named: "Trip")?.rows.map(\.persistentIdentifier) == [kept])

        // Again: a model has it now.
        #expect(throws: LogStoreError.self) {
            try logStore.save(DataStoreSaveChangesRequest(inserted: [Self.trip(kept, name: "again")]))
        }
        // Twice in one save: refused too.
        let twice = try PersistentIdentifier.identifier(for: logStore.identifier, entityName: "Trip", primaryKey: UUID())
        #expect(throws: LogStoreError.self) {
            try logStore.save(
                DataStoreSaveChangesRequest(inserted: [Self.trip(twice, name: "one"), Self.trip(twice, name: "two")]))
        }
        // Another store's identifier is not kept: a new one is minted, as for a temporary one.
        let foreign = try PersistentIdentifier.identifier(for: UUID().uuidString, entityName: "Trip", primaryKey: key)
        let minted = try logStore.save(DataStoreSaveChangesRequest(inserted: [Self.trip(foreign, name: "foreign")]))
        let mapped = try #require(minted.remappedIdentifiers[foreign])
        #expect(mapped.storeIdentifier == logStore.identifier && mapped.primaryKey != key)
    }
}
