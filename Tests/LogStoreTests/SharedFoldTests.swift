import Foundation
import LogStoreTestSupport
import SampleTrips
import Testing

@testable import LogStore
@testable import LogStoreEngine

/// A writer of a shared store folds the other writers' records (`foldOtherWritersLocked`,
/// `Inner.foldForeign`): inserts, updates that move a unique key, deletes and a record mixing
/// them leave its working state, its unique index and its published state as the writer's own
/// — and its own saves then upsert under the keys as the other writer left them. Two stores in
/// this process stand for the two processes (``TaggedPosixFileSystem``, as SharedMaintenanceTests).
@Suite struct SharedFoldTests {
    static func day(_ n: Double) -> Date { Date(timeIntervalSince1970: 1_780_000_000 + n * 86_400) }

    static func trip(_ name: String, _ n: Double) -> Trip {
        Trip(name: name, destination: "somewhere", startDate: day(n), endDate: day(n + 3))
    }

    /// Runs `body` with two writers of one new store: `a`, and `b`, which follows `a` only when
    /// it is called (its change watcher stopped).
    static func withTwoWriters(
        _ body: (_ a: ModelContainer, _ aStore: LogStore, _ b: ModelContainer, _ bStore: LogStore) throws -> Void
    ) throws {
        let temporary = TemporaryDirectory("shared-fold")
        defer { temporary.remove() }
        let directory = temporary.appending("Trips.store")
        let (a, aStore) = try SharedMaintenanceTests.open(directory, TaggedPosixFileSystem(process: 1), segmentByteCountMax: 64 << 20)
        let (b, bStore) = try SharedMaintenanceTests.open(
            directory, TaggedPosixFileSystem(process: 2), following: false, segmentByteCountMax: 64 << 20)
        defer {
            try? bStore.close()
            try? aStore.close()
        }
        try body(a, aStore, b, bStore)
    }

    @Test func anotherWritersUpdatesDeletesAndKeyMovesFoldAsItsOwnState() throws {
        try Self.withTwoWriters { a, _, b, bStore in
            let writer = ModelContext(a)
            for n in 0..<6 { writer.insert(Self.trip("trip \(n)", Double(n))) }
            try writer.save()
            // One record of every kind: a key moved (name), a plain attribute changed, a delete, an insert.
            let trips = try writer.fetch(FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.name)]))
            trips[0].name = "moved"
            trips[1].destination = "elsewhere"
            writer.delete(trips[2])
            writer.insert(Self.trip("new", 10))
            try writer.save()
            // b folds them at its next fetch.
            let reader = ModelContext(b)
            let seen = try reader.fetch(FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.name)]))
            let expected = try ModelContext(a).fetch(FetchDescriptor<Trip>(sortBy: [SortDescriptor(\.name)]))
            #expect(seen.map(\.name) == expected.map(\.name))
            #expect(seen.map(\.destination) == expected.map(\.destination))
            #expect(seen.map(\.persistentModelID) == expected.map(\.persistentModelID))
            bStore.inner.withLock { inner in
                #expect(inner.uniqueIndex.problems(against: inner.working) == 0)
                #expect(inner.uniqueIndex.filingCount == UniqueIndex(schema: bStore.schema, state: inner.working).filingCount)
                #expect(inner.pending.isEmpty)
                #expect(inner.working.entities == inner.published.entities)
            }
            // b's own saves see the keys as a left them: an insert under the moved key upserts into
            // that model; under the key it left, and the deleted trip's, they make new models.
            let movedID = try #require(expected.first { $0.name == "moved" }).persistentModelID
            let saver = ModelContext(b)
            let again = Self.trip("moved", 0)
            again.destination = "upserted"
            saver.insert(again)
            saver.insert(Self.trip("trip 0", 0))
            saver.insert(Self.trip("trip 2", 2))
            try saver.save()
            #expect(again.persistentModelID == movedID)
            let after = try ModelContext(a).fetch(FetchDescriptor<Trip>())
            #expect(after.count == expected.count + 2)
            #expect(after.first { $0.name == "moved" }?.destination == "upserted")
            #expect(Set(after.map(\.name)) == Set(expected.map(\.name)).union(["trip 0", "trip 2"]))
        }
    }

    /// A record of another writer that deletes enough models for the entity's rows to be
    /// renumbered (its holes compacted: more than 1,024 and more than the rows left) and inserts
    /// some: folded, the unique index is filed again from the state and stays right.
    @Test func anotherWritersDeletesThatRenumberTheRowsFoldRight() throws {
        try Self.withTwoWriters { a, _, b, bStore in
            let writer = ModelContext(a)
            for n in 0..<1_100 { writer.insert(Self.trip("trip \(n)", Double(n))) }
            try writer.save()
            #expect(try ModelContext(b).fetchCount(FetchDescriptor<Trip>()) == 1_100)
            let renumberings = bStore.inner.withLock { $0.working.renumberings(of: "Trip") }
            for trip in try writer.fetch(FetchDescriptor<Trip>()) where trip.name != "trip 7" && trip.name != "trip 9" {
                writer.delete(trip)
            }
            for n in 0..<5 { writer.insert(Self.trip("after \(n)", Double(n))) }
            try writer.save()
            #expect(try ModelContext(b).fetchCount(FetchDescriptor<Trip>()) == 7)
            bStore.inner.withLock { inner in
                #expect(inner.working.renumberings(of: "Trip") > renumberings, "the fold did not renumber the rows")
                #expect(inner.uniqueIndex.problems(against: inner.working) == 0)
                #expect(inner.uniqueIndex.filingCount == UniqueIndex(schema: bStore.schema, state: inner.working).filingCount)
                #expect(inner.working.entities == inner.published.entities)
            }
            // b's saves: into the kept models under their keys, new models under the deleted ones'.
            let saver = ModelContext(b)
            let kept = Self.trip("trip 7", 7)
            kept.destination = "upserted"
            saver.insert(kept)
            saver.insert(Self.trip("trip 8", 8))
            saver.insert(Self.trip("after 2", 2))
            try saver.save()
            let after = try ModelContext(a).fetch(FetchDescriptor<Trip>())
            #expect(after.count == 8)
            #expect(after.first { $0.name == "trip 7" }?.destination == "upserted")
            #expect(after.filter { $0.name == "after 2" }.count == 1)
        }
    }
}
