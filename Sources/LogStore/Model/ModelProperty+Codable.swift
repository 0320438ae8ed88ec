import Foundation

// `@Model` attributes of types that are not ``AttributeConvertible``, as SwiftData stores them:
// an enum (any `RawRepresentable` whose raw value is convertible) as its raw value, and any other
// `Codable` value (structs, enums with payloads, arrays of them) as JSON in a `.data` attribute.
// Overload resolution picks these only when the plain attribute and relationship overloads do not
// match (the Codable ones are disfavoured: `String` is Codable too, but stays a string).
//
// A predicate on such a property is evaluated in memory (the store cannot compare the values it
// holds with the Swift value), so it costs a full read of the entity. JSON is written with sorted
// keys so that equal values encode to equal bytes (a `Set` or `Dictionary` inside a value still has
// no fixed order, so setting it may record a change that is not one).
extension ModelProperty {
    /// An enum (or other `RawRepresentable`) attribute of a `@Model` class, stored as its raw value.
    public static func _persisted<Value: RawRepresentable & SendableMetatype>(
        _ name: String, _ keyPath: any ReferenceWritableKeyPath<Model, Value> & Sendable,
        options: Schema.Attribute.Options = [], originalName: String? = nil, defaultValue: Value? = nil,
        slot: (@Sendable (Model) -> Value?)? = nil
    ) -> ModelProperty where Value.RawValue: AttributeConvertible {
        converted(name, keyPath, slot: slot, options: options, valueType: Value.RawValue.valueType, isOptional: false,
                  encode: { $0.rawValue.attributeValue },
                  decode: { Value.RawValue(attributeValue: $0).flatMap(Value.init(rawValue:)) }).renamed(from: originalName)
            .defaulting(to: defaultValue.map { $0.rawValue.attributeValue })
    }

    /// An optional enum (or other `RawRepresentable`) attribute of a `@Model` class.
    public static func _persisted<Value: RawRepresentable & SendableMetatype>(
        _ name: String, _ keyPath: any ReferenceWritableKeyPath<Model, Value?> & Sendable,
        options: Schema.Attribute.Options = [], originalName: String? = nil, defaultValue: Value?? = nil,
        slot: (@Sendable (Model) -> Value??)? = nil
    ) -> ModelProperty where Value.RawValue: AttributeConvertible {
        converted(name, keyPath, slot: slot, options: options, valueType: Value.RawValue.valueType, isOptional: true,
                  encode: { $0?.rawValue.attributeValue ?? .null },
                  decode: { value -> Value?? in
                      if value.isNull { return .some(nil) }
                      return Value.RawValue(attributeValue: value).flatMap(Value.init(rawValue:)).map { .some($0) }
                  }).renamed(from: originalName)
            .defaulting(to: defaultValue.map { $0?.rawValue.attributeValue ?? .null })
    }

    /// A `Codable` attribute of a `@Model` class (a struct, an enum with payloads, an array of
    /// them), stored as JSON data.
    @_disfavoredOverload
    public static func _persisted<Value: Codable & SendableMetatype>(
        _ name: String, _ keyPath: any ReferenceWritableKeyPath<Model, Value> & Sendable,
        options: Schema.Attribute.Options = [], originalName: String? = nil, defaultValue: Value? = nil,
        slot: (@Sendable (Model) -> Value?)? = nil
    ) -> ModelProperty {
        converted(name, keyPath, slot: slot, options: options, valueType: .data, isOptional: false,
                  encode: { .data(CodableAttribute.encode($0, entity: Model.entityName, property: name)) },
                  decode: { value in
                      guard case let .data(data) = value else { return nil }
                      return try? CodableAttribute.decoder.decode(Value.self, from: data)
                  }).renamed(from: originalName)
            .defaulting(to: defaultValue.map { .data(CodableAttribute.encode($0, entity: Model.entityName, property: name)) })
    }

    /// An optional `Codable` attribute of a `@Model` class, stored as JSON data or `nil`.
    @_disfavoredOverload
    public static func _persisted<Value: Codable & SendableMetatype>(
        _ name: String, _ keyPath: any ReferenceWritableKeyPath<Model, Value?> & Sendable,
        options: Schema.Attribute.Options = [], originalName: String? = nil, defaultValue: Value?? = nil,
        slot: (@Sendable (Model) -> Value??)? = nil
    ) -> ModelProperty {
        converted(name, keyPath, slot: slot, options: options, valueType: .data, isOptional: true,
                  encode: { $0.map { .data(CodableAttribute.encode($0, entity: Model.entityName, property: name)) } ?? .null },
                  decode: { value -> Value?? in
                      if value.isNull { return .some(nil) }
                      guard case let .data(data) = value else { return nil }
                      return (try? CodableAttribute.decoder.decode(Value.self, from: data)).map { .some($0) }
                  }).renamed(from: originalName)
            .defaulting(to: defaultValue.map { value in
                value.map { .data(CodableAttribute.encode($0, entity: Model.entityName, property: name)) } ?? .null
            })
    }

    /// An attribute whose Swift value converts to and from an ``AttributeValue`` through
    /// `encode` and `decode` (`nil`: the stored value does not fit).
    static func converted<Value>(
        _ name: String, _ keyPath: any ReferenceWritableKeyPath<Model, Value> & Sendable,
        slot: (@Sendable (Model) -> Value?)? = nil,
        options: Schema.Attribute.Options, valueType: ValueType, isOptional: Bool,
        encode: @escaping @Sendable (Value) -> AttributeValue, decode: @escaping @Sendable (AttributeValue) -> Value?
    ) -> ModelProperty {
        let value = reader(keyPath, slot: slot)
        return ModelProperty(
            name: name, keyPath: keyPath,
            attribute: Schema.Attribute(name, valueType, isOptional: isOptional, options: options),
            relationship: nil,
            read: { encode(value($0)) },
            write: { model, value, _ in
                guard let converted = decode(value) else {
                    throw ModelError.valueTypeMismatch(entity: Model.entityName, property: name, value: value)
                }
                Self.set(model, name, keyPath, converted)
            },
            related: { _ in [] }, destinationType: nil)
    }
}

/// The JSON coding of `Codable` attributes.
enum CodableAttribute {
    static let decoder = JSONDecoder()

    /// The value as JSON with sorted keys. A value whose `encode(to:)` throws cannot be stored:
    /// that is a programmer error in the value's type, reported with the property it belongs to.
    static func encode<Value: Encodable>(_ value: Value, entity: String, property: String) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        do {
            return try encoder.encode(value)
        } catch {
            preconditionFailure("\(entity).\(property): \(Value.self) failed to encode as JSON: \(error)")
        }
    }
}
