import Foundation

// To-many relationships declared as optional arrays, `var items: [Item]? = []`, as SwiftData code
// written for CloudKit does (every relationship optional there). The store keeps them as any
// to-many relationship: `nil` is saved as the empty list, and a fetched model reads the empty
// list back as `[]`, not `nil`.
extension ModelProperty {
    /// An optional to-many relationship of a `@Model` class (`@Relationship(deleteRule:inverse:)`).
    public static func _persisted<Destination: PersistentModel>(
        _ name: String, _ keyPath: any ReferenceWritableKeyPath<Model, [Destination]?> & Sendable,
        options: Schema.Attribute.Options = [], deleteRule: Schema.Relationship.DeleteRule = .nullify,
        inverse: (any PartialKeyPath<Destination> & _RelationshipKeyPath & Sendable)? = nil, originalName: String? = nil,
        defaultValue: [Destination]?? = nil, slot: (@Sendable (Model) -> [Destination]??)? = nil
    ) -> ModelProperty {
        let value = reader(keyPath, slot: slot)
        var property = ModelProperty(
            name: name, keyPath: keyPath, attribute: nil,
            relationship: Schema.Relationship(name, destination: Destination.entityName, isToMany: true,
                                              deleteRule: deleteRule, options: options),
            read: { model in .array((value(model) ?? []).map { .reference($0.persistentModelID) }) },
            write: { model, value, resolve in
                let targets: [Destination]
                switch value {
                case .null: targets = []
                case let .array(values):
                    targets = try values.compactMap { value -> Destination? in
                        guard case let .reference(identifier) = value else { return nil }
                        guard let target = try resolve(identifier) as? Destination else {
                            throw ModelError.missingReference(entity: Model.entityName, property: name, identifier: identifier)
                        }
                        return target
                    }
                default: throw ModelError.valueTypeMismatch(entity: Model.entityName, property: name, value: value)
                }
                Self.set(model, name, keyPath, Optional(targets))
            },
            related: { model in value(model) ?? [] }, destinationType: Destination.self)
        property.inverseKeyPath = inverse
        property.inverseMaintainer = { inverse in
            RelationshipInverses<Model>.optionalToMany(inverse: inverse, destination: Destination.self)
        }
        return property.renamed(from: originalName)
    }
}

extension RelationshipInverses {
    /// How the inverse `inverse` of a relationship of `Model` holds a model: one (`Model?`), a list
    /// (`[Model]`) or an optional list (`[Model]?`). Every operation first checks whether the
    /// inverse already says so, so the inverse's own maintainer finds nothing to do (no loop).
    struct InverseSide<Destination: PersistentModel>: Sendable {
        let holds: @Sendable (Destination, Model) -> Bool
        let add: @Sendable (Destination, Model) -> Void
        let remove: @Sendable (Destination, Model) -> Void

        init?(_ inverse: AnyKeyPath) {
            if let keyPath = inverse as? ReferenceWritableKeyPath<Destination, Model?> {
                nonisolated(unsafe) let keyPath = keyPath  // an immutable key path, read only
                holds = { destination, model in destination[keyPath: keyPath] === model }
                add = { destination, model in destination[keyPath: keyPath] = model }
                remove = { destination, _ in destination[keyPath: keyPath] = nil }
            } else if let keyPath = inverse as? ReferenceWritableKeyPath<Destination, [Model]> {
                nonisolated(unsafe) let keyPath = keyPath  // an immutable key path, read only
                holds = { destination, model in destination[keyPath: keyPath].contains { $0 === model } }
                add = { destination, model in destination[keyPath: keyPath].append(model) }
                remove = { destination, model in destination[keyPath: keyPath].removeAll { $0 === model } }
            } else if let keyPath = inverse as? ReferenceWritableKeyPath<Destination, [Model]?> {
                nonisolated(unsafe) let keyPath = keyPath  // an immutable key path, read only
                holds = { destination, model in destination[keyPath: keyPath]?.contains { $0 === model } ?? false }
                add = { destination, model in destination[keyPath: keyPath] = (destination[keyPath: keyPath] ?? []) + [model] }
                remove = { destination, model in destination[keyPath: keyPath]?.removeAll { $0 === model } }
            } else {
                return nil
            }
        }
    }

    /// This side is an optional list (`trip.bucketList: [BucketListItem]?`); the inverse is to-one,
    /// a list or an optional list. A stored `nil` and an empty list hold the same models.
    static func optionalToMany<Destination: PersistentModel>(inverse: AnyKeyPath, destination: Destination.Type)
        -> Maintainer? {
        guard let side = InverseSide<Destination>(inverse) else { return nil }
        return { model, old, new in
            // `old` and `new` are the stored `[Destination]?`; a cast to the list unwraps them.
            let (removed, added) = Self.difference(old, new, of: Destination.self)
            for item in removed where side.holds(item, model) { side.remove(item, model) }
            for item in added where !side.holds(item, model) { side.add(item, model) }
        }
    }

    /// This side is to-one and its inverse an optional list (`item.trip` for `[BucketListItem]?`).
    static func toOneWithOptionalListInverse<Destination: PersistentModel>(
        _ inverse: AnyKeyPath, destination: Destination.Type
    ) -> Maintainer? {
        guard inverse is ReferenceWritableKeyPath<Destination, [Model]?>, let side = InverseSide<Destination>(inverse) else {
            return nil
        }
        return { model, old, new in
            if let old = old as? Destination, old !== (new as? Destination), side.holds(old, model) { side.remove(old, model) }
            if let new = new as? Destination, !side.holds(new, model) { side.add(new, model) }
        }
    }

    /// This side is a list and its inverse an optional list (many-to-many).
    static func toManyWithOptionalListInverse<Destination: PersistentModel>(
        _ inverse: AnyKeyPath, destination: Destination.Type
    ) -> Maintainer? {
        guard inverse is ReferenceWritableKeyPath<Destination, [Model]?> else { return nil }
        return optionalToMany(inverse: inverse, destination: destination)
    }
}
