import Foundation
import LogStoreEngine

/// Why a store refused an operation. A refused save writes nothing and leaves the state as it was.
public enum LogStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The schema in code is not the stored schema plus additions.
    case schemaMismatch(entity: String, attribute: String?, reason: String)
    case unknownEntity(String)
    case unknownAttribute(entity: String, attribute: String)
    case valueTypeMismatch(entity: String, attribute: String, expected: String, value: AttributeValue)
    /// A required attribute has no value (and no default).
    case missingValue(entity: String, attribute: String)
    /// A reference to a model that does not exist (or is deleted in the same save).
    case missingReference(entity: String, attribute: String, identifier: PersistentIdentifier)
    /// An update or delete of a model that is not in the store.
    case modelNotFound(PersistentIdentifier)
    /// An identifier minted by another store.
    case foreignIdentifier(PersistentIdentifier)
    /// A delete refused by a `.deny` rule while related models exist.
    case deleteDenied(PersistentIdentifier, relationship: String, related: PersistentIdentifier)
    /// A change would make two models share the values of a unique constraint.
    case uniqueConstraintViolation(entity: String, constraint: [String], values: [AttributeValue])
    /// The save encodes to more than one record may hold.
    case transactionTooLarge(byteCount: Int, limit: Int)
    /// A stored record could not be decoded.
    case corruptRecord(offset: UInt64, reason: String)
    /// The log below refused.
    case log(LogError)
    /// The token points into deleted history (D6). Fetch from `resumeToken` (`token > resumeToken`)
    /// for everything still retained; what lies between was deleted.
    case historyTokenExpired(resumeToken: HistoryToken)
    /// No transaction with this token's check starts at its offset: a token from a tail lost in a
    /// crash, or from a restored backup, whose offset was reused (D6).
    case historyTokenInvalid(HistoryToken, reason: String)
    /// The token was made by another store.
    case historyTokenOfAnotherStore(HistoryToken, store: UUID)
    /// The token lies at or past the end of the visible log.
    case historyTokenBeyondEnd(HistoryToken, end: UInt64)
    /// The request asks for something this store does not do (the message says what it accepts).
    case unsupportedFeature(String)
    /// No consumer is registered under this name.
    case unknownConsumer(String)
    /// A history position past the visible end of the log (time travel to a bare offset).
    case historyPositionPastEnd(offset: UInt64, end: UInt64)
    /// A history position that is not the start of a transaction record.
    case historyPositionNotATransaction(offset: UInt64, reason: String)

    public var description: String {
        switch self {
        case let .schemaMismatch(entity, attribute, reason):
            "The schema in code does not match the store at \(entity)\(attribute.map { "." + $0 } ?? ""): \(reason). "
                + "Only additions (new entities, optional or defaulted attributes) are migrated."
        case let .unknownEntity(name): "The entity \(name) is not in the store's schema."
        case let .unknownAttribute(entity, attribute): "\(entity) has no attribute \(attribute)."
        case let .valueTypeMismatch(entity, attribute, expected, value):
            "\(entity).\(attribute) holds \(expected), not \(value)."
        case let .missingValue(entity, attribute): "\(entity).\(attribute) is required and has no value."
        case let .missingReference(entity, attribute, identifier):
            "\(entity).\(attribute) refers to \(identifier), which is not in the store."
        case let .modelNotFound(identifier): "\(identifier) is not in the store (deleted, or never saved)."
        case let .foreignIdentifier(identifier): "\(identifier) belongs to another store."
        case let .deleteDenied(identifier, relationship, related):
            "Deleting \(identifier) is denied: its \(relationship) still holds \(related)."
        case let .uniqueConstraintViolation(entity, constraint, values):
            "Another \(entity) already has \(constraint.joined(separator: ", ")) = "
                + values.map(\.description).joined(separator: ", ") + "."
        case let .transactionTooLarge(byteCount, limit):
            "The save encodes to \(byteCount) bytes; one save is one record of at most \(limit) bytes. Save in smaller batches."
        case let .corruptRecord(offset, reason): "The record at offset \(offset) cannot be decoded: \(reason)."
        case let .log(error): error.description
        case let .historyTokenExpired(resumeToken):
            "The history token points into deleted history; history is retained after \(resumeToken.jsonString) "
                + "(fetch with `token > resumeToken` to resume; changes in between are gone)."
        case let .historyTokenInvalid(token, reason):
            "The history token \(token) is not valid for this store: \(reason)."
        case let .historyTokenOfAnotherStore(token, store):
            "The history token \(token) belongs to store \(token.storeIdentifier), not to this store \(store)."
        case let .historyTokenBeyondEnd(token, end):
            "The history token \(token) lies past the end of the log at offset \(end)."
        case let .unsupportedFeature(what): what
        case let .unknownConsumer(name): "No history consumer named \"\(name)\" is registered."
        case let .historyPositionPastEnd(offset, end):
            "Offset \(offset) is past the end of the log (\(end))."
        case let .historyPositionNotATransaction(offset, reason):
            "Offset \(offset) is not the start of a transaction record: \(reason)."
        }
    }
}
