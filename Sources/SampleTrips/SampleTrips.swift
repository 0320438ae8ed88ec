import LogStore

// The WWDC24 SampleTrips models ("Create a custom data store with SwiftData", "Track model
// changes with SwiftData history"), in SwiftData's own spelling: only `import SwiftData` became
// `import LogStore`, and the types are public for the tool, the tests and the benchmarks.

/// A trip. Unique on name + start + end date — inserting a trip with the same three updates the
/// existing one — and those three are kept in the delete's history tombstone. Deleting a trip
/// deletes its bucket list and accommodation.
@Model
public final class Trip {
    #Unique<Trip>([\.name, \.startDate, \.endDate])
    #Index<Trip>([\.name], [\.startDate], [\.endDate], [\.name, \.startDate, \.endDate])

    @Attribute(.preserveValueOnDeletion)
    public var name: String
    public var destination: String

    @Attribute(.preserveValueOnDeletion)
    public var startDate: Date

    @Attribute(.preserveValueOnDeletion)
    public var endDate: Date

    @Relationship(deleteRule: .cascade, inverse: \BucketListItem.trip)
    public var bucketList: [BucketListItem] = [BucketListItem]()

    @Relationship(deleteRule: .cascade, inverse: \LivingAccommodation.trip)
    public var livingAccommodation: LivingAccommodation?

    public init(name: String, destination: String, startDate: Date = .now, endDate: Date = .distantFuture) {
        self.name = name
        self.destination = destination
        self.startDate = startDate
        self.endDate = endDate
    }
}

/// Something to do on a trip.
@Model
public final class BucketListItem {
    public var title: String
    public var details: String
    public var hasReservation: Bool
    public var isInPlan: Bool

    public var trip: Trip?

    public init(title: String, details: String, hasReservation: Bool = false, isInPlan: Bool = false) {
        self.title = title
        self.details = details
        self.hasReservation = hasReservation
        self.isInPlan = isInPlan
    }
}

/// Where a trip stays.
@Model
public final class LivingAccommodation {
    public var address: String
    public var placeName: String
    public var isConfirmed: Bool

    public var trip: Trip?

    public init(address: String, placeName: String, isConfirmed: Bool = false) {
        self.address = address
        self.placeName = placeName
        self.isConfirmed = isConfirmed
    }
}

/// The SampleTrips model types, for `ModelContainer(for:)` (naming `Trip` alone is enough: the
/// others are found through its relationships).
public var sampleTripsModels: [any PersistentModel.Type] { [Trip.self, BucketListItem.self, LivingAccommodation.self] }
