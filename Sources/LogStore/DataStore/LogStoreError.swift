import Foundation
import LogStoreEngine

/// Why a store refused an operation. A refused save writes nothing and leaves the state as it was.
///
/// A struct with an extensible ``Code`` (new codes never break a caller's `switch`), grouped into
/// a ``Family``, and the failing entity, attribute, model, file, offset and token as fields.
/// Match it by code or by family, as GRDB's `DatabaseError`:
///
/// ```swift
/// do {
///     let changes = try context.fetchHistory(descriptor)
/// } catch LogStoreError.historyTokenExpired {
///     // start again from the resume token
/// } catch let error as LogStoreError where error.family == .corruption {
///     print(error.file ?? "", error.offset ?? 0, error.message)
/// }
/// ```
///
/// Corruption is reported one way: code ``Code/corruption`` with the file and offset, whether a
/// record failed its checksum in the log (``underlying`` holds the log's `LogError`) or its
/// payload did not decode.
public struct LogStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, as a stable name (its raw value) and a ``Family``.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The code's stable name, e.g. `"historyTokenExpired"` (the log's codes keep the log's names).
        public let rawValue: String
        /// The code with this name; a name this version does not define is a valid code of family
        /// ``Family/storage``.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The raw value.
        public var description: String { rawValue }

        /// The group of codes a caller usually reacts to alike.
        public var family: Family { Self.families[self] ?? .storage }
    }

    /// Groups of codes: what a caller usually does about them.
    public struct Family: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        /// The family's stable name, e.g. `"corruption"`.
        public let rawValue: String
        /// The family with this name.
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The raw value.
        public var description: String { rawValue }

        /// The schema in code does not fit the store (or names something it lacks): fix the code.
        public static let schema = Family(rawValue: "schema")
        /// A save was refused by validation; nothing was written: fix the changes and save again.
        public static let invalidSave = Family(rawValue: "invalidSave")
        /// A history token or position cannot be used as given (expired, of another store…).
        public static let history = Family(rawValue: "history")
        /// Bytes on disk are not what they must be: the store refuses to guess (see `logstore verify`).
        public static let corruption = Family(rawValue: "corruption")
        /// The store cannot be used right now or at all: I/O, disk full, failed sync, locked,
        /// closed, read-only, not a store, a newer format.
        public static let storage = Family(rawValue: "storage")
        /// The request asks for something this store does not do.
        public static let unsupported = Family(rawValue: "unsupported")
    }

    /// What went wrong.
    public var code: Code
    /// A sentence that says what happened and what to do.
    public var message: String
    /// The entity concerned, if one is.
    public var entity: String?
    /// The attribute or relationship concerned, if one is.
    public var attribute: String?
    /// The model concerned (the one not found, denied, or referred to), if one is.
    public var identifier: PersistentIdentifier?
    /// The file concerned (a segment, a checkpoint), if one is.
    public var file: String?
    /// The log offset concerned, if one is.
    public var offset: UInt64?
    /// The history token concerned (the one refused), if one is.
    public var token: DefaultHistoryToken?
    /// For ``Code/historyTokenExpired``: fetch with `token > resumeToken` for everything still
    /// retained; what lies between was deleted.
    public var resumeToken: DefaultHistoryToken?
    /// The log's own error, when the log below refused.
    public var underlying: LogError?

    /// An error with this code and message; the other fields say where.
    public init(
        _ code: Code, _ message: String, entity: String? = nil, attribute: String? = nil,
        identifier: PersistentIdentifier? = nil, file: String? = nil, offset: UInt64? = nil,
        token: DefaultHistoryToken? = nil, resumeToken: DefaultHistoryToken? = nil, underlying: LogError? = nil
    ) {
        self.code = code
        self.message = message
        self.entity = entity
        self.attribute = attribute
        self.identifier = identifier
        self.file = file
        self.offset = offset
        self.token = token
        self.resumeToken = resumeToken
        self.underlying = underlying
    }

    /// The code's family.
    public var family: Family { code.family }

    /// The ``message``.
    public var description: String { message }
}

// MARK: - Codes

extension LogStoreError.Code {
    // Schema
    /// The schema in code is not the stored schema plus additions.
    public static let schemaMismatch = Self(rawValue: "schemaMismatch")
    /// An entity the schema does not have.
    public static let unknownEntity = Self(rawValue: "unknownEntity")
    /// An attribute the entity does not have.
    public static let unknownAttribute = Self(rawValue: "unknownAttribute")
    // Invalid saves
    /// A value of the wrong type for its attribute.
    public static let valueTypeMismatch = Self(rawValue: "valueTypeMismatch")
    /// A required attribute has no value (and no default).
    public static let missingValue = Self(rawValue: "missingValue")
    /// A reference to a model that does not exist (or is deleted in the same save).
    public static let missingReference = Self(rawValue: "missingReference")
    /// An update or delete of a model that is not in the store.
    public static let modelNotFound = Self(rawValue: "modelNotFound")
    /// An identifier minted by another store.
    public static let foreignIdentifier = Self(rawValue: "foreignIdentifier")
    /// A delete refused by a `.deny` rule while related models exist.
    public static let deleteDenied = Self(rawValue: "deleteDenied")
    /// A change would make two models share the values of a unique constraint.
    public static let uniqueConstraintViolation = Self(rawValue: "uniqueConstraintViolation")
    /// The save encodes to more than one record may hold.
    public static let transactionTooLarge = Self(rawValue: "transactionTooLarge")
    // History
    /// The token points into deleted history (D6); ``LogStoreError/resumeToken`` says where to resume.
    public static let historyTokenExpired = Self(rawValue: "historyTokenExpired")
    /// No transaction with this token's check starts at its offset (a token from a tail lost in a
    /// crash, or from a restored backup, whose offset was reused; D6).
    public static let historyTokenInvalid = Self(rawValue: "historyTokenInvalid")
    /// The token was made by another store.
    public static let historyTokenOfAnotherStore = Self(rawValue: "historyTokenOfAnotherStore")
    /// A token or bare offset at or past the visible end of the log.
    public static let historyPositionPastEnd = Self(rawValue: "historyPositionPastEnd")
    /// A history position that is not the start of a transaction record.
    public static let historyPositionNotATransaction = Self(rawValue: "historyPositionNotATransaction")
    /// No history consumer is registered under this name.
    public static let unknownConsumer = Self(rawValue: "unknownConsumer")
    // Unsupported
    /// The request asks for something this store does not do (the message says what it accepts).
    public static let unsupportedFeature = Self(rawValue: "unsupportedFeature")
    // The log's codes (LogError.Code), one for one.
    /// Bytes on disk are not what they must be (a record, a checkpoint, a segment header).
    public static let corruption = Self(rawValue: LogError.Code.corruption.rawValue)
    /// The directory is missing or is not a LogStore store.
    public static let notAStore = Self(rawValue: LogError.Code.notAStore.rawValue)
    /// A file was written by a newer format version than this code reads.
    public static let newerFormatVersion = Self(rawValue: LogError.Code.newerFormatVersion.rawValue)
    /// The operating system reported an I/O error.
    public static let ioError = Self(rawValue: LogError.Code.ioError.rawValue)
    /// The disk is full; saves work again once space is freed.
    public static let outOfSpace = Self(rawValue: LogError.Code.outOfSpace.rawValue)
    /// An `fdatasync` failed; the store is read-only until reopened.
    public static let syncFailed = Self(rawValue: LogError.Code.syncFailed.rawValue)
    /// The store is read-only.
    public static let readOnly = Self(rawValue: LogError.Code.readOnly.rawValue)
    /// Another process holds the store's lock.
    public static let locked = Self(rawValue: LogError.Code.locked.rawValue)
    /// This process already has the store open.
    public static let alreadyOpenInProcess = Self(rawValue: LogError.Code.alreadyOpenInProcess.rawValue)
    /// A record larger than the format allows.
    public static let recordTooLarge = Self(rawValue: LogError.Code.recordTooLarge.rawValue)
    /// An offset outside the retained, visible log.
    public static let offsetOutOfRange = Self(rawValue: LogError.Code.offsetOutOfRange.rawValue)
    /// The store is closed.
    public static let closed = Self(rawValue: LogError.Code.closed.rawValue)
    /// An option is out of range.
    public static let invalidOptions = Self(rawValue: LogError.Code.invalidOptions.rawValue)
    /// A read-only store's writer removed records it may have seen: open it again.
    public static let reopenRequired = Self(rawValue: LogError.Code.reopenRequired.rawValue)

    fileprivate static let families: [Self: LogStoreError.Family] = [
        .schemaMismatch: .schema, .unknownEntity: .schema, .unknownAttribute: .schema,
        .valueTypeMismatch: .invalidSave, .missingValue: .invalidSave, .missingReference: .invalidSave,
        .modelNotFound: .invalidSave, .foreignIdentifier: .invalidSave, .deleteDenied: .invalidSave,
        .uniqueConstraintViolation: .invalidSave, .transactionTooLarge: .invalidSave,
        .historyTokenExpired: .history, .historyTokenInvalid: .history, .historyTokenOfAnotherStore: .history,
        .historyPositionPastEnd: .history, .historyPositionNotATransaction: .history, .unknownConsumer: .history,
        .unsupportedFeature: .unsupported, .corruption: .corruption,
    ]
}

/// `catch LogStoreError.historyTokenExpired { … }`: matches a ``LogStoreError`` with this code.
public func ~= (pattern: LogStoreError.Code, value: any Error) -> Bool {
    (value as? LogStoreError)?.code == pattern
}

/// Matches a ``LogStoreError`` with this code (for `throws(LogStoreError)` functions).
public func ~= (pattern: LogStoreError.Code, value: LogStoreError) -> Bool {
    value.code == pattern
}

/// `catch LogStoreError.Family.corruption { … }`: matches a ``LogStoreError`` of this family.
public func ~= (pattern: LogStoreError.Family, value: any Error) -> Bool {
    (value as? LogStoreError)?.family == pattern
}

/// Matches a ``LogStoreError`` of this family (for `throws(LogStoreError)` functions).
public func ~= (pattern: LogStoreError.Family, value: LogStoreError) -> Bool {
    value.family == pattern
}

// MARK: - Making errors

extension LogStoreError {
    // Each code is also a static member of LogStoreError, so `catch LogStoreError.modelNotFound`
    // reads like the factory that made the error (`throw .modelNotFound(identifier)`).
    /// ``Code/schemaMismatch``, so that `catch LogStoreError.schemaMismatch` matches by code.
    public static let schemaMismatch = Code.schemaMismatch
    /// ``Code/unknownEntity``, so that `catch LogStoreError.unknownEntity` matches by code.
    public static let unknownEntity = Code.unknownEntity
    /// ``Code/unknownAttribute``, so that `catch LogStoreError.unknownAttribute` matches by code.
    public static let unknownAttribute = Code.unknownAttribute
    /// ``Code/valueTypeMismatch``, so that `catch LogStoreError.valueTypeMismatch` matches by code.
    public static let valueTypeMismatch = Code.valueTypeMismatch
    /// ``Code/missingValue``, so that `catch LogStoreError.missingValue` matches by code.
    public static let missingValue = Code.missingValue
    /// ``Code/missingReference``, so that `catch LogStoreError.missingReference` matches by code.
    public static let missingReference = Code.missingReference
    /// ``Code/modelNotFound``, so that `catch LogStoreError.modelNotFound` matches by code.
    public static let modelNotFound = Code.modelNotFound
    /// ``Code/foreignIdentifier``, so that `catch LogStoreError.foreignIdentifier` matches by code.
    public static let foreignIdentifier = Code.foreignIdentifier
    /// ``Code/deleteDenied``, so that `catch LogStoreError.deleteDenied` matches by code.
    public static let deleteDenied = Code.deleteDenied
    /// ``Code/uniqueConstraintViolation``, so that `catch LogStoreError.uniqueConstraintViolation` matches by code.
    public static let uniqueConstraintViolation = Code.uniqueConstraintViolation
    /// ``Code/transactionTooLarge``, so that `catch LogStoreError.transactionTooLarge` matches by code.
    public static let transactionTooLarge = Code.transactionTooLarge
    /// ``Code/historyTokenExpired``, so that `catch LogStoreError.historyTokenExpired` matches by code.
    public static let historyTokenExpired = Code.historyTokenExpired
    /// ``Code/historyTokenInvalid``, so that `catch LogStoreError.historyTokenInvalid` matches by code.
    public static let historyTokenInvalid = Code.historyTokenInvalid
    /// ``Code/historyTokenOfAnotherStore``, so that `catch LogStoreError.historyTokenOfAnotherStore` matches by code.
    public static let historyTokenOfAnotherStore = Code.historyTokenOfAnotherStore
    /// ``Code/historyPositionPastEnd``, so that `catch LogStoreError.historyPositionPastEnd` matches by code.
    public static let historyPositionPastEnd = Code.historyPositionPastEnd
    /// ``Code/historyPositionNotATransaction``, so that `catch
    /// LogStoreError.historyPositionNotATransaction` matches by code.
    public static let historyPositionNotATransaction = Code.historyPositionNotATransaction
    /// ``Code/unknownConsumer``, so that `catch LogStoreError.unknownConsumer` matches by code.
    public static let unknownConsumer = Code.unknownConsumer
    /// ``Code/unsupportedFeature``, so that `catch LogStoreError.unsupportedFeature` matches by code.
    public static let unsupportedFeature = Code.unsupportedFeature
    /// ``Code/corruption``, so that `catch LogStoreError.corruption` matches by code.
    public static let corruption = Code.corruption
    /// ``Code/closed``, so that `catch LogStoreError.closed` matches by code.
    public static let closed = Code.closed

    /// The schema in code is not the stored schema plus additions.
    public static func schemaMismatch(entity: String, attribute: String?, reason: String) -> Self {
        Self(
            .schemaMismatch,
            "The schema in code does not match the store at \(entity)\(attribute.map { "." + $0 } ?? ""): "
                + "\(reason). Only additions (new entities, optional or defaulted attributes) are migrated.",
            entity: entity, attribute: attribute)
    }

    /// An entity the store's schema does not have.
    public static func unknownEntity(_ name: String) -> Self {
        Self(.unknownEntity, "The entity \(name) is not in the store's schema.", entity: name)
    }

    /// An attribute `entity` does not have.
    public static func unknownAttribute(entity: String, attribute: String) -> Self {
        Self(.unknownAttribute, "\(entity) has no attribute \(attribute).", entity: entity, attribute: attribute)
    }

    /// A value that is not of its attribute's type (`expected` names the type).
    public static func valueTypeMismatch(entity: String, attribute: String, expected: String, value: AttributeValue)
        -> Self
    {
        Self(
            .valueTypeMismatch, "\(entity).\(attribute) holds \(expected), not \(value).", entity: entity,
            attribute: attribute)
    }

    /// A required attribute without a value or a default.
    public static func missingValue(entity: String, attribute: String) -> Self {
        Self(
            .missingValue, "\(entity).\(attribute) is required and has no value.", entity: entity, attribute: attribute)
    }

    /// A relationship of `entity` refers to `identifier`, which is not in the store (or is deleted in the same save).
    public static func missingReference(entity: String, attribute: String, identifier: PersistentIdentifier) -> Self {
        Self(
            .missingReference, "\(entity).\(attribute) refers to \(identifier), which is not in the store.",
            entity: entity, attribute: attribute, identifier: identifier)
    }

    /// An update or delete of a model that is not in the store (deleted, or never saved).
    public static func modelNotFound(_ identifier: PersistentIdentifier) -> Self {
        Self(
            .modelNotFound, "\(identifier) is not in the store (deleted, or never saved).",
            entity: identifier.entityName, identifier: identifier)
    }

    /// An identifier minted by another store.
    public static func foreignIdentifier(_ identifier: PersistentIdentifier) -> Self {
        Self(
            .foreignIdentifier, "\(identifier) belongs to another store.", entity: identifier.entityName,
            identifier: identifier)
    }

    /// Deleting `identifier` is refused by the `.deny` rule of its `relationship`, which still holds `related`.
    public static func deleteDenied(
        _ identifier: PersistentIdentifier, relationship: String,
        related: PersistentIdentifier
    ) -> Self {
        Self(
            .deleteDenied, "Deleting \(identifier) is denied: its \(relationship) still holds \(related).",
            entity: identifier.entityName, attribute: relationship, identifier: identifier)
    }

    /// Another model of `entity` already has these `values` for the attributes of `constraint`
    /// (with ``UniqueCollisionPolicy/throw``).
    public static func uniqueConstraintViolation(entity: String, constraint: [String], values: [AttributeValue]) -> Self
    {
        Self(
            .uniqueConstraintViolation,
            "Another \(entity) already has \(constraint.joined(separator: ", ")) = "
                + values.map(\.description).joined(separator: ", ") + ".", entity: entity,
            attribute: constraint.joined(separator: ","))
    }

    /// A save that encodes to more bytes than one record may hold: save in smaller batches.
    public static func transactionTooLarge(byteCount: Int, limit: Int) -> Self {
        Self(
            .transactionTooLarge,
            "The save encodes to \(byteCount) bytes; one save is one record of at most "
                + "\(limit) bytes. Save in smaller batches.")
    }

    /// A stored record that cannot be decoded: corruption, at its offset.
    public static func corruptRecord(offset: UInt64, reason: String) -> Self {
        Self(.corruption, "The record at offset \(offset) cannot be decoded: \(reason).", offset: offset)
    }

    /// The log below refused: its code, message, file and offset carry over.
    public static func log(_ error: LogError) -> Self {
        Self(
            Code(rawValue: error.code.rawValue), error.message, file: error.file, offset: error.offset,
            underlying: error)
    }

    /// A token into deleted history; history is retained after `resumeToken`.
    public static func historyTokenExpired(resumeToken: DefaultHistoryToken) -> Self {
        Self(
            .historyTokenExpired,
            "The history token points into deleted history; history is retained after "
                + "\(resumeToken.jsonString) (fetch with `token > resumeToken` to resume; changes in between are gone).",
            resumeToken: resumeToken)
    }

    /// A token whose offset does not hold the transaction it names (its check differs, or no transaction starts there).
    public static func historyTokenInvalid(_ token: DefaultHistoryToken, reason: String) -> Self {
        Self(
            .historyTokenInvalid, "The history token \(token) is not valid for this store: \(reason).",
            offset: token.offset, token: token)
    }

    /// A token made by another store than `store`.
    public static func historyTokenOfAnotherStore(_ token: DefaultHistoryToken, store: UUID) -> Self {
        Self(
            .historyTokenOfAnotherStore,
            "The history token \(token) belongs to store \(token.storeIdentifier), not "
                + "to this store \(store).", token: token)
    }

    /// A token at or past the visible end of the log.
    public static func historyTokenBeyondEnd(_ token: DefaultHistoryToken, end: UInt64) -> Self {
        Self(
            .historyPositionPastEnd, "The history token \(token) lies past the end of the log at offset \(end).",
            offset: token.offset, token: token)
    }

    /// A bare offset at or past the visible end of the log.
    public static func historyPositionPastEnd(offset: UInt64, end: UInt64) -> Self {
        Self(.historyPositionPastEnd, "Offset \(offset) is past the end of the log (\(end)).", offset: offset)
    }

    /// A bare offset where no transaction record starts.
    public static func historyPositionNotATransaction(offset: UInt64, reason: String) -> Self {
        Self(
            .historyPositionNotATransaction, "Offset \(offset) is not the start of a transaction record: \(reason).",
            offset: offset)
    }

    /// Something this store does not do; `what` says what it does accept.
    public static func unsupportedFeature(_ what: String) -> Self {
        Self(.unsupportedFeature, what)
    }

    /// No history consumer is registered under `name`.
    public static func unknownConsumer(_ name: String) -> Self {
        Self(.unknownConsumer, "No history consumer named \"\(name)\" is registered.")
    }
}

/// SwiftData's `SwiftDataError`: LogStore's errors are ``LogStoreError``s, and SwiftData's static
/// members are its codes — `catch SwiftDataError.historyTokenExpired` and
/// `error == .historyTokenExpired` match by code; the resume token is extra information
/// (``LogStoreError/resumeToken``), not part of the match.
public typealias SwiftDataError = LogStoreError

extension LogStoreError {
    /// Whether the error has this code (`error == .historyTokenExpired`).
    public static func == (lhs: LogStoreError, rhs: Code) -> Bool { lhs.code == rhs }
}
