import Foundation
import LogStore

/// A trip (WWDC24 SampleTrips). Unique on name + start + end date — inserting a trip with the same
/// three updates the existing one — and those three are kept in the delete's tombstone.
public final class Trip: PersistentModel {
    public static let schemaProperties: [ModelProperty<Trip>] = [
        .attribute("name", \.name, options: [.preserveValueOnDeletion]),
        .attribute("destination", \.destination),
        .attribute("startDate", \.startDate, options: [.preserveValueOnDeletion]),
        .attribute("endDate", \.endDate, options: [.preserveValueOnDeletion]),
        .toMany("bucketList", \.bucketList, deleteRule: .cascade),
        .toOne("livingAccommodation", \.livingAccommodation, deleteRule: .cascade),
    ]
    public static let uniquenessConstraints = [["name", "startDate", "endDate"]]

    public let modelState = ModelState()
    public var name = ""
    public var destination = ""
    public var startDate = Date(timeIntervalSince1970: 0)
    public var endDate = Date(timeIntervalSince1970: 0)
    public var bucketList: [BucketListItem] = []
    public var livingAccommodation: LivingAccommodation?

    public required init() {}

    public convenience init(name: String, destination: String, startDate: Date, endDate: Date) {
        self.init()
        self.name = name
        self.destination = destination
        self.startDate = startDate
        self.endDate = endDate
    }
}

/// Something to do on a trip.
public final class BucketListItem: PersistentModel {
    public static let schemaProperties: [ModelProperty<BucketListItem>] = [
        .attribute("title", \.title),
        .attribute("details", \.details),
        .attribute("hasReservation", \.hasReservation),
        .attribute("isInPlan", \.isInPlan),
    ]

    public let modelState = ModelState()
    public var title = ""
    public var details = ""
    public var hasReservation = false
    public var isInPlan = false

    public required init() {}

    public convenience init(title: String, details: String, hasReservation: Bool = false, isInPlan: Bool = false) {
        self.init()
        self.title = title
        self.details = details
        self.hasReservation = hasReservation
        self.isInPlan = isInPlan
    }
}

/// Where a trip stays.
public final class LivingAccommodation: PersistentModel {
    public static let schemaProperties: [ModelProperty<LivingAccommodation>] = [
        .attribute("address", \.address),
        .attribute("placeName", \.placeName),
        .attribute("isConfirmed", \.isConfirmed),
    ]

    public let modelState = ModelState()
    public var address = ""
    public var placeName = ""
    public var isConfirmed = false

    public required init() {}

    public convenience init(address: String, placeName: String, isConfirmed: Bool = false) {
        self.init()
        self.address = address
        self.placeName = placeName
        self.isConfirmed = isConfirmed
    }
}

/// The SampleTrips model types, for `ModelContainer(for:)`.
public var sampleTripsModels: [any PersistentModel.Type] { [Trip.self, BucketListItem.self, LivingAccommodation.self] }
