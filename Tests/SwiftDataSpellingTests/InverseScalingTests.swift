import Foundation
import Testing

@testable import LogStore

/// Keeping inverses in step stays cheap for long lists: each set compares the old and new list in
/// linear time (a nested search made 2,000 one-at-a-time appends take minutes).
@Suite struct InverseScalingTests {
    /// Counted, not timed (timings belong to the benchmarks; a wall-clock bound here failed under
    /// the sanitizers): each set looks at each element of the lists it changes a bounded number of
    /// times. The nested search this replaced looked at every pair — about k² visits for an append
    /// to a list of k, so 2,000 appends took minutes (a971c05's message has the figures).
    @Test func buildingAndMovingALongListOneModelAtATime() {
        let count = 2000
        let first = Trip(name: "First", destination: "A"), second = Trip(name: "Second", destination: "B")
        let items = (0..<count).map { BucketListItem(title: "\($0)", details: "", hasReservation: false, isInPlan: false) }
        let counter = RelationshipDifference.VisitCounter()
        // The most visits one append or one move made, per element of the lists it changed.
        var worstPerElement = 0.0
        RelationshipDifference.$visitCounter.withValue(counter) {
            for item in items {
                let visitsBefore = counter.count, elements = 2 * first.bucketList.count + 1
                first.bucketList.append(item)
                worstPerElement = max(worstPerElement, Double(counter.count - visitsBefore) / Double(elements))
            }
            #expect(counter.count > 0, "the appends went through RelationshipDifference")
            for item in items {
                // The item leaves `first` (k elements before, k - 1 after) and joins `second`.
                let visitsBefore = counter.count
                let elements = 2 * first.bucketList.count - 1 + 2 * second.bucketList.count + 1
                item.trip = second
                worstPerElement = max(worstPerElement, Double(counter.count - visitsBefore) / Double(elements))
            }
        }
        #expect(first.bucketList.isEmpty)
        #expect(second.bucketList.count == count)
        #expect(items.allSatisfy { $0.trip === second })
        // Linear per set: at most two visits per element of the old and new lists. The nested
        // search made about k / 2 per element for an append to a list of k (1,000 here).
        #expect(worstPerElement <= 2, "a set looked at an element \(worstPerElement) times")
        // In all: about n² / 2 for the appends and n² for the moves (6 million); cubic is 2.7 billion.
        #expect(counter.count <= 2 * count * count, "\(counter.count) visits for \(count) appends and moves")
        print("InverseScalingTests: \(counter.count) visits for \(count) appends and \(count) moves; "
            + "at most \(worstPerElement) per element of the lists one set changed")
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
