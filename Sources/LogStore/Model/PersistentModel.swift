import Foundation
import Synchronization

/// A model class stored through a ``ModelContext`` — SwiftData's `PersistentModel`, without the
/// `@Model` macro: the class declares its entity and its properties by key path.
///
/// ```swift
/// final class Trip: PersistentModel {
///     static let schemaProperties: [ModelProperty<Trip>] = [
///         .attribute("name", \.name, options: [.preserveValueOnDeletion]),
///         .attribute("destination", \.destination),
///         .toMany("bucketList", \.bucketList, deleteRule: .cascade),
///     ]
///     static let uniquenessConstraints = [["name"]]
///
///     let modelState = ModelState()
///     var name = ""
///     var destination = ""
///     var bucketList: [BucketListItem] = []
///
///     required init() {}
/// }
/// ```
///
/// `init()` makes an empty instance that a fetch then fills property by property; `modelState`
/// holds the identifier and the context the instance belongs to.
public protocol PersistentModel: AnyObject, Hashable, Identifiable, SendableMetatype, _RelationshipWrapped {
    /// The entity name; by default the type's name.
    static var entityName: String { get }
    /// The stored properties, by key path.
    static var schemaProperties: [ModelProperty<Self>] { get }
    /// Sets of property names whose combined values are unique (`#Unique`).
    static var uniquenessConstraints: [[String]] { get }
    /// Identity and registration; declare it as `let modelState = ModelState()`.
    var modelState: ModelState { get }
    /// Whether the property values live in ``modelState`` (`@Model` classes, which report their
    /// own changes) rather than in stored properties (hand-written conformances).
    static var _usesModelStorage: Bool { get }
    /// An empty instance, which a fetch fills with stored values (`@Model` adds it).
    init()
}

extension PersistentModel {
    /// The type's name (`Trip`): the entity the schema and the store know it by.
    public static var entityName: String { EntityNameCache.name(of: Self.self) }
    /// None, unless the type declares some (`#Unique` does).
    public static var uniquenessConstraints: [[String]] { [] }
    public static var _usesModelStorage: Bool { false }

    /// The model's identifier: temporary until its first save, then permanent.
    public var persistentModelID: PersistentIdentifier { modelState.identifier(entityName: Self.entityName) }

    /// `Identifiable`: the persistent identifier (it changes when a temporary one becomes permanent).
    public var id: PersistentIdentifier { persistentModelID }

    /// Models are equal when they are the same instance (SwiftData's `PersistentModel` is
    /// `Hashable` by identity: its identifier changes at the first save).
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs === rhs }

    /// Hashes the instance's identity, like ``==(_:_:)``.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    /// The schema entity the declarations describe.
    public static var schemaEntity: Schema.Entity {
        var entity = Schema.Entity(entityName, uniquenessConstraints: uniquenessConstraints)
        for property in schemaProperties {
            switch property.relationship {
            case let relationship?: entity.relationships.append(relationship)
            case nil: entity.attributes.append(property.attribute!)
            }
        }
        return entity
    }
}

/// A model's identity and the context it is registered in.
///
/// `@unchecked Sendable`: the fields are only changed by the owning context, which, like
/// SwiftData's `ModelContext`, is used from one thread or actor at a time.
public final class ModelState: @unchecked Sendable {
    private(set) var storedIdentifier: PersistentIdentifier?
    /// What an empty property slot of a `@Model` class reads while a fetch writes that property
    /// through its key path (ModelState+Storage.swift).
    var seedValue: (name: String, value: Any)?
    /// Names of the properties set since the last save or fetch (tracked models).
    var changedNames: Set<String> = []
    /// A fetch is filling the model: sets are not changes.
    var isFilling = false
    /// Why ``ModelContext/model(for:)`` made the model with no values (the store holds no such
    /// model, or could not be read): an empty slot's trap says so, and a save does not insert it.
    var unbackedReason: String?
    /// The context the model is registered in (a `ModelContext`; typed `AnyObject` here because
    /// the Model layer sits below the Context layer).
    weak var context: AnyObject?

    /// A fresh state: no identifier yet (a temporary one is made on first use), no context.
    public init() {}

    func identifier(entityName: @autoclosure () -> String) -> PersistentIdentifier {
        if let storedIdentifier { return storedIdentifier }
        let identifier = PersistentIdentifier.temporary(entityName: entityName())
        storedIdentifier = identifier
        return identifier
    }

    func assign(_ identifier: PersistentIdentifier) {
        storedIdentifier = identifier
    }
}

/// The default entity names (the type's name), made once per type: `String(describing:)` of a
/// metatype costs microseconds, and a save asked for it several times per model.
enum EntityNameCache {
    private static let names = Mutex<[ObjectIdentifier: String]>([:])

    static func name(of type: Any.Type) -> String {
        if let name = names.withLock({ $0[ObjectIdentifier(type)] }) { return name }
        let name = String(describing: type)
        names.withLock { $0[ObjectIdentifier(type)] = name }
        return name
    }
}
