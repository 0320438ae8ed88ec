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
        case .reference(let identifier): [identifier]
        case .array(let values): values.flatMap(\.referencedIdentifiers)
        default: []
        }
    }

    /// The value with every reference passed through `transform` (nil removes it from arrays and
    /// makes a to-one reference null).
    public func mapReferences(_ transform: (PersistentIdentifier) -> PersistentIdentifier?) -> AttributeValue {
        switch self {
        case .reference(let identifier): transform(identifier).map(AttributeValue.reference) ?? .null
        case .array(let values):
            .array(
                values.compactMap { value in
                    let mapped = value.mapReferences(transform)
                    return (value.referencedIdentifiers.isEmpty || !mapped.isNull) ? mapped : nil
                })
        default: self
        }
    }

    public var description: String {
        switch self {
        case .null: "nil"
        case .bool(let value): String(value)
        case .int(let value): String(value)
        case .double(let value): String(value)
        case .string(let value): "\"\(value)\""
        case .data(let value): "<\(value.count) bytes>"
        case .date(let value): value.formatted(.iso8601)
        case .uuid(let value): value.uuidString
        case .reference(let identifier): "→\(identifier)"
        case .array(let values): "[" + values.map(\.description).joined(separator: ", ") + "]"
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
        case (.reference(let entity), .reference(let identifier)): identifier.entityName == entity
        case (.array(let element), .array(let values)): values.allSatisfy { !$0.isNull && element.accepts($0) }
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
        case .reference(let entity): entity
        case .array(let element): "[\(element)]"
        }
    }
}
