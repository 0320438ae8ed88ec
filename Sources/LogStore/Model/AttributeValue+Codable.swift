import Foundation

/// JSON form: one key naming the type — `{"string":"Lisbon"}`, `{"int":3}`, `{"null":true}`,
/// `{"date":785584800.25}` (seconds since 2001, Foundation's reference date, so no precision is
/// lost), `{"data":"<base64>"}`, `{"reference":{…identifier…}}`, `{"array":[…]}`.
extension AttributeValue: Codable {
    private enum Key: String, CodingKey {
        case null, bool, int, double, string, data, date, uuid, reference, array
    }

    /// Encodes the value in its JSON form (above): one key naming the case.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        switch self {
        case .null: try container.encode(true, forKey: .null)
        case .bool(let value): try container.encode(value, forKey: .bool)
        case .int(let value): try container.encode(value, forKey: .int)
        case .double(let value): try container.encode(value, forKey: .double)
        case .string(let value): try container.encode(value, forKey: .string)
        case .data(let value): try container.encode(value.base64EncodedString(), forKey: .data)
        case .date(let value): try container.encode(value.timeIntervalSinceReferenceDate, forKey: .date)
        case .uuid(let value): try container.encode(value, forKey: .uuid)
        case .reference(let value): try container.encode(value, forKey: .reference)
        case .array(let values): try container.encode(values, forKey: .array)
        }
    }

    /// Decodes a value from its JSON form; anything but exactly one known key throws
    /// `DecodingError.dataCorrupted`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Key.self)
        guard container.allKeys.count == 1, let key = container.allKeys.first else {
            throw DecodingError.dataCorrupted(
                .init(
                    codingPath: decoder.codingPath,
                    debugDescription: "an attribute value has exactly one type key"))
        }
        switch key {
        case .null: self = .null
        case .bool: self = .bool(try container.decode(Bool.self, forKey: key))
        case .int: self = .int(try container.decode(Int64.self, forKey: key))
        case .double: self = .double(try container.decode(Double.self, forKey: key))
        case .string: self = .string(try container.decode(String.self, forKey: key))
        case .data:
            guard let data = Data(base64Encoded: try container.decode(String.self, forKey: key)) else {
                throw DecodingError.dataCorruptedError(forKey: key, in: container, debugDescription: "not base64")
            }
            self = .data(data)
        case .date: self = .date(Date(timeIntervalSinceReferenceDate: try container.decode(Double.self, forKey: key)))
        case .uuid: self = .uuid(try container.decode(UUID.self, forKey: key))
        case .reference: self = .reference(try container.decode(PersistentIdentifier.self, forKey: key))
        case .array: self = .array(try container.decode([AttributeValue].self, forKey: key))
        }
    }
}
