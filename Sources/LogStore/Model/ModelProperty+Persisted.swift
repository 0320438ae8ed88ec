import Foundation

// What `@Model` emits for each stored property: one factory name, `_persisted`, whose overloads
// decide by the property's type whether it is an attribute, a to-one or a to-many relationship
// (macros see syntax, not types: DECISIONS.md D13). A type that is none of these fails to
// type-check at the property, naming the overloads. `defaultValue` is the property's initial
// value as declared (`var rating: Int = 0`): what stored models without a value get when the
// attribute is added or made required (a relationship's is not used: to-many default to empty).
// `slot` reads the property's stored value where the instance keeps it (nil: no value yet): a
// save reads every property of every model it writes, and a key path read through the getter
// cost a generic projection and a metadata lookup each (~6 % of P4-ctx's CPU), and registered
// an observation access no view asked for. These overloads are inlinable so that the readers made
// of `slot` are compiled where the model's types are known: made here, generic over `Value`, each
// read looked up the metadata of `Value?` (another ~8 % of P4-ctx's CPU).
extension ModelProperty {
    /// An attribute of a `@Model` class (`@Attribute(options, originalName:)`).
    @inlinable
    public static func _persisted<Value: AttributeConvertible>(
        _ name: String, _ keyPath: any ReferenceWritableKeyPath<Model, Value> & Sendable,
        options: Schema.Attribute.Options = [], originalName: String? = nil, defaultValue: Value? = nil,
        slot: (@Sendable (Model) -> Value?)? = nil
    ) -> ModelProperty {
        let property = attribute(name, keyPath, options: options, defaultValue: defaultValue).renamed(from: originalName)
        guard slot != nil else { return property }
        let value = reader(keyPath, slot: slot)
        return property._reading({ value($0).attributeValue }, related: nil)
    }

    /// A to-one relationship of a `@Model` class (`@Relationship(deleteRule:inverse:)`).
    @inlinable
    public static func _persisted<Destination: PersistentModel>(
        _ name: String, _ keyPath: any ReferenceWritableKeyPath<Model, Destination?> & Sendable,
        options: Schema.Attribute.Options = [], deleteRule: Schema.Relationship.DeleteRule = .nullify,
        inverse: (any PartialKeyPath<Destination> & _RelationshipKeyPath & Sendable)? = nil, originalName: String? = nil,
        defaultValue: Destination?? = nil, slot: (@Sendable (Model) -> Destination??)? = nil
    ) -> ModelProperty {
        let property = toOnePersisted(
            name, keyPath, options: options, deleteRule: deleteRule, inverse: inverse, originalName: originalName)
        guard slot != nil else { return property }
        let readers = toOneReaders(reader(keyPath, slot: slot))
        return property._reading(readers.read, related: readers.related)
    }

    @usableFromInline
    static func toOnePersisted<Destination: PersistentModel>(
        _ name: String, _ keyPath: any ReferenceWritableKeyPath<Model, Destination?> & Sendable,
        options: Schema.Attribute.Options, deleteRule: Schema.Relationship.DeleteRule,
        inverse: (any PartialKeyPath<Destination> & _RelationshipKeyPath & Sendable)?, originalName: String?
    ) -> ModelProperty {
        ModelProperty.toOne(name, keyPath, deleteRule: deleteRule, options: options).relating(
            inverse: inverse, originalName: originalName
        ) { inverse in RelationshipInverses<Model>.toOne(keyPath, inverse: inverse, destination: Destination.self) }
    }

    /// A to-many relationship of a `@Model` class (`@Relationship(deleteRule:inverse:)`).
    @inlinable
    public static func _persisted<Destination: PersistentModel>(
        _ name: String, _ keyPath: any ReferenceWritableKeyPath<Model, [Destination]> & Sendable,
        options: Schema.Attribute.Options = [], deleteRule: Schema.Relationship.DeleteRule = .nullify,
        inverse: (any PartialKeyPath<Destination> & _RelationshipKeyPath & Sendable)? = nil, originalName: String? = nil,
        defaultValue: [Destination]? = nil, slot: (@Sendable (Model) -> [Destination]?)? = nil
    ) -> ModelProperty {
        let property = toManyPersisted(
            name, keyPath, options: options, deleteRule: deleteRule, inverse: inverse, originalName: originalName)
        guard slot != nil else { return property }
        let readers = toManyReaders(reader(keyPath, slot: slot))
        return property._reading(readers.read, related: readers.related)
    }

    @usableFromInline
    static func toManyPersisted<Destination: PersistentModel>(
        _ name: String, _ keyPath: any ReferenceWritableKeyPath<Model, [Destination]> & Sendable,
        options: Schema.Attribute.Options, deleteRule: Schema.Relationship.DeleteRule,
        inverse: (any PartialKeyPath<Destination> & _RelationshipKeyPath & Sendable)?, originalName: String?
    ) -> ModelProperty {
        ModelProperty.toMany(name, keyPath, deleteRule: deleteRule, options: options).relating(
            inverse: inverse, originalName: originalName
        ) { inverse in RelationshipInverses<Model>.toMany(keyPath, inverse: inverse, destination: Destination.self) }
    }

    /// The relationship with its declared inverse, the maintainer that keeps the inverse side in
    /// step, and its original name (what both relationship kinds add to their property).
    private func relating(
        inverse: (AnyKeyPath & Sendable)?, originalName: String?,
        maintainer: @escaping @Sendable (AnyKeyPath) -> RelationshipInverses<Model>.Maintainer?
    ) -> ModelProperty {
        var property = self
        property.inverseKeyPath = inverse
        property.inverseMaintainer = maintainer
        return property.renamed(from: originalName)
    }
}
