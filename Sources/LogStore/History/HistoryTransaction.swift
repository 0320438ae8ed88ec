import Foundation
import Synchronization

/// SwiftData's name for the token type.
public typealias DefaultHistoryToken = HistoryToken

/// One save, as history shows it (SwiftData's `HistoryTransaction`).
public protocol HistoryTransaction: Sendable, Hashable, Identifiable {
    /// The log offset of the transaction record (the token's offset).
    var transactionIdentifier: UInt64 { get }
    var token: HistoryToken { get }
    var author: String? { get }
    var timestamp: Date { get }
    var storeIdentifier: String { get }
    /// `pid@host` plus a UUID made once per launch of the process that saved (D5).
    var processIdentifier: String { get }
    /// The save's resolved changes, in order (every cascaded delete and nullified reference is
    /// its own change).
    var changes: [HistoryChange] { get }
}

/// The transactions a ``LogStore`` returns from ``LogStore/fetchHistory(_:)``.
///
/// `changes` is decoded from the record's bytes on first access (and kept): a fetch that only
/// needs tokens, authors or timestamps does not pay for every value of every change.
public struct DefaultHistoryTransaction: HistoryTransaction {
    public var transactionIdentifier: UInt64 { token.offset }
    public var token: HistoryToken
    public var author: String?
    public var timestamp: Date
    public var storeIdentifier: String
    public var processIdentifier: String
    public var id: UInt64 { transactionIdentifier }
    let storage: HistoryChanges

    /// The save's resolved changes, in order.
    public var changes: [HistoryChange] { storage.changes }

    public init(
        token: HistoryToken, author: String?, timestamp: Date, storeIdentifier: String,
        processIdentifier: String, changes: [HistoryChange]
    ) {
        self.init(
            token: token, author: author, timestamp: timestamp, storeIdentifier: storeIdentifier,
            processIdentifier: processIdentifier, storage: HistoryChanges(changes))
    }

    init(
        token: HistoryToken, author: String?, timestamp: Date, storeIdentifier: String, processIdentifier: String,
        storage: HistoryChanges
    ) {
        self.token = token
        self.author = author
        self.timestamp = timestamp
        self.storeIdentifier = storeIdentifier
        self.processIdentifier = processIdentifier
        self.storage = storage
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.token == rhs.token && lhs.author == rhs.author && lhs.timestamp == rhs.timestamp
            && lhs.storeIdentifier == rhs.storeIdentifier && lhs.processIdentifier == rhs.processIdentifier
            && lhs.changes == rhs.changes
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(token)
        hasher.combine(author)
    }
}

/// A transaction's changes: given, or decoded from the record's payload on first access.
final class HistoryChanges: Sendable {
    private enum State {
        case decoded([HistoryChange])
        case encoded(payload: [UInt8], decoder: TransactionRecord.Decoder, offset: UInt64)
    }

    private let state: Mutex<State>

    init(_ changes: [HistoryChange]) {
        state = Mutex(.decoded(changes))
    }

    /// The payload passed its CRC and its prefix decoded with this decoder's table.
    init(payload: [UInt8], decoder: TransactionRecord.Decoder, offset: UInt64) {
        state = Mutex(.encoded(payload: payload, decoder: decoder, offset: offset))
    }

    var changes: [HistoryChange] {
        state.withLock { state in
            switch state {
            case .decoded(let changes):
                return changes
            case .encoded(let payload, let decoder, let offset):
                let changes: [HistoryChange]
                do { changes = try decoder.decode(payload).changes.map(HistoryChange.init) } catch {
                    // Its CRC matched and its prefix decoded with this table: only a writer bug
                    // gets here. Loud rather than a silently empty change list.
                    preconditionFailure(
                        "The transaction record at offset \(offset) passed its checksum but its "
                            + "changes do not decode: \(error). Run `logstore verify`.")
                }
                state = .decoded(changes)
                return changes
            }
        }
    }
}

/// One change of a transaction.
public enum HistoryChange: Sendable, Hashable {
    case insert(HistoryInsert)
    case update(HistoryUpdate)
    case delete(HistoryDelete)

    public var changedPersistentIdentifier: PersistentIdentifier {
        switch self {
        case .insert(let insert): insert.changedPersistentIdentifier
        case .update(let update): update.changedPersistentIdentifier
        case .delete(let delete): delete.changedPersistentIdentifier
        }
    }

    init(_ change: ResolvedChange) {
        switch change {
        case .insert(let identifier, let values):
            self = .insert(HistoryInsert(changedPersistentIdentifier: identifier, values: values))
        case .update(let identifier, let values):
            self = .update(HistoryUpdate(changedPersistentIdentifier: identifier, values: values))
        case .delete(let identifier, let tombstone):
            self = .delete(
                HistoryDelete(
                    changedPersistentIdentifier: identifier,
                    tombstone: HistoryTombstone(entityName: identifier.entityName, values: tombstone)))
        }
    }

    var resolved: ResolvedChange {
        switch self {
        case .insert(let insert): .insert(insert.changedPersistentIdentifier, insert.values)
        case .update(let update): .update(update.changedPersistentIdentifier, update.values)
        case .delete(let delete): .delete(delete.changedPersistentIdentifier, tombstone: delete.tombstone.values)
        }
    }
}

/// A model inserted, with every value it was saved with.
public struct HistoryInsert: Sendable, Hashable {
    public let changedPersistentIdentifier: PersistentIdentifier
    /// Attribute and relationship names → values (references as identifiers).
    public let values: [String: AttributeValue]
}

/// A model updated: which attributes changed, and their new values (SwiftData records only the
/// names; the new values come for free from the log).
public struct HistoryUpdate: Sendable, Hashable {
    public let changedPersistentIdentifier: PersistentIdentifier
    /// The changed attributes' new values.
    public let values: [String: AttributeValue]

    /// The names of the changed attributes and relationships.
    public var updatedAttributes: Set<String> { Set(values.keys) }

    /// The changed properties as key paths of `Model` (empty when the change is of another entity).
    public func updatedAttributes<Model: PersistentModel>(of model: Model.Type) -> [PartialKeyPath<Model>] {
        guard changedPersistentIdentifier.entityName == Model.entityName else { return [] }
        return Model.schemaProperties.filter { values[$0.name] != nil }.map { $0.keyPath as PartialKeyPath<Model> }
    }

    /// The new value of a changed property, or `nil` when it did not change in this update.
    public subscript<Model: PersistentModel, Value: AttributeConvertible>(_ keyPath: KeyPath<Model, Value>) -> Value? {
        HistoryTombstone.value(of: keyPath, in: values, entityName: changedPersistentIdentifier.entityName)
    }
}

/// A model deleted, with its tombstone.
public struct HistoryDelete: Sendable, Hashable {
    public let changedPersistentIdentifier: PersistentIdentifier
    public let tombstone: HistoryTombstone
}

/// The values a deleted model kept: those of its `.preserveValueOnDeletion` attributes.
public struct HistoryTombstone: Sendable, Hashable {
    public let entityName: String
    /// Attribute names → preserved values.
    public let values: [String: AttributeValue]

    /// The preserved value of an attribute, by name.
    public subscript(name: String) -> AttributeValue? { values[name] }

    /// The preserved value of a model property, by key path (`tombstone[\Trip.name]`); `nil` when
    /// it was not preserved or the tombstone is of another entity.
    public subscript<Model: PersistentModel, Value: AttributeConvertible>(_ keyPath: KeyPath<Model, Value>) -> Value? {
        Self.value(of: keyPath, in: values, entityName: entityName)
    }

    static func value<Model: PersistentModel, Value: AttributeConvertible>(
        of keyPath: KeyPath<Model, Value>, in values: [String: AttributeValue], entityName: String
    ) -> Value? {
        guard entityName == Model.entityName,
            let property = Model.schemaProperties.first(where: { ($0.keyPath as AnyKeyPath) == (keyPath as AnyKeyPath) }
            ),
            let value = values[property.name]
        else { return nil }
        return Value(attributeValue: value)
    }
}

/// What to fetch from (or delete of) a store's history (SwiftData's `HistoryDescriptor`).
///
/// The predicate is a Foundation `#Predicate` over transactions. ``LogStore`` reads token bounds
/// (`$0.token > saved`, `>=`, `<`, `<=`) and `author ==`, `!=`, `== nil`, `!= nil` itself: token
/// bounds seek straight to the offset, author tests read only the start of each record. Anything
/// else is evaluated with `Predicate.evaluate` on the transactions those leave.
public struct HistoryDescriptor<Transaction: HistoryTransaction>: Sendable {
    public var predicate: Predicate<Transaction>?
    /// Default: log order (oldest first).
    public var sortBy: [SortDescriptor<Transaction>]
    public var fetchLimit: Int?

    public init(predicate: Predicate<Transaction>? = nil, sortBy: [SortDescriptor<Transaction>] = []) {
        self.predicate = predicate
        self.sortBy = sortBy
    }
}

/// A store that keeps history (SwiftData's `HistoryProviding`).
public protocol HistoryProviding<HistoryType> {
    associatedtype HistoryType: HistoryTransaction
    func fetchHistory(_ descriptor: HistoryDescriptor<HistoryType>) throws -> [HistoryType]
    func deleteHistory(_ descriptor: HistoryDescriptor<HistoryType>) throws
}
