import Foundation
import LogStore

// The WWDC24 SampleTrips models, declared as in Sources/SampleTrips/SampleTrips.swift (that
// target is not a product of the root package, so the benchmarks carry their own copy). Same
// entity names, properties, options, delete rules and unique constraint, so the store does the
// same work: the unique index on name + start + end, an empty to-many and a null to-one encoded
// with every Trip.

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

    public convenience init(_ values: TripValues) {
        self.init()
        name = values.name
        destination = values.destination
        startDate = values.startDate
        endDate = values.endDate
    }
}

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
}

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
}

/// The model types, for `ModelContainer(for:)`.
public var tripModels: [any PersistentModel.Type] { [Trip.self, BucketListItem.self, LivingAccommodation.self] }

/// The values of benchmark trip number `index`: a unique name (so every insert is an insert,
/// never an upsert), one of a few destinations, a week-long stay: about 25 bytes of strings and two dates.
public struct TripValues: Sendable {
    public var name: String
    public var destination: String
    public var startDate: Date
    public var endDate: Date

    static let destinations = ["Lisbon, Portugal", "Kyoto, Japan", "Oaxaca, Mexico", "Tromsø, Norway",
                               "Hobart, Australia", "Cusco, Peru", "Essaouira, Morocco", "Ljubljana, Slovenia"]
    /// 2026-01-01 00:00 UTC.
    static let epoch = Date(timeIntervalSince1970: 1_767_225_600)

    public init(index: Int) {
        name = "Trip \(String(index + 1_000_000))"
        destination = Self.destinations[index % Self.destinations.count]
        startDate = Self.epoch.addingTimeInterval(Double(index % 100_000) * 3_600)
        endDate = startDate.addingTimeInterval(7 * 86_400)
    }

    /// The values as a store snapshot holds them (what `ModelContext` encodes for a new Trip).
    public var attributeValues: [String: AttributeValue] {
        ["name": .string(name), "destination": .string(destination), "startDate": .date(startDate),
         "endDate": .date(endDate), "bucketList": .array([]), "livingAccommodation": .null]
    }
}
