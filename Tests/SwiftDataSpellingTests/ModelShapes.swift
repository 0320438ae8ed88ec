import LogStore

// Models in other shapes than SampleTrips': optionals, arrays, UUID, Data and Double attributes, a
// persisted property without a default next to ones with defaults, a transient and a computed
// property, and a many-to-many relationship with its inverse.

@Model
final class Note {
    #Unique<Note>([\.key])

    var title: String
    var body: String?
    var rating: Int?
    var score: Double = 0
    var words: [String] = []
    var key: UUID = UUID()
    var attachment: Data?
    var createdAt: Date = Date(timeIntervalSince1970: 0)
    @Relationship(inverse: \Label.notes) var labels: [Label] = []
    @Transient var isExpanded = false
    var wordCount: Int { words.count }

    init(title: String, words: [String] = []) {
        self.title = title
        self.words = words
    }
}

@Model
final class Label {
    @Attribute(.unique) var name: String
    var notes: [Note] = []

    init(name: String) {
        self.name = name
    }
}

/// An enum stored as its raw value.
enum Priority: Int, Codable, Sendable {
    case low, normal, high
}

/// A Codable struct stored as JSON.
struct Location: Codable, Equatable, Sendable {
    var latitude: Double
    var longitude: Double
}

@Model
final class Place {
    var name: String
    var priority: Priority = Priority.normal
    var previous: Priority?
    var location: Location
    var waypoints: [Location] = []
    var alternative: Location?

    init(name: String, location: Location) {
        self.name = name
        self.location = location
    }
}
