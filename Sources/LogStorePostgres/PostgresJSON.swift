import Foundation
import LogStore

/// Attribute values as the plain JSON PostgreSQL reads into typed columns.
///
/// Every row goes to PostgreSQL as one JSON object per model, read with
/// `jsonb_populate_record(NULL::table, …)`, so one encoding serves every column type and the
/// change table's `values` column holds exactly what the mirror tables were given:
///
/// | LogStore value          | JSON                                   | column              |
/// |-------------------------|----------------------------------------|---------------------|
/// | `bool`, `int`           | `true`, `42`                           | boolean, bigint     |
/// | `double`                | `2.5` (`"NaN"`, `"Infinity"`)          | double precision    |
/// | `string`, `uuid`        | `"text"`, `"5F0C…"`                    | text, uuid          |
/// | `data`                  | `"\\x0a0b"` (bytea's hex input form)   | bytea               |
/// | `date`                  | `"2024-05-01T10:00:00.123456Z"`        | timestamptz (µs)    |
/// | `reference`             | the primary key, `"5F0C…"`             | uuid (foreign key)  |
/// | `array`                 | `[…]`                                  | `type[]` or jsonb   |
/// | `null`                  | `null`                                 | NULL                |
enum PostgresJSON {
    /// Appends `value` in the plain JSON form above.
    static func append(_ value: AttributeValue, to out: inout String) {
        switch value {
        case .null: out += "null"
        case let .bool(value): out += value ? "true" : "false"
        case let .int(value): out += String(value)
        case let .double(value): appendDouble(value, to: &out)
        case let .string(value): appendString(value, to: &out)
        case let .data(value): appendBytea(value, to: &out)
        case let .date(value): out += "\""; out += timestamp(value); out += "\""
        case let .uuid(value): out += "\""; out += value.uuidString; out += "\""
        case let .reference(identifier): out += "\""; out += identifier.primaryKey.uuidString; out += "\""
        case let .array(values):
            out += "["
            for (index, element) in values.enumerated() {
                if index > 0 { out += "," }
                append(element, to: &out)
            }
            out += "]"
        }
    }

    /// Appends a JSON object of `values`, keys sorted (one encoding for one set of values), with
    /// `extra` (already encoded JSON) first.
    static func appendObject(_ values: [String: AttributeValue], extra: [(String, String)] = [], to out: inout String) {
        out += "{"
        var first = true
        for (key, json) in extra {
            if !first { out += "," }
            first = false
            appendString(key, to: &out)
            out += ":"
            out += json
        }
        for key in values.keys.sorted() {
            if !first { out += "," }
            first = false
            appendString(key, to: &out)
            out += ":"
            append(values[key]!, to: &out)
        }
        out += "}"
    }

    static func object(_ values: [String: AttributeValue], extra: [(String, String)] = []) -> String {
        var out = ""
        appendObject(values, extra: extra, to: &out)
        return out
    }

    /// Shortest round-tripping decimal; JSON has no NaN or infinities, float8's text input does.
    static func appendDouble(_ value: Double, to out: inout String) {
        if value.isNaN { out += "\"NaN\"" } else if value.isInfinite {
            out += value < 0 ? "\"-Infinity\"" : "\"Infinity\""
        } else {
            out += "\(value)"
        }
    }

    static func appendBytea(_ data: Data, to out: inout String) {
        let digits: [Character] = Array("0123456789abcdef")
        out += "\"\\\\x"
        out.reserveCapacity(out.utf8.count + data.count * 2 + 1)
        for byte in data {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        out += "\""
    }

    static func appendString(_ value: String, to out: inout String) {
        out += "\""
        var plainStart = value.unicodeScalars.startIndex
        let scalars = value.unicodeScalars
        var index = scalars.startIndex
        while index < scalars.endIndex {
            let scalar = scalars[index]
            let escape: String? = switch scalar {
            case "\"": "\\\""
            case "\\": "\\\\"
            case "\n": "\\n"
            case "\r": "\\r"
            case "\t": "\\t"
            default: scalar.value < 0x20 ? String(format: "\\u%04x", scalar.value) : nil
            }
            if let escape {
                out.unicodeScalars.append(contentsOf: scalars[plainStart..<index])
                out += escape
                plainStart = scalars.index(after: index)
            }
            index = scalars.index(after: index)
        }
        out.unicodeScalars.append(contentsOf: scalars[plainStart..<scalars.endIndex])
        out += "\""
    }

    /// `2024-05-01T10:00:00.123456Z`: UTC, rounded to the microsecond (timestamptz's precision).
    static func timestamp(_ date: Date) -> String {
        let microseconds = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
        return timestamp(microsecondsSince1970: microseconds)
    }

    static func timestamp(microsecondsSince1970 microseconds: Int64) -> String {
        let (seconds, fraction) = floorDivision(microseconds, 1_000_000)
        let (days, secondOfDay) = floorDivision(seconds, 86_400)
        let (year, month, day) = civil(daysSince1970: days)
        return String(format: "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%06lldZ", year, month, day,
                      secondOfDay / 3600, secondOfDay / 60 % 60, secondOfDay % 60, fraction)
    }

    private static func floorDivision(_ value: Int64, _ divisor: Int64) -> (Int64, Int64) {
        let quotient = value >= 0 ? value / divisor : -((-value + divisor - 1) / divisor)
        return (quotient, value - quotient * divisor)
    }

    /// Howard Hinnant's days-from-civil inverse (proleptic Gregorian calendar).
    private static func civil(daysSince1970 days: Int64) -> (Int64, Int64, Int64) {
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
