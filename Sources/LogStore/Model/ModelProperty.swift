/// One stored property of a ``PersistentModel``: its name, schema metadata, and how to read and
/// write it on an instance through its key path.
public struct ModelProperty<Model: PersistentModel>: Sendable {
    /// Every field in one reference: the context reads a model's properties several times per save,
    /// and copying a struct of six closures cost six retains and releases each time (P4-ctx
    /// profile). Mutations copy the box first when it is shared (copy-on-write).
    final class Storage: @unchecked Sendable {
        // @unchecked: mutated only through a uniquely referenced box (`mutableStorage`).
        let name: String
        let keyPath: PartialKeyPath<Model> & Sendable
        var attribute: Schema.Attribute?
        var relationship: Schema.Relationship?
        var read: @Sendable (Model) -> AttributeValue
        let write: @Sendable (Model, AttributeValue, (PersistentIdentifier) throws -> (any PersistentModel)?) throws -> Void
        var related: @Sendable (Model) -> [any PersistentModel]
        let destinationType: (any PersistentModel.Type)?
        var inverseKeyPath: (AnyKeyPath & Sendable)?
        var inverseMaintainer: (@Sendable (AnyKeyPath) -> RelationshipInverses<Model>.Maintainer?)?

        init(
            name: String, keyPath: PartialKeyPath<Model> & Sendable, attribute: Schema.Attribute?,
            relationship: Schema.Relationship?, read: @escaping @Sendable (Model) -> AttributeValue,
            write: @escaping @Sendable (Model, AttributeValue, (PersistentIdentifier) throws -> (any PersistentModel)?)
                throws -> Void,
            related: @escaping @Sendable (Model) -> [any PersistentModel], destinationType: (any PersistentModel.Type)?,
            inverseKeyPath: (AnyKeyPath & Sendable)?,
            inverseMaintainer: (@Sendable (AnyKeyPath) -> RelationshipInverses<Model>.Maintainer?)?
        ) {
            self.name = name
            self.keyPath = keyPath
            self.attribute = attribute
            self.relationship = relationship
            self.read = read
            self.write = write
            self.related = related
            self.destinationType = destinationType
            self.inverseKeyPath = inverseKeyPath
            self.inverseMaintainer = inverseMaintainer
        }

        func copy() -> Storage {
            Storage(
                name: name, keyPath: keyPath, attribute: attribute, relationship: relationship, read: read,
                write: write, related: related, destinationType: destinationType, inverseKeyPath: inverseKeyPath,
                inverseMaintainer: inverseMaintainer)
        }
    }

    private var storage: Storage

    private var mutableStorage: Storage {
        mutating get {
            if !isKnownUniquelyReferenced(&storage) { storage = storage.copy() }
            return storage
        }
    }

    init(
        name: String, keyPath: PartialKeyPath<Model> & Sendable, attribute: Schema.Attribute?,
        relationship: Schema.Relationship?, read: @escaping @Sendable (Model) -> AttributeValue,
        write: @escaping @Sendable (Model, AttributeValue, (PersistentIdentifier) throws -> (any PersistentModel)?)
            throws -> Void,
        related: @escaping @Sendable (Model) -> [any PersistentModel], destinationType: (any PersistentModel.Type)?,
        inverseKeyPath: (AnyKeyPath & Sendable)? = nil,
        inverseMaintainer: (@Sendable (AnyKeyPath) -> RelationshipInverses<Model>.Maintainer?)? = nil
    ) {
        storage = Storage(
            name: name, keyPath: keyPath, attribute: attribute, relationship: relationship, read: read, write: write,
            related: related, destinationType: destinationType, inverseKeyPath: inverseKeyPath,
            inverseMaintainer: inverseMaintainer)
    }

    /// The property's name in the schema (the Swift property's name).
    public var name: String { storage.name }
    /// The model's key path to the property (history tombstones and updates map key paths to names).
    public var keyPath: PartialKeyPath<Model> & Sendable { storage.keyPath }
    var attribute: Schema.Attribute? {
        get { storage.attribute }
        set { mutableStorage.attribute = newValue }
    }
    var relationship: Schema.Relationship? {
        get { storage.relationship }
        set { mutableStorage.relationship = newValue }
    }
    /// Reads the property as a value; references are the related models' identifiers.
    var read: @Sendable (Model) -> AttributeValue { storage.read }
    /// Writes a value; `resolve` turns identifiers into registered model instances.
    var write: @Sendable (Model, AttributeValue, (PersistentIdentifier) throws -> (any PersistentModel)?) throws -> Void {
        storage.write
    }
    /// The related instances (for relationships), so a save can insert unsaved ones.
    var related: @Sendable (Model) -> [any PersistentModel] { storage.related }
    /// The model type a relationship leads to (`nil` for attributes): a container opened for
    /// `Trip` finds `BucketListItem` through it.
    var destinationType: (any PersistentModel.Type)? { storage.destinationType }
    /// The inverse a `@Relationship(inverse:)` names: a key path of the destination type.
    var inverseKeyPath: (AnyKeyPath & Sendable)? {
        get { storage.inverseKeyPath }
        set { mutableStorage.inverseKeyPath = newValue }
    }
    /// For a relationship: given the inverse property's key path (of the destination type), what
    /// keeps it in step when this property is set (`nil` when the key path is not a relationship
    /// back to `Model`). Built where the types are known (``_persisted(_:_:options:deleteRule:inverse:originalName:)-2p4s5``).
    var inverseMaintainer: (@Sendable (AnyKeyPath) -> RelationshipInverses<Model>.Maintainer?)? {
        get { storage.inverseMaintainer }
        set { mutableStorage.inverseMaintainer = newValue }
    }

    /// A value attribute.
    /// `defaultValue` is what models stored without a value get: when the attribute is added,
    /// or when a migration makes an optional attribute required.
    public static func attribute<Value: AttributeConvertible>(
        _ name: String, _ keyPath: any ReferenceWritableKeyPath<Model, Value> & Sendable,
        options: Schema.Attribute.Options = [], defaultValue: Value? = nil
    ) -> ModelProperty {
        ModelProperty(
            name: name, keyPath: keyPath,
            attribute: Schema.Attribute(
                name, Value.valueType, isOptional: Value.isOptional, options: options,
                defaultValue: defaultValue?.attributeValue),
            relationship: nil,
            read: { $0[keyPath: keyPath].attributeValue },
            write: { model, value, _ in
                guard let converted = Value(attributeValue: value) else {
                    throw ModelError.valueTypeMismatch(entity: Model.entityName, property: name, value: value)
                }
                Self.set(model, name, keyPath, converted)
            },
            related: { _ in [] }, destinationType: nil)
    }

    /// The property as stored before a rename under `originalName` (`@Attribute(originalName:)`,
    /// `@Relationship(originalName:)`); `nil` leaves it as it is.
    public func renamed(from originalName: String?) -> ModelProperty {
        guard let originalName else { return self }
        var property = self
        property.attribute?.originalName = originalName
        property.relationship?.originalName = originalName
        return property
    }

    /// The property with this default value for stored models without a value (`nil` leaves it).
    func defaulting(to value: AttributeValue?) -> ModelProperty {
        guard let value else { return self }
        var property = self
        property.attribute?.defaultValue = value
        return property
    }

    /// The property read by `read` (and, for a relationship, its related models by `related`)
    /// instead of through its key path: what `@Model`'s slot readers become, built where the
    /// model's types are known (``_persisted(_:_:options:originalName:defaultValue:slot:)``).
    @usableFromInline
    func _reading(
        _ read: @escaping @Sendable (Model) -> AttributeValue, related: (@Sendable (Model) -> [any PersistentModel])?
    ) -> ModelProperty {
        var property = self
        property.mutableStorage.read = read
        if let related { property.mutableStorage.related = related }
        return property
    }

    /// How a property is read from the instance's slot when `@Model` gave one and it holds a
    /// value, else through the key path — the getter, which answers an empty slot as it always
    /// does. Inlinable: made where the model's types are known (the common `_persisted`
    /// overloads), a read is a direct call; made in generic code, each read looks up the
    /// metadata of `Value?`.
    @inlinable
    static func reader<Value>(
        _ keyPath: any ReferenceWritableKeyPath<Model, Value> & Sendable, slot: (@Sendable (Model) -> Value?)?
    ) -> @Sendable (Model) -> Value {
        guard let slot else { return { $0[keyPath: keyPath] } }
        return { model in slot(model) ?? model[keyPath: keyPath] }
    }

    /// Writes `value` through the property's key path (a fetch filling the model, a rollback). A
    /// key-path write reads the property first (get, then set), and a `@Model` instance that a
    /// fetch just made has no value yet to read: its empty slot reads `value` meanwhile.
    static func set<Value>(
        _ model: Model, _ name: String, _ keyPath: any ReferenceWritableKeyPath<Model, Value> & Sendable, _ value: Value
    ) {
        guard Model._usesModelStorage else {
            model[keyPath: keyPath] = value
            return
        }
        model.modelState.seeding(value, at: name) { model[keyPath: keyPath] = value }
    }

    /// A to-one relationship's `read` (its model's identifier) and `related` (its model) through `value`.
    @inlinable
    static func toOneReaders<Destination: PersistentModel>(_ value: @escaping @Sendable (Model) -> Destination?)
        -> (read: @Sendable (Model) -> AttributeValue, related: @Sendable (Model) -> [any PersistentModel])
    {
        ({ value($0).map { .reference($0.persistentModelID) } ?? .null }, { value($0).map { [$0] } ?? [] })
    }

    /// A to-many relationship's `read` (its models' identifiers) and `related` through `value`.
    @inlinable
    static func toManyReaders<Destination: PersistentModel>(_ value: @escaping @Sendable (Model) -> [Destination])
        -> (read: @Sendable (Model) -> AttributeValue, related: @Sendable (Model) -> [any PersistentModel])
    {
        ({ .array(value($0).map { .reference($0.persistentModelID) }) }, { value($0) })
    }

    /// A to-one relationship to another model.
    public static func toOne<Destination: PersistentModel>(
        _ name: String, _ keyPath: any ReferenceWritableKeyPath<Model, Destination?> & Sendable,
        deleteRule: Schema.Relationship.DeleteRule = .nullify, options: Schema.Attribute.Options = []
    ) -> ModelProperty {
        let readers = toOneReaders { $0[keyPath: keyPath] }
        return ModelProperty(
            name: name, keyPath: keyPath, attribute: nil,
            relationship: Schema.Relationship(
                name, destination: Destination.entityName, deleteRule: deleteRule, options: options),
            read: readers.read,
            write: { model, value, resolve in
                switch value {
                case .null:
                    Self.set(model, name, keyPath, Destination?.none)
                case .reference(let identifier):
                    guard let target = try resolve(identifier) as? Destination else {
                        throw ModelError.missingReference(
                            entity: Model.entityName, property: name, identifier: identifier)
                    }
                    Self.set(model, name, keyPath, Optional(target))
                default: throw ModelError.valueTypeMismatch(entity: Model.entityName, property: name, value: value)
                }
            },
            related: readers.related, destinationType: Destination.self)
    }

    /// A to-many relationship to other models.
    public static func toMany<Destination: PersistentModel>(
        _ name: String, _ keyPath: any ReferenceWritableKeyPath<Model, [Destination]> & Sendable,
        deleteRule: Schema.Relationship.DeleteRule = .nullify, options: Schema.Attribute.Options = []
    ) -> ModelProperty {
        let readers = toManyReaders { $0[keyPath: keyPath] }
        return ModelProperty(
            name: name, keyPath: keyPath, attribute: nil,
            relationship: Schema.Relationship(
                name, destination: Destination.entityName, isToMany: true,
                deleteRule: deleteRule, options: options),
            read: readers.read,
            write: { model, value, resolve in
                guard case .array(let values) = value else {
                    throw ModelError.valueTypeMismatch(entity: Model.entityName, property: name, value: value)
                }
                var targets: [Destination] = []
                for case .reference(let identifier) in values {
                    guard let target = try resolve(identifier) as? Destination else {
                        throw ModelError.missingReference(
                            entity: Model.entityName, property: name, identifier: identifier)
                    }
                    targets.append(target)
                }
                Self.set(model, name, keyPath, targets)
            },
            related: readers.related, destinationType: Destination.self)
    }
}

/// An error turning snapshots into model instances.
public enum ModelError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A stored value that the model's property cannot hold.
    case valueTypeMismatch(entity: String, property: String, value: AttributeValue)
    /// A relationship refers to a model that is not in the store.
    case missingReference(entity: String, property: String, identifier: PersistentIdentifier)
    /// An entity the container has no model type for.
    case unknownEntity(String)
    /// A primary key that is not a UUID (LogStore's identifiers hold UUID keys).
    case unsupportedPrimaryKey(type: String, value: String)

    /// A sentence saying what is wrong and where.
    public var description: String {
        switch self {
        case .valueTypeMismatch(let entity, let property, let value):
            "\(entity).\(property) cannot hold \(value)."
        case .missingReference(let entity, let property, let identifier):
            "\(entity).\(property) refers to \(identifier), which is not in the store."
        case .unknownEntity(let name):
            "The entity \(name) is not in the container's schema."
        case .unsupportedPrimaryKey(let type, let value):
            "A PersistentIdentifier's primary key is a UUID (or a string holding one); \(type) \"\(value)\" is not. "
                + "Mint UUID keys in a custom store."
        }
    }
}
