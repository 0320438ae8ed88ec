import Foundation

/// A Swift type that can be stored as an attribute: it names its ``ValueType`` and converts to
/// and from ``AttributeValue``. Conformances: `Bool`, `Int`, `Int64`, `Int32`, `Double`,
/// `String`, `Data`, `Date`, `UUID`, and optionals and arrays of these.
public protocol AttributeConvertible: SendableMetatype {
    static var valueType: ValueType { get }
    static var isOptional: Bool { get }
    var attributeValue: AttributeValue { get }
    init?(attributeValue: AttributeValue)
}

extension AttributeConvertible {
    public static var isOptional: Bool { false }
}

extension Bool: AttributeConvertible {
    public static var valueType: ValueType { .bool }
    public var attributeValue: AttributeValue { .bool(self) }
    public init?(attributeValue: AttributeValue) {
        guard case .bool(let value) = attributeValue else { return nil }
        self = value
    }
}

extension Int64: AttributeConvertible {
    public static var valueType: ValueType { .int }
    public var attributeValue: AttributeValue { .int(self) }
    public init?(attributeValue: AttributeValue) {
        guard case .int(let value) = attributeValue else { return nil }
        self = value
    }
}

extension Int: AttributeConvertible {
    public static var valueType: ValueType { .int }
    public var attributeValue: AttributeValue { .int(Int64(self)) }
    public init?(attributeValue: AttributeValue) {
        guard case .int(let value) = attributeValue, let exact = Int(exactly: value) else { return nil }
        self = exact
    }
}

extension Int32: AttributeConvertible {
    public static var valueType: ValueType { .int }
    public var attributeValue: AttributeValue { .int(Int64(self)) }
    public init?(attributeValue: AttributeValue) {
        guard case .int(let value) = attributeValue, let exact = Int32(exactly: value) else { return nil }
        self = exact
    }
}

extension Double: AttributeConvertible {
    public static var valueType: ValueType { .double }
    public var attributeValue: AttributeValue { .double(self) }
    public init?(attributeValue: AttributeValue) {
        guard case .double(let value) = attributeValue else { return nil }
        self = value
    }
}

extension String: AttributeConvertible {
    public static var valueType: ValueType { .string }
    public var attributeValue: AttributeValue { .string(self) }
    public init?(attributeValue: AttributeValue) {
        guard case .string(let value) = attributeValue else { return nil }
        self = value
    }
}

extension Data: AttributeConvertible {
    public static var valueType: ValueType { .data }
    public var attributeValue: AttributeValue { .data(self) }
    public init?(attributeValue: AttributeValue) {
        guard case .data(let value) = attributeValue else { return nil }
        self = value
    }
}

extension Date: AttributeConvertible {
    public static var valueType: ValueType { .date }
    public var attributeValue: AttributeValue { .date(self) }
    public init?(attributeValue: AttributeValue) {
        guard case .date(let value) = attributeValue else { return nil }
        self = value
    }
}

extension UUID: AttributeConvertible {
    public static var valueType: ValueType { .uuid }
    public var attributeValue: AttributeValue { .uuid(self) }
    public init?(attributeValue: AttributeValue) {
        guard case .uuid(let value) = attributeValue else { return nil }
        self = value
    }
}

extension Optional: AttributeConvertible where Wrapped: AttributeConvertible {
    public static var valueType: ValueType { Wrapped.valueType }
    public static var isOptional: Bool { true }
    public var attributeValue: AttributeValue { self?.attributeValue ?? .null }
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
    public static var valueType: ValueType { .array(Element.valueType) }
    public var attributeValue: AttributeValue { .array(map(\.attributeValue)) }
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
