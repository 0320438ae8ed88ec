import Foundation

// The overloads of `_persisted` that match when no real one does, so that an unsupported property
// type, or `@Relationship` on something that is not a relationship, fails type-checking with a
// message that says what would work (instead of "no exact matches in call"). Being unavailable
// and unconstrained, they lose to every real overload.

/// Key paths that can name a relationship's inverse: to a model, an optional model, or an array
/// of models. `@Relationship(inverse:)` takes only these, so naming an attribute of the other
/// model fails to type-check.
public protocol _RelationshipKeyPath {}

/// The value types of a relationship: an optional model, an array of models, or an optional array
/// of models.
public protocol _RelationshipValue {}

/// What an optional relationship wraps: a model (every ``PersistentModel`` is one) or an array of
/// models.
public protocol _RelationshipWrapped {}

extension Optional: _RelationshipValue where Wrapped: _RelationshipWrapped {}
extension Array: _RelationshipValue where Element: PersistentModel {}
extension Array: _RelationshipWrapped where Element: PersistentModel {}
extension ReferenceWritableKeyPath: _RelationshipKeyPath where Value: _RelationshipValue {}

extension ModelProperty {
    /// Not a storable type: see the message.
    @available(*, unavailable, message: """
        a persisted property of a @Model class must be an AttributeConvertible value (Bool, Int, Int64, Int32, \
        Double, String, Data, Date, UUID, or an optional or array of one), an enum with such raw values, a \
        Codable value, another model, an optional model, or an array of models; mark anything else @Transient
        """)
    public static func _persisted<Value>(
        _ name: String, _ keyPath: any ReferenceWritableKeyPath<Model, Value> & Sendable,
        options: Schema.Attribute.Options = [], originalName: String? = nil, defaultValue: Value? = nil,
        slot: (@Sendable (Model) -> Value?)? = nil
    ) -> ModelProperty {
        fatalError("unavailable")
    }

    /// `@Relationship(deleteRule:)` on a property that is not a relationship: see the message.
    @available(*, unavailable, message: """
        @Relationship applies to a property whose type is a model, an optional model, or an optional or plain array \
        of models, and its inverse: must name such a property of the destination model
        """)
    public static func _persisted<Value>(
        _ name: String, _ keyPath: any ReferenceWritableKeyPath<Model, Value> & Sendable,
        options: Schema.Attribute.Options = [], deleteRule: Schema.Relationship.DeleteRule,
        inverse: AnyKeyPath? = nil, originalName: String? = nil, defaultValue: Value? = nil,
        slot: (@Sendable (Model) -> Value?)? = nil
    ) -> ModelProperty {
        fatalError("unavailable")
    }

    /// `@Relationship(inverse:)` on a property that is not a relationship, or naming an inverse
    /// that is not one: see the message.
    @available(*, unavailable, message: """
        @Relationship applies to a property whose type is a model, an optional model, or an optional or plain array \
        of models, and its inverse: must name such a property of the destination model
        """)
    @_disfavoredOverload
    public static func _persisted<Value>(
        _ name: String, _ keyPath: any ReferenceWritableKeyPath<Model, Value> & Sendable,
        options: Schema.Attribute.Options = [], deleteRule: Schema.Relationship.DeleteRule = .nullify,
        inverse: AnyKeyPath, originalName: String? = nil, defaultValue: Value? = nil,
        slot: (@Sendable (Model) -> Value?)? = nil
    ) -> ModelProperty {
        fatalError("unavailable")
    }
}
