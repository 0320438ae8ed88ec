/// The entities of a store: their attributes, relationships and unique constraints.
///
/// ```swift
/// let schema = Schema([
///     Schema.Entity("Trip", attributes: [
///         .init("name", .string, options: [.preserveValueOnDeletion]),
///         .init("destination", .string),
///     ], uniquenessConstraints: [["name"]]),
/// ])
/// ```
public struct Schema: Hashable, Sendable, Codable {
    /// The entities, in the order given (for a schema of model types: the types given, then those
    /// their relationships reach).
    public var entities: [Entity]
    /// The model types a schema made from types knows, by entity name (not part of equality,
    /// hashing or coding): what ``ModelContainer/init(for:configurations:)-(Schema,_)`` opens.
    var modelTypes: [String: any PersistentModel.Type] = [:]

    private enum CodingKeys: String, CodingKey { case entities }

    /// A schema of these entities, spelled out (for stores and tests without model types).
    public init(_ entities: [Entity]) {
        self.entities = entities
    }

    /// The schema of these model types and of every model type their relationships reach
    /// (SwiftData's `Schema([Trip.self, …])`).
    public init(_ types: [any PersistentModel.Type]) {
        let modelTypes = ModelTypes(types)
        self.init(modelTypes.all.map { $0.schemaEntity })
        self.modelTypes = modelTypes.byEntityName
    }

    /// Equal when the entities are (the model types behind them do not count).
    public static func == (lhs: Schema, rhs: Schema) -> Bool { lhs.entities == rhs.entities }

    /// Hashes the entities.
    public func hash(into hasher: inout Hasher) { hasher.combine(entities) }

    /// `Schema(Trip.self, BucketListItem.self)`.
    public init(_ types: any PersistentModel.Type...) {
        self.init(types)
    }

    /// The entity with this name, if the schema has one.
    public func entity(named name: String) -> Entity? {
        entities.first { $0.name == name }
    }

    /// An entity: a name, properties and unique constraints.
    public struct Entity: Hashable, Sendable, Codable {
        /// The entity's name: a model type's name (``PersistentModel/entityName``).
        public var name: String
        /// The value attributes, in declaration order.
        public var attributes: [Attribute]
        /// The relationships, in declaration order.
        public var relationships: [Relationship]
        /// Sets of property names whose combined values are unique (SwiftData's `#Unique`); a
        /// single `.unique` attribute is a constraint of one.
        public var uniquenessConstraints: [[String]]

        /// An entity with these properties and constraints.
        public init(
            _ name: String, attributes: [Attribute] = [], relationships: [Relationship] = [],
            uniquenessConstraints: [[String]] = []
        ) {
            self.name = name
            self.attributes = attributes
            self.relationships = relationships
            self.uniquenessConstraints = uniquenessConstraints
        }

        /// Every unique constraint, including single `.unique` attributes.
        public var allUniquenessConstraints: [[String]] {
            uniquenessConstraints + attributes.filter { $0.options.contains(.unique) }.map { [$0.name] }
        }

        /// Attributes and relationships as stored properties, in declaration order.
        public var properties: [Property] {
            attributes.map {
                Property(
                    name: $0.name, valueType: $0.valueType, isOptional: $0.isOptional,
                    options: $0.options, defaultValue: $0.defaultValue, originalName: $0.originalName)
            }
                + relationships.map {
                    Property(
                        name: $0.name, valueType: $0.valueType, isOptional: !$0.isToMany,
                        options: $0.options, defaultValue: $0.isToMany ? .array([]) : .null,
                        originalName: $0.originalName)
                }
        }

        func hasProperty(named name: String) -> Bool {
            attributes.contains { $0.name == name } || relationships.contains { $0.name == name }
        }

        /// Looks the name up without building `properties` (called per value on every save).
        public func property(named name: String) -> Property? {
            if let attribute = attributes.first(where: { $0.name == name }) {
                return Property(
                    name: attribute.name, valueType: attribute.valueType, isOptional: attribute.isOptional,
                    options: attribute.options, defaultValue: attribute.defaultValue,
                    originalName: attribute.originalName)
            }
            guard let relationship = relationships.first(where: { $0.name == name }) else { return nil }
            return Property(
                name: relationship.name, valueType: relationship.valueType, isOptional: !relationship.isToMany,
                options: relationship.options, defaultValue: relationship.isToMany ? .array([]) : .null,
                originalName: relationship.originalName)
        }

        /// The relationship with this name, if the entity has one.
        public func relationship(named name: String) -> Relationship? {
            relationships.first { $0.name == name }
        }
    }

    /// A stored property of any kind, as the store sees it.
    public struct Property: Hashable, Sendable {
        /// The property's name.
        public var name: String
        /// Its values' type (a relationship's is a reference, or an array of references).
        public var valueType: ValueType
        /// Whether it may hold ``AttributeValue/null`` (a to-one relationship may; a to-many one is
        /// an array).
        public var isOptional: Bool
        /// The attribute's (or relationship's) options.
        public var options: Attribute.Options
        /// The value it has when a snapshot omits it (`.null` for a to-one relationship, an empty
        /// array for a to-many one).
        public var defaultValue: AttributeValue?
        /// The name the property was stored under before a rename (`@Attribute(originalName:)`).
        public var originalName: String?
    }

    /// A value attribute.
    public struct Attribute: Hashable, Sendable, Codable {
        /// Options of an attribute (SwiftData's `Schema.Attribute.Option`s), as in
        /// `@Attribute(.unique, .preserveValueOnDeletion)`.
        public struct Options: OptionSet, Hashable, Sendable, Codable {
            /// The options' bits: 1 ``unique``, 2 ``preserveValueOnDeletion``.
            public let rawValue: Int
            /// The options with these bits.
            public init(rawValue: Int) { self.rawValue = rawValue }
            /// Values are unique within the entity; a colliding insert updates the existing model.
            public static let unique = Options(rawValue: 1)
            /// The value is kept in the delete change's tombstone.
            public static let preserveValueOnDeletion = Options(rawValue: 2)
        }

        /// The attribute's name (the Swift property's name).
        public var name: String
        /// Its values' type.
        public var valueType: ValueType
        /// Whether it may hold ``AttributeValue/null`` (an `Optional` property).
        public var isOptional: Bool
        /// Its options.
        public var options: Options
        /// The value a snapshot gets when it omits the attribute (and the value older records
        /// imply for an attribute added later).
        public var defaultValue: AttributeValue?
        /// The name the attribute was stored under before a rename (`@Attribute(originalName:)`):
        /// a migration keeps its values and its history under the new name.
        public var originalName: String?

        /// An attribute; an optional one defaults to ``AttributeValue/null`` unless given another
        /// default.
        public init(
            _ name: String, _ valueType: ValueType, isOptional: Bool = false, options: Options = [],
            defaultValue: AttributeValue? = nil, originalName: String? = nil
        ) {
            self.name = name
            self.valueType = valueType
            self.isOptional = isOptional
            self.options = options
            self.defaultValue = defaultValue ?? (isOptional ? .null : nil)
            self.originalName = originalName
        }
    }

    /// A reference to other models, stored as identifiers.
    public struct Relationship: Hashable, Sendable, Codable {
        /// What deleting the source does to the related models (see `DataStore` saves).
        public enum DeleteRule: String, Hashable, Sendable, Codable {
            /// References to the deleted model are removed (to-one set to nil).
            case nullify
            /// Related models are deleted too.
            case cascade
            /// The delete fails while related models exist.
            case deny
        }

        /// The relationship's name (the Swift property's name).
        public var name: String
        /// The entity of the related models.
        public var destination: String
        /// Whether it holds many models (an array) or at most one (an optional).
        public var isToMany: Bool
        /// What deleting a model does to the models this relationship holds.
        public var deleteRule: DeleteRule
        /// Its options (`.preserveValueOnDeletion` keeps its references in a delete's tombstone).
        public var options: Attribute.Options
        /// The name the relationship was stored under before a rename (`@Relationship(originalName:)`).
        public var originalName: String?

        /// A relationship to `destination` models.
        public init(
            _ name: String, destination: String, isToMany: Bool = false, deleteRule: DeleteRule = .nullify,
            options: Attribute.Options = [], originalName: String? = nil
        ) {
            self.name = name
            self.destination = destination
            self.isToMany = isToMany
            self.deleteRule = deleteRule
            self.options = options
            self.originalName = originalName
        }

        /// ``ValueType/reference(_:)`` of the destination, or an array of such references.
        public var valueType: ValueType { isToMany ? .array(.reference(destination)) : .reference(destination) }
    }
}
