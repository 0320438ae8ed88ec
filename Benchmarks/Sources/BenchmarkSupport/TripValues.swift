import Foundation
import LogStore
import SampleTrips

// The SampleTrips models (the root package's SampleTrips product) and the values benchmark trips get.

/// The model types, for `ModelContainer(for:)`.
public var tripModels: [any PersistentModel.Type] { sampleTripsModels }

/// The values of benchmark trip number `index`: a unique name (so every insert is an insert,
/// never an upsert), one of a few destinations, a week-long stay: about 25 bytes of strings and two dates.
public struct TripValues: Sendable {
    public var name: String
    public var destination: String
    public var startDate: Date
    public var endDate: Date

    static let destinations = [
        "Lisbon, Portugal", "Kyoto, Japan", "Oaxaca, Mexico", "Tromsø, Norway",
        "Hobart, Australia", "Cusco, Peru", "Essaouira, Morocco", "Ljubljana, Slovenia",
    ]
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
        [
            "name": .string(name), "destination": .string(destination), "startDate": .date(startDate),
            "endDate": .date(endDate), "bucketList": .array([]), "livingAccommodation": .null,
        ]
    }
}

extension Trip {
    /// A new Trip holding benchmark values.
    public convenience init(_ values: TripValues) {
        self.init(
            name: values.name, destination: values.destination, startDate: values.startDate, endDate: values.endDate)
    }
}
