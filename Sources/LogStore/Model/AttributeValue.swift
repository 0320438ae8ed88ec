import Foundation

/// A value of an attribute or relationship, from a closed set of types.
///
/// Strings compare and hash with Swift `String` semantics (canonical equivalence:
/// `"é" == "e\u{301}"`), so equality, unique keys and sorting never depend on encoded bytes.
/// A to-one relationship is a ``reference(_:)`` (or ``null``); a to-many relationship is an
/// ``array(_:)`` of references.
public enum AttributeValue: Hashable, Sendable, CustomStringConvertible {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case data(Data)
    case date(Date)
    case uuid(UUID)
    /// Boxed: an identifier is 48 bytes, and inline it made every value 56 bytes (24 boxed) —
    /// in every stored row, unique-index key and snapshot, references or not.
    indirect case reference(PersistentIdentifier)
    case array([AttributeValue])

    public var isNull: Bool { if case .null = self { true } else { false } }

    /// The identifiers this value refers to (a reference, or the references in an array).
    public var referencedIdentifiers: [PersistentIdentifier] {
        switch self {
        case let .reference(identifier): [identifier]
        case let .array(values): values.flatMap(\.referencedIdentifiers)
        default: []
        }
    }

    /// The value with every reference passed through `transform` (nil removes it from arrays and
    /// makes a to-one reference null).
    public func mapReferences(_ transform: (PersistentIdentifier) -> PersistentIdentifier?) -> AttributeValue {
        switch self {
        case let .reference(identifier): transform(identifier).map(AttributeValue.reference) ?? .null
        case let .array(values):
            .array(values.compactMap { value in
                let mapped = value.mapReferences(transform)
                return (value.referencedIdentifiers.isEmpty || !mapped.isNull) ? mapped : nil
            })
        default: self
        }
    }

    public var description: String {
        switch self {
        case .null: "nil"
        case let .bool(value): String(value)
        case let .int(value): String(value)
        case let .double(value): String(value)
        case let .string(value): "\"\(value)\""
        case let .data(value): "<\(value.count) bytes>"
        case let .date(value): value.formatted(.iso8601)
        case let .uuid(value): value.uuidString
        case let .reference(identifier): "→\(identifier)"
        case let .array(values): "[" + values.map(\.description).joined(separator: ", ") + "]"
        }
    }
}

/// The type of an attribute's values.
public indirect enum ValueType: Hashable, Sendable, Codable, CustomStringConvertible {
    case bool
    case int
    case double
    case string
    case data
    case date
    case uuid
    /// A reference to a model of the named entity.
    case reference(String)
    /// An array of values of one type (a to-many relationship is `.array(.reference(…))`).
    case array(ValueType)

    /// Whether `value` is of this type (`null` is decided by optionality, not here).
    public func accepts(_ value: AttributeValue) -> Bool {
        switch (self, value) {
        case (.bool, .bool), (.int, .int), (.double, .double), (.string, .string), (.data, .data),
             (.date, .date), (.uuid, .uuid):
            true
        case let (.reference(entity), .reference(identifier)): identifier.entityName == entity
        case let (.array(element), .array(values)): values.allSatisfy { !$0.isNull && element.accepts($0) }
        default: false
        }
    }

    public var description: String {
        switch self {
        case .bool: "Bool"
        case .int: "Int"
        case .double: "Double"
        case .string: "String"
        case .data: "Data"
        case .date: "Date"
        case .uuid: "UUID"
        case let .reference(entity): entity
        case let .array(element): "[\(element)]"
        }
    }
}
