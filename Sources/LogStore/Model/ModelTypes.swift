/// Model types by entity name: the ones named, and every type their relationships reach, so
/// `ModelContainer(for: Trip.self)` also knows `BucketListItem` and `LivingAccommodation`.
struct ModelTypes {
    /// In discovery order: the named types first, then what their relationships reach.
    private(set) var all: [any PersistentModel.Type] = []
    private(set) var byEntityName: [String: any PersistentModel.Type] = [:]

    init(_ types: [any PersistentModel.Type]) {
        var worklist = types
        var index = 0
        // Bounded by the number of distinct model types: each is added once.
        while index < worklist.count {
            let type = worklist[index]
            index += 1
            guard byEntityName[type.entityName] == nil else { continue }
            byEntityName[type.entityName] = type
            all.append(type)
            worklist += Self.destinations(of: type)
        }
    }

    private static func destinations<Model: PersistentModel>(of type: Model.Type) -> [any PersistentModel.Type] {
        Model.schemaProperties.compactMap(\.destinationType)
    }
}
