import Foundation
import LogStore
import Testing

/// Keeping inverses in step stays cheap for long lists: each set compares the old and new list in
/// linear time (a nested search made 2,000 one-at-a-time appends take minutes).
@Suite struct InverseScalingTests {
    @Test func buildingAndMovingALongListOneModelAtATime() {
        let count = 2000
        let first = Trip(name: "First", destination: "A"), second = Trip(name: "Second", destination: "B")
        let items = (0..<count).map { BucketListItem(title: "\($0)", details: "", hasReservation: false, isInPlan: false) }
        // Before the linear difference this took minutes (a wall-clock bound here failed under the
        // sanitizers on a loaded machine, and the rules keep timings out of unit tests): the run
        // finishing at all in the default test run is the guard; the figures were in a971c05's message.
        for item in items { first.bucketList.append(item) }
        for item in items { item.trip = second }
        #expect(first.bucketList.isEmpty)
        #expect(second.bucketList.count == count)
        #expect(items.allSatisfy { $0.trip === second })
    }

    @Test func editsInTheMiddleOfAListUpdateOnlyTheModelsTheyTouch() {
        let trip = Trip(name: "T", destination: "D")
        let items = (0..<6).map { BucketListItem(title: "\($0)", details: "", hasReservation: false, isInPlan: false) }
        trip.bucketList = items
        trip.bucketList.remove(at: 2)
        #expect(items[2].trip == nil)
        let extra = BucketListItem(title: "extra", details: "", hasReservation: false, isInPlan: false)
        trip.bucketList.insert(extra, at: 3)
        #expect(extra.trip === trip)
        trip.bucketList.swapAt(0, 4) // a reorder changes no membership
        #expect(items.enumerated().allSatisfy { $0.offset == 2 ? $0.element.trip == nil : $0.element.trip === trip })
        trip.bucketList.replaceSubrange(1..<3, with: [items[2]])
        #expect(items[2].trip === trip)
        #expect(trip.bucketList.allSatisfy { $0.trip === trip })
        #expect((items + [extra]).filter { $0.trip === trip }.count == trip.bucketList.count)
    }
}
