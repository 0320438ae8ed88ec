import Foundation

/// A Swift type that can be stored as an attribute: it names its ``ValueType`` and converts to
/// and from ``AttributeValue``. Conformances: `Bool`, `Int`, `Int64`, `Int32`, `Double`,
/// `String`, `Data`, `Date`, `UUID`, and optionals and arrays of these.
public protocol AttributeConvertible: SendableMetatype {
    /// The type of value the schema records for an attribute of this type (for an optional, the
    /// wrapped type's).
    static var valueType: ValueType { get }
    /// Whether an attribute of this type may hold no value (``AttributeValue/null``).
    static var isOptional: Bool { get }
    /// This value as stored.
    var attributeValue: AttributeValue { get }
    /// The value a stored one stands for, or `nil` when it is not a value of this type (another
    /// case, or an integer out of this type's range).
    init?(attributeValue: AttributeValue)
}

extension AttributeConvertible {
    /// `false`: only `Optional` holds no value.
    public static var isOptional: Bool { false }
}

extension Bool: AttributeConvertible {
    /// ``ValueType/bool``.
    public static var valueType: ValueType { .bool }
    /// The value as ``AttributeValue/bool(_:)``.
    public var attributeValue: AttributeValue { .bool(self) }
    /// The value of an ``AttributeValue/bool(_:)``; `nil` for any other value.
    public init?(attributeValue: AttributeValue) {
        guard case .bool(let value) = attributeValue else { return nil }
        self = value
    }
}

extension Int64: AttributeConvertible {
    /// ``ValueType/int``.
    public static var valueType: ValueType { .int }
    /// The value as ``AttributeValue/int(_:)``.
    public var attributeValue: AttributeValue { .int(self) }
    /// The value of an ``AttributeValue/int(_:)``; `nil` for any other value.
    public init?(attributeValue: AttributeValue) {
        guard case .int(let value) = attributeValue else { return nil }
        self = value
    }
}

extension Int: AttributeConvertible {
    /// ``ValueType/int``.
    public static var valueType: ValueType { .int }
    /// The value as ``AttributeValue/int(_:)``.
    public var attributeValue: AttributeValue { .int(Int64(self)) }
    /// The value of an ``AttributeValue/int(_:)`` when it fits in an `Int`; `nil` for any other value.
    public init?(attributeValue: AttributeValue) {
        guard case .int(let value) = attributeValue, let exact = Int(exactly: value) else { return nil }
        self = exact
    }
}

extension Int32: AttributeConvertible {
    /// ``ValueType/int``.
    public static var valueType: ValueType { .int }
    /// The value as ``AttributeValue/int(_:)``.
    public var attributeValue: AttributeValue { .int(Int64(self)) }
    /// The value of an ``AttributeValue/int(_:)`` when it fits in an `Int32`; `nil` for any other value.
    public init?(attributeValue: AttributeValue) {
        guard case .int(let value) = attributeValue, let exact = Int32(exactly: value) else { return nil }
        self = exact
    }
}

extension Double: AttributeConvertible {
    /// ``ValueType/double``.
    public static var valueType: ValueType { .double }
    /// The value as ``AttributeValue/double(_:)``.
    public var attributeValue: AttributeValue { .double(self) }
    /// The value of an ``AttributeValue/double(_:)``; `nil` for any other value.
    public init?(attributeValue: AttributeValue) {
        guard case .double(let value) = attributeValue else { return nil }
        self = value
    }
}

extension String: AttributeConvertible {
    /// ``ValueType/string``.
    public static var valueType: ValueType { .string }
    /// The value as ``AttributeValue/string(_:)``.
    public var attributeValue: AttributeValue { .string(self) }
    /// The value of an ``AttributeValue/string(_:)``; `nil` for any other value.
    public init?(attributeValue: AttributeValue) {
        guard case .string(let value) = attributeValue else { return nil }
        self = value
    }
}

extension Data: AttributeConvertible {
    /// ``ValueType/data``.
    public static var valueType: ValueType { .data }
    /// The value as ``AttributeValue/data(_:)``.
    public var attributeValue: AttributeValue { .data(self) }
    /// The value of an ``AttributeValue/data(_:)``; `nil` for any other value.
    public init?(attributeValue: AttributeValue) {
        guard case .data(let value) = attributeValue else { return nil }
        self = value
    }
}

extension Date: AttributeConvertible {
    /// ``ValueType/date``.
    public static var valueType: ValueType { .date }
    /// The value as ``AttributeValue/date(_:)``.
    public var attributeValue: AttributeValue { .date(self) }
    /// The value of an ``AttributeValue/date(_:)``; `nil` for any other value.
    public init?(attributeValue: AttributeValue) {
        guard case .date(let value) = attributeValue else { return nil }
        self = value
    }
}

extension UUID: AttributeConvertible {
    /// ``ValueType/uuid``.
    public static var valueType: ValueType { .uuid }
    /// The value as ``AttributeValue/uuid(_:)``.
    public var attributeValue: AttributeValue { .uuid(self) }
    /// The value of an ``AttributeValue/uuid(_:)``; `nil` for any other value.
    public init?(attributeValue: AttributeValue) {
        guard case .uuid(let value) = attributeValue else { return nil }
        self = value
    }
}

extension Optional: AttributeConvertible where Wrapped: AttributeConvertible {
    /// The wrapped type's value type: optionality is recorded apart (``isOptional``).
    public static var valueType: ValueType { Wrapped.valueType }
    /// `true`: an optional attribute may hold ``AttributeValue/null``.
    public static var isOptional: Bool { true }
    /// The wrapped value's, or ``AttributeValue/null`` for `nil`.
    public var attributeValue: AttributeValue { self?.attributeValue ?? .null }
    /// `nil` wrapped in an optional for ``AttributeValue/null``, the wrapped type's value for one
    /// of its own; `nil` (no optional at all) for a value of another type.
    public init?(attributeValue: AttributeValue) {
        if attributeValue.isNull {
            self = .none
        } else if let value = Wrapped(attributeValue: attributeValue) {
            self = .some(value)
        } else {
            return nil
        }
    }
}

extension Array: AttributeConvertible where Element: AttributeConvertible {
    /// ``ValueType/array(_:)`` of the element type's value type.
    public static var valueType: ValueType { .array(Element.valueType) }
    /// The elements as an ``AttributeValue/array(_:)``, in order.
    public var attributeValue: AttributeValue { .array(map(\.attributeValue)) }
    /// The elements of an ``AttributeValue/array(_:)`` whose every element is a value of the
    /// element type; `nil` otherwise.
    public init?(attributeValue: AttributeValue) {
        guard case .array(let values) = attributeValue else { return nil }
        var elements: [Element] = []
        elements.reserveCapacity(values.count)
        for value in values {
            guard let element = Element(attributeValue: value) else { return nil }
            elements.append(element)
        }
        self = elements
    }
}
