/// Makes a final class a model stored by LogStore, as SwiftData's `@Model` does: its stored `var`s
/// become persisted properties (attributes, or relationships when their type is another model or
/// an array of models), it conforms to ``PersistentModel``, `Observable`, `Identifiable` and
/// `Hashable` (by identity), and it reports its own changes, so a save costs what changed.
///
/// ```swift
/// @Model
/// final class Trip {
///     #Unique<Trip>([\.name, \.startDate, \.endDate])
///
///     @Attribute(.preserveValueOnDeletion) var name: String
///     var destination: String
///     var startDate: Date
///     var endDate: Date
///     @Relationship(deleteRule: .cascade, inverse: \BucketListItem.trip)
///     var bucketList: [BucketListItem] = [BucketListItem]()
///     @Transient var isSelected = false
///
///     init(name: String, destination: String, startDate: Date, endDate: Date) {
///         self.name = name
///         self.destination = destination
///         self.startDate = startDate
///         self.endDate = endDate
///     }
/// }
/// ```
///
/// The class must be `final` (a non-final class is an error with an "Add 'final'" fix-it:
/// ``PersistentModel`` names `Self` in `schemaProperties`). A persisted property is an
/// ``AttributeConvertible`` value, an enum with such raw values (stored raw), another `Codable`
/// value (stored as JSON), a model, an optional model, or an array or optional array of models;
/// any other type fails to type-check with a message saying so. Persisted properties need an
/// explicit type. The macro adds `required init()` (what a fetch
/// uses before it fills the properties), `modelState`, `schemaProperties` and
/// `uniquenessConstraints`.
@attached(member, names: named(schemaProperties), named(uniquenessConstraints), named(indexes), named(modelState),
          named(init), named(_$observationRegistrar), named(_usesModelStorage))
@attached(memberAttribute)
@attached(extension, conformances: PersistentModel, Observable)
public macro Model() = #externalMacro(module: "LogStoreMacros", type: "ModelMacro")

/// The accessors `@Model` gives each persisted property (not written by hand).
@attached(accessor, names: named(init), named(get), named(set))
@attached(peer, names: prefixed(_))
public macro _PersistedProperty() = #externalMacro(module: "LogStoreMacros", type: "PersistedPropertyMacro")

/// Options of a persisted attribute of a `@Model` class: `.unique` (a constraint of one; a
/// colliding insert updates the stored model) and `.preserveValueOnDeletion` (kept in the
/// delete's history tombstone). `originalName` is the name it was stored under before a rename.
@attached(peer)
public macro Attribute(_ options: Schema.Attribute.Options..., originalName: String? = nil, hashModifier: String? = nil) =
    #externalMacro(module: "LogStoreMacros", type: "MarkerMacro")

/// A relationship of a `@Model` class: what deleting the model does to the related ones
/// (`.nullify`, `.cascade`, `.deny`), and the inverse property on the other side, which LogStore
/// keeps in step (setting either side updates the other).
@attached(peer)
public macro Relationship(
    _ options: Schema.Attribute.Options..., deleteRule: Schema.Relationship.DeleteRule = .nullify,
    minimumModelCount: Int? = 0, maximumModelCount: Int? = 0, originalName: String? = nil,
    inverse: AnyKeyPath? = nil, hashModifier: String? = nil
) = #externalMacro(module: "LogStoreMacros", type: "MarkerMacro")

/// A stored property of a `@Model` class that is not persisted.
@attached(peer)
public macro Transient() = #externalMacro(module: "LogStoreMacros", type: "MarkerMacro")

/// Unique constraints of a `@Model` class, each a list of its properties whose values together
/// are unique: `#Unique<Trip>([\.name, \.startDate, \.endDate])`. An insert that collides updates
/// the stored model (or throws, with ``UniqueCollisionPolicy/throw``).
@freestanding(declaration)
public macro Unique<Model>(_ constraints: [PartialKeyPath<Model>]...) =
    #externalMacro(module: "LogStoreMacros", type: "MarkerMacro")

/// Indexes of a `@Model` class: `#Index<Trip>([\.startDate], [\.name, \.destination])`.
/// Recorded as the type's `indexes`; LogStore's in-memory state answers fetches without them
/// today, so they are accepted and not yet used.
@freestanding(declaration)
public macro Index<Model>(_ indices: [PartialKeyPath<Model>]...) =
    #externalMacro(module: "LogStoreMacros", type: "MarkerMacro")
