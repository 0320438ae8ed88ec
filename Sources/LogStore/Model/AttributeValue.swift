import Foundation

/// A value of an attribute or relationship, from a closed set of types.
///
/// Strings compare and hash with Swift `String` semantics (canonical equivalence:
/// `"é" == "e\u{301}"`), so equality, unique keys and sorting never depend on encoded bytes.
/// A to-one relationship is a ``reference(_:)`` (or ``null``); a to-many relationship is an
/// ``array(_:)`` of references.
public enum AttributeValue: Hashable, Sendable, CustomStringConvertible {
    /// No value: an optional attribute's `nil`, or an empty to-one relationship.
    case null
    /// A `Bool`.
    case bool(Bool)
    /// An integer: `Int`, `Int32` and `Int64` attributes are all stored as 64 bits.
    case int(Int64)
    /// A `Double`.
    case double(Double)
    /// A `String`, compared with Swift `String` semantics.
    case string(String)
    /// Bytes (a `Data` attribute, or a `Codable` value's JSON encoding).
    case data(Data)
    /// A `Date`.
    case date(Date)
    /// A `UUID`.
    case uuid(UUID)
    /// A reference to another model: a to-one relationship's value, or an element of a to-many
    /// one's array.
    ///
    /// Boxed: an identifier is 48 bytes, and inline it made every value 56 bytes (24 boxed) —
    /// in every stored row, unique-index key and snapshot, references or not.
    indirect case reference(PersistentIdentifier)
    /// An array: an array attribute's elements, or a to-many relationship's references.
    case array([AttributeValue])

    /// Whether this is ``null``.
    public var isNull: Bool { if case .null = self { true } else { false } }

    /// The identifiers this value refers to (a reference, or the references in an array).
    public var referencedIdentifiers: [PersistentIdentifier] {
        switch self {
        case .reference(let identifier): [identifier]
        case .array(let values): values.flatMap(\.referencedIdentifiers)
        default: []
        }
    }

    /// Whether the value is a reference or an array holding one (``referencedIdentifiers`` is not
    /// empty), found without making the array.
    var holdsReferences: Bool {
        switch self {
        case .reference: true
        case .array(let values): values.contains(where: \.holdsReferences)
        default: false
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

    /// The value for people: `nil`, a number, a quoted string, a byte count, an ISO 8601 date, a
    /// UUID, `→` and an identifier, or a bracketed list.
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
    /// `Bool` values.
    case bool
    /// Integers, stored as 64 bits (`Int`, `Int32`, `Int64`).
    case int
    /// `Double` values.
    case double
    /// `String` values.
    case string
    /// Bytes (`Data`, and `Codable` values as JSON).
    case data
    /// `Date` values.
    case date
    /// `UUID` values.
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

    /// The Swift spelling of the type (`Int`, `[String]`), or the entity name of a reference.
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
