import Foundation
import Synchronization

/// One save, as history shows it (SwiftData's `HistoryTransaction`).
public protocol HistoryTransaction: Sendable, Hashable, Identifiable {
    /// The type of the transaction's history token.
    associatedtype TokenType: HistoryToken
    /// Identifies the transaction within its store (LogStore: the log offset of its record).
    var transactionIdentifier: Int64 { get }
    /// The transaction's history token: keep it to fetch what comes after.
    var token: TokenType { get }
    /// The saving context's ``ModelContext/author``, if it had one.
    var author: String? { get }
    /// When the transaction was saved.
    var timestamp: Date { get }
    /// The identifier of the store that saved it (``DataStore/identifier``).
    var storeIdentifier: String { get }
    /// The saving program's bundle identifier: LogStore records none (an empty string); the
    /// process is in ``processIdentifier``.
    var bundleIdentifier: String { get }
    /// `pid@host` plus a UUID made once per launch of the process that saved (D5).
    var processIdentifier: String { get }
    /// The save's resolved changes, in order (every cascaded delete and nullified reference is
    /// its own change).
    var changes: [HistoryChange] { get }
}

/// The transactions a ``LogStore`` returns from ``LogStore/fetchHistory(_:)``.
///
/// `changes` is decoded from the record's bytes on first access (and kept): a fetch that only
/// needs tokens, authors or timestamps does not pay for every value of every change. Through
/// ``ModelContext/fetchHistory(_:)`` the changes are typed by the container's models
/// (`DefaultHistoryUpdate<Trip>`); read without them (``LogStore/fetchHistory(_:)``, the tool)
/// they are of ``UntypedModel``, with names and values.
public struct DefaultHistoryTransaction: HistoryTransaction {
    /// The log offset of the transaction's record (``DefaultHistoryToken/offset``).
    public var transactionIdentifier: Int64 { Int64(token.offset) }
    /// The transaction's token: its store, log offset and record checksum.
    public var token: DefaultHistoryToken
    /// The saving context's ``ModelContext/author``, if it had one.
    public var author: String? {
        get { field({ $0.author }) { $0.author(at: $1) } }
        set { storage = .object(object.with { $0.author = newValue }) }
    }
    /// When the transaction was saved (the saving process's clock).
    public var timestamp: Date {
        get { field({ $0.timestamp }) { $0.timestamp(at: $1) } }
        set { storage = .object(object.with { $0.timestamp = newValue }) }
    }
    /// The store's identifier (its UUID, as a string).
    public var storeIdentifier: String {
        get { field({ $0.storeIdentifier }) { batch, _ in batch.storeIdentifier } }
        set { storage = .object(object.with { $0.storeIdentifier = newValue }) }
    }
    /// Always empty: LogStore records no bundle identifier (see ``processIdentifier``).
    public var bundleIdentifier: String { "" }
    /// `pid@host` plus a UUID made once per launch of the process that saved
    /// (``LogStore/processIdentifier``).
    public var processIdentifier: String {
        get { field({ $0.processIdentifier }) { $0.processIdentifier(at: $1) } }
        set { storage = .object(object.with { $0.processIdentifier = newValue }) }
    }
    /// The ``transactionIdentifier``.
    public var id: Int64 { transactionIdentifier }

    /// Everything but the token, behind one reference: a copy of a transaction retains one
    /// reference instead of one per string (the copies were 13 % of P6's fetch of 1,000
    /// transactions).
    enum Storage: Sendable {
        /// An object of its own.
        case object(HistoryChanges)
        /// A place in the batch of the fetch that read it (``HistoryBatch``): it holds the whole
        /// batch — the fetch's headers, payloads and changes read — for as long as it is kept:
        /// keep tokens, not transactions, across many fetches.
        case batch(HistoryBatch, Int32)
    }

    private(set) var storage: Storage

    /// A header field: from the object's header, or read from the batch by `fromBatch`.
    @inline(__always)
    private func field<Value>(
        _ fromHeader: (HistoryChanges.Header) -> Value, _ fromBatch: (HistoryBatch, Int32) -> Value
    ) -> Value {
        switch storage {
        case .object(let object): fromHeader(object.header)
        case .batch(let batch, let index): fromBatch(batch, index)
        }
    }

    /// The storage as an object of its own (a transaction of a batch is copied out of it).
    private var object: HistoryChanges {
        switch storage {
        case .object(let object): object
        case .batch(let batch, let index): batch.changesObject(at: index)
        }
    }

    /// The same transaction holding an object of its own rather than its fetch's batch.
    func detached() -> DefaultHistoryTransaction {
        guard case .batch = storage else { return self }
        return DefaultHistoryTransaction(token: token, storage: object)
    }

    /// How many transactions the batch this one is a place in holds (`nil`: an object of its
    /// own; tests).
    var batchCount: Int? {
        if case .batch(let batch, _) = storage { batch.count } else { nil }
    }

    /// The save's resolved changes, in order.
    public var changes: [HistoryChange] {
        switch storage {
        case .object(let object): object.changes
        case .batch(let batch, let index): batch.changes(at: index)
        }
    }

    /// A transaction with these fields and changes (for custom stores providing history of their
    /// own, and for tests).
    public init(
        token: DefaultHistoryToken, author: String?, timestamp: Date, storeIdentifier: String,
        processIdentifier: String, changes: [HistoryChange]
    ) {
        self.init(
            token: token,
            storage: HistoryChanges(
                changes,
                header: HistoryChanges.Header(
                    author: author, timestamp: timestamp, storeIdentifier: storeIdentifier,
                    processIdentifier: processIdentifier)))
    }

    init(token: DefaultHistoryToken, storage: HistoryChanges) {
        self.token = token
        self.storage = .object(storage)
    }

    /// The transaction at `index` of a fetch's batch.
    init(token: DefaultHistoryToken, batch: HistoryBatch, index: Int32) {
        self.token = token
        self.storage = .batch(batch, index)
    }

    /// The same transaction with its changes typed by these model types (entity name → type).
    func typed(by modelTypes: [String: any PersistentModel.Type]) -> DefaultHistoryTransaction {
        DefaultHistoryTransaction(token: token, storage: object.typed(by: modelTypes))
    }

    /// Equal when every field and every change is equal.
    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.token == rhs.token && lhs.author == rhs.author && lhs.timestamp == rhs.timestamp
            && lhs.storeIdentifier == rhs.storeIdentifier && lhs.processIdentifier == rhs.processIdentifier
            && lhs.changes == rhs.changes
    }

    /// Hashes the token and the author (not the changes, which may not be decoded yet).
    public func hash(into hasher: inout Hasher) {
        hasher.combine(token)
        hasher.combine(author)
    }
}

extension DefaultHistoryTransaction: CustomReflectable {
    /// Its fields, as `print` and `dump` showed them when each was stored (the changes are left
    /// out: reflecting must not decode them).
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "token": token, "author": author as Any, "timestamp": timestamp, "storeIdentifier": storeIdentifier,
                "processIdentifier": processIdentifier,
            ], displayStyle: .struct)
    }
}

/// A transaction's fields but its token, and its changes: given, or decoded from the record's
/// payload on first access, typed by a map of model types (entities without a type get
/// ``UntypedModel``). Immutable but for the decoded changes, which it keeps once decoded.
final class HistoryChanges: Sendable {
    /// The fields a transaction's record header holds (its token aside).
    struct Header: Sendable {
        var author: String?
        var timestamp: Date
        var storeIdentifier: String
        var processIdentifier: String
    }

    private enum State {
        case decoded([HistoryChange])
        case encoded(payload: [UInt8], decoder: TransactionRecord.Decoder, offset: UInt64)
        /// The payload copied into a chunk the transactions of one fetch share (``PayloadChunk``).
        case encodedInChunk(PayloadChunk, Range<Int>, decoder: TransactionRecord.Decoder, offset: UInt64)
        case retyped(HistoryChanges)
        /// Another header over the same changes (a transaction whose field was set).
        case shared(HistoryChanges)
    }

    let header: Header
    private let state: Mutex<State>
    private let modelTypes: [String: any PersistentModel.Type]

    init(_ changes: [HistoryChange], header: Header) {
        self.header = header
        state = Mutex(.decoded(changes))
        modelTypes = [:]
    }

    /// The payload passed its CRC and its prefix decoded with this decoder's table.
    init(payload: [UInt8], decoder: TransactionRecord.Decoder, offset: UInt64, header: Header) {
        self.header = header
        state = Mutex(.encoded(payload: payload, decoder: decoder, offset: offset))
        modelTypes = [:]
    }

    /// The payload, copied into `chunk` at `range`, passed its CRC and its prefix decoded with
    /// this decoder's table.
    init(chunk: PayloadChunk, range: Range<Int>, decoder: TransactionRecord.Decoder, offset: UInt64, header: Header) {
        self.header = header
        state = Mutex(.encodedInChunk(chunk, range, decoder: decoder, offset: offset))
        modelTypes = [:]
    }

    private init(header: Header, state: State, modelTypes: [String: any PersistentModel.Type]) {
        self.header = header
        self.state = Mutex(state)
        self.modelTypes = modelTypes
    }

    /// The same changes typed by `modelTypes`: typed from the untyped object, never through
    /// another typing (no chain, as ``with(_:)``).
    func typed(by modelTypes: [String: any PersistentModel.Type]) -> HistoryChanges {
        let base: HistoryChanges = state.withLock { state in
            if case .retyped(let untyped) = state { untyped } else { self }
        }
        return HistoryChanges(header: header, state: .retyped(base), modelTypes: modelTypes)
    }

    /// The same changes under a header `change` edits. Shares the changes decoded already, or the
    /// object that decodes them — never another `.shared` one, so setting a field over and over
    /// makes no chain (a chain of 200,000 was read, and freed, by recursion: found by review).
    func with(_ change: (inout Header) -> Void) -> HistoryChanges {
        var header = header
        change(&header)
        let shared: State = state.withLock { state in
            switch state {
            case .decoded(let changes): .decoded(changes)
            case .shared(let base): .shared(base)
            case .encoded, .encodedInChunk, .retyped: .shared(self)
            }
        }
        return HistoryChanges(header: header, state: shared, modelTypes: modelTypes)
    }

    var changes: [HistoryChange] {
        state.withLock { state in
            let changes: [HistoryChange]
            switch state {
            case let .decoded(decoded):
                return decoded
            case let .encodedInChunk(chunk, range, decoder, offset):
                changes = decodeChanges(chunk.bytes(range), decoder: decoder, offset: offset)
            case let .encoded(payload, decoder, offset):
                changes = payload.withUnsafeBytes { decodeChanges($0, decoder: decoder, offset: offset) }
            case let .retyped(base):
                changes = base.changes.map { $0.typed(by: modelTypes) }
            case let .shared(base):
                changes = base.changes
            }
            state = .decoded(changes)
            return changes
        }
    }

    /// The changes of a payload that passed its CRC and whose prefix decoded with this decoder's
    /// table, typed by ``modelTypes``.
    private func decodeChanges(_ payload: UnsafeRawBufferPointer, decoder: TransactionRecord.Decoder, offset: UInt64)
        -> [HistoryChange]
    {
        Self.decodeChanges(payload, decoder: decoder, offset: offset, modelTypes: modelTypes)
    }

    /// ``decodeChanges(_:decoder:offset:)`` with the model types given (``HistoryBatch``).
    static func decodeChanges(
        _ payload: UnsafeRawBufferPointer, decoder: TransactionRecord.Decoder, offset: UInt64,
        modelTypes: [String: any PersistentModel.Type]
    ) -> [HistoryChange] {
        do {
            return try decoder.decode(payload).changes.enumerated().map { index, change in
                HistoryChange(change, modelTypes: modelTypes, transactionIdentifier: Int64(offset), index: index)
            }
        } catch {
            // Only a writer bug gets here. Loud rather than a silently empty change list.
            preconditionFailure(
                "The transaction record at offset \(offset) passed its checksum but its "
                    + "changes do not decode: \(error). Run `logstore verify`.")
        }
    }
}

/// One change of a transaction (SwiftData's `HistoryChange`). Cast the payload to the typed
/// change of a model: `case .update(let update as DefaultHistoryUpdate<LivingAccommodation>)`.
/// Every change also answers by names and values, without model types (``HistoryInsert/values``…).
public enum HistoryChange: Sendable, Hashable {
    /// A model was inserted.
    case insert(any HistoryInsert)
    /// A model was updated.
    case update(any HistoryUpdate)
    /// A model was deleted.
    case delete(any HistoryDelete)

    /// The identifier of the model inserted, updated or deleted.
    public var changedPersistentIdentifier: PersistentIdentifier {
        switch self {
        case let .insert(insert): insert.changedPersistentIdentifier
        case let .update(update): update.changedPersistentIdentifier
        case let .delete(delete): delete.changedPersistentIdentifier
        }
    }

    /// The change's identifier: its transaction and its place in it.
    public var changeIdentifier: HistoryChangeIdentifier {
        switch self {
        case let .insert(insert): insert.changeIdentifier
        case let .update(update): update.changeIdentifier
        case let .delete(delete): delete.changeIdentifier
        }
    }

    init(_ change: ResolvedChange, modelTypes: [String: any PersistentModel.Type] = [:],
         transactionIdentifier: Int64 = 0, index: Int = 0) {
        let identifier = HistoryChangeIdentifier(transactionIdentifier: transactionIdentifier, index: index)
        let entityName: String = switch change {
        case let .insert(id, _), let .update(id, _), let .delete(id, _): id.entityName
        }
        if let type = modelTypes[entityName] {
            self = Self.make(type, change, identifier)
        } else {
            self = Self.make(UntypedModel.self, change, identifier)
        }
    }

    private static func make<Model: PersistentModel>(
        _ type: Model.Type, _ change: ResolvedChange, _ identifier: HistoryChangeIdentifier
    ) -> HistoryChange {
        switch change {
        case let .insert(id, values):
            .insert(DefaultHistoryInsert<Model>(changedPersistentIdentifier: id, changeIdentifier: identifier, values: values))
        case let .update(id, values):
            .update(DefaultHistoryUpdate<Model>(changedPersistentIdentifier: id, changeIdentifier: identifier, values: values))
        case let .delete(id, tombstone):
            .delete(
                DefaultHistoryDelete<Model>(
                    changedPersistentIdentifier: id, changeIdentifier: identifier,
                    tombstone: HistoryTombstone(entityName: id.entityName, values: tombstone)))
        }
    }

    /// The same change typed by these model types.
    func typed(by modelTypes: [String: any PersistentModel.Type]) -> HistoryChange {
        HistoryChange(resolved, modelTypes: modelTypes, transactionIdentifier: changeIdentifier.transactionIdentifier,
                      index: changeIdentifier.index)
    }

    /// The change as names and values (what the record holds).
    var resolved: ResolvedChange {
        switch self {
        case let .insert(insert): .insert(insert.changedPersistentIdentifier, insert.values)
        case let .update(update): .update(update.changedPersistentIdentifier, update.values)
        case let .delete(delete): .delete(delete.changedPersistentIdentifier, tombstone: delete.tombstoneValues)
        }
    }

    /// Equal when the kind, the model and the values are equal (the model types they are typed by
    /// do not count).
    public static func == (lhs: HistoryChange, rhs: HistoryChange) -> Bool { lhs.resolved == rhs.resolved }

    /// Hashes the kind, the model and the values.
    public func hash(into hasher: inout Hasher) { hasher.combine(resolved) }
}

/// Identifies one change: its transaction and its index in the transaction's changes.
public struct HistoryChangeIdentifier: Hashable, Sendable, Comparable {
    /// The transaction's ``HistoryTransaction/transactionIdentifier``.
    public var transactionIdentifier: Int64
    /// The change's place in ``HistoryTransaction/changes``, from 0.
    public var index: Int

    /// The identifier of change `index` of the transaction.
    public init(transactionIdentifier: Int64, index: Int) {
        self.transactionIdentifier = transactionIdentifier
        self.index = index
    }

    /// History order: by transaction, then by place in the transaction.
    public static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.transactionIdentifier, lhs.index) < (rhs.transactionIdentifier, rhs.index)
    }
}

/// A model inserted (SwiftData's `HistoryInsert`).
public protocol HistoryInsert<Model>: Sendable {
    /// The model type the change is typed by (``UntypedModel`` when none was known).
    associatedtype Model: PersistentModel
    /// The changed model's identifier.
    var changedPersistentIdentifier: PersistentIdentifier { get }
    /// The change's transaction and place in it.
    var changeIdentifier: HistoryChangeIdentifier { get }
    /// Every value it was saved with, by property name (references as identifiers).
    var values: [String: AttributeValue] { get }
}

/// A model updated (SwiftData's `HistoryUpdate`): which properties changed — and, beyond
/// SwiftData, their new values.
public protocol HistoryUpdate<Model>: Sendable {
    /// The model type the change is typed by (``UntypedModel`` when none was known).
    associatedtype Model: PersistentModel
    /// The changed model's identifier.
    var changedPersistentIdentifier: PersistentIdentifier { get }
    /// The change's transaction and place in it.
    var changeIdentifier: HistoryChangeIdentifier { get }
    /// The changed properties, as key paths of the model.
    var updatedAttributes: [any PartialKeyPath<Model> & Sendable] { get }
    /// The changed properties' names.
    var updatedAttributeNames: Set<String> { get }
    /// The changed properties' new values, by name.
    var values: [String: AttributeValue] { get }
}

/// A model deleted (SwiftData's `HistoryDelete`), with its tombstone.
public protocol HistoryDelete<Model>: Sendable {
    /// The model type the change is typed by (``UntypedModel`` when none was known).
    associatedtype Model: PersistentModel
    /// The changed model's identifier.
    var changedPersistentIdentifier: PersistentIdentifier { get }
    /// The change's transaction and place in it.
    var changeIdentifier: HistoryChangeIdentifier { get }
    /// The values of the model's `.preserveValueOnDeletion` attributes.
    var tombstone: HistoryTombstone<Model> { get }
    /// The tombstone's values by name.
    var tombstoneValues: [String: AttributeValue] { get }
}

/// An insert of a `Model`.
public struct DefaultHistoryInsert<Model: PersistentModel>: HistoryInsert {
    /// The changed model's identifier.
    public let changedPersistentIdentifier: PersistentIdentifier
    /// The change's transaction and place in it.
    public let changeIdentifier: HistoryChangeIdentifier
    /// Every value the model was saved with, by property name (references as identifiers).
    public let values: [String: AttributeValue]

    /// For custom stores providing history of their own.
    public init(changedPersistentIdentifier: PersistentIdentifier, changeIdentifier: HistoryChangeIdentifier,
                values: [String: AttributeValue]) {
        self.changedPersistentIdentifier = changedPersistentIdentifier
        self.changeIdentifier = changeIdentifier
        self.values = values
    }

    /// The inserted value of a property, by key path (`insert[\Trip.name]`).
    public subscript<Value: AttributeConvertible>(_ keyPath: KeyPath<Model, Value>) -> Value? {
        HistoryTombstone<Model>.value(of: keyPath, in: values)
    }
}

/// An update of a `Model`.
public struct DefaultHistoryUpdate<Model: PersistentModel>: HistoryUpdate {
    /// The changed model's identifier.
    public let changedPersistentIdentifier: PersistentIdentifier
    /// The change's transaction and place in it.
    public let changeIdentifier: HistoryChangeIdentifier
    /// The changed properties' new values, by name.
    public let values: [String: AttributeValue]

    /// For custom stores providing history of their own: `values` are the changed properties'
    /// new values.
    public init(changedPersistentIdentifier: PersistentIdentifier, changeIdentifier: HistoryChangeIdentifier,
                values: [String: AttributeValue]) {
        self.changedPersistentIdentifier = changedPersistentIdentifier
        self.changeIdentifier = changeIdentifier
        self.values = values
    }

    /// The changed properties' names: the keys of ``values``.
    public var updatedAttributeNames: Set<String> { Set(values.keys) }

    /// The changed properties as key paths: `update.updatedAttributes.contains(\.isConfirmed)`.
    public var updatedAttributes: [any PartialKeyPath<Model> & Sendable] {
        Model.schemaProperties.filter { values[$0.name] != nil }.map(\.keyPath)
    }

    /// The new value of a changed property, or `nil` when it did not change in this update.
    public subscript<Value: AttributeConvertible>(_ keyPath: KeyPath<Model, Value>) -> Value? {
        HistoryTombstone<Model>.value(of: keyPath, in: values)
    }
}

/// A delete of a `Model`.
public struct DefaultHistoryDelete<Model: PersistentModel>: HistoryDelete {
    /// The changed model's identifier.
    public let changedPersistentIdentifier: PersistentIdentifier
    /// The change's transaction and place in it.
    public let changeIdentifier: HistoryChangeIdentifier
    /// The values of the model's `.preserveValueOnDeletion` attributes.
    public let tombstone: HistoryTombstone<Model>

    /// For custom stores providing history of their own.
    public init(changedPersistentIdentifier: PersistentIdentifier, changeIdentifier: HistoryChangeIdentifier,
                tombstone: HistoryTombstone<Model>) {
        self.changedPersistentIdentifier = changedPersistentIdentifier
        self.changeIdentifier = changeIdentifier
        self.tombstone = tombstone
    }

    /// The tombstone's values by name (``HistoryTombstone/values``).
    public var tombstoneValues: [String: AttributeValue] { tombstone.values }
}

/// The values a deleted model kept: those of its `.preserveValueOnDeletion` attributes
/// (SwiftData's `HistoryTombstone`). A `Sequence` of (name, key path, value).
public struct HistoryTombstone<Model: PersistentModel>: Sendable, Sequence {
    /// A preserved value: the attribute's name, its key path in `Model` (`nil` for an
    /// ``UntypedModel`` or a name the model no longer has), and the value.
    public typealias Element = (name: String, keyPath: (any PartialKeyPath<Model> & Sendable)?, value: AttributeValue)

    /// The deleted model's entity.
    public let entityName: String
    /// Attribute names → preserved values.
    public let values: [String: AttributeValue]

    /// A tombstone of an `entityName` model with these preserved values.
    public init(entityName: String, values: [String: AttributeValue]) {
        self.entityName = entityName
        self.values = values
    }

    /// The preserved value of an attribute, by name.
    public subscript(name: String) -> AttributeValue? { values[name] }

    /// The preserved value of a model property, by key path (`tombstone[\.name]`); `nil` when
    /// it was not preserved.
    public subscript<Value: AttributeConvertible>(_ keyPath: KeyPath<Model, Value>) -> Value? {
        Self.value(of: keyPath, in: values)
    }

    /// The preserved values, in attribute-name order.
    public func makeIterator() -> IndexingIterator<[Element]> {
        let keyPaths = Dictionary(Model.schemaProperties.map { ($0.name, $0.keyPath) }) { first, _ in first }
        return values.keys.sorted().map { name in (name, keyPaths[name], values[name]!) }.makeIterator()
    }

    static func value<Value: AttributeConvertible>(of keyPath: KeyPath<Model, Value>, in values: [String: AttributeValue])
        -> Value?
    {
        guard let property = Model.schemaProperties.first(where: { ($0.keyPath as AnyKeyPath) == (keyPath as AnyKeyPath) }),
            let value = values[property.name]
        else { return nil }
        return Value(attributeValue: value)
    }
}

/// The model type of history changes whose entity has no model type where they were read (the
/// tool, ``LogStore/fetchHistory(_:)``, a store opened without its models): they answer by
/// names and values (``HistoryInsert/values``…), not key paths.
public final class UntypedModel: PersistentModel {
    /// None: an untyped change has no key paths.
    public static let schemaProperties: [ModelProperty<UntypedModel>] = []
    /// The instance's state, as every ``PersistentModel`` has one.
    public let modelState = ModelState()
    /// An empty instance, as ``PersistentModel`` requires.
    public init() {}
}

/// What to fetch from (or delete of) a store's history (SwiftData's `HistoryDescriptor`).
///
/// The predicate is a Foundation `#Predicate` over transactions. ``LogStore`` reads token bounds
/// (`$0.token > saved`, `>=`, `<`, `<=`) and `author ==`, `!=`, `== nil`, `!= nil` itself: token
/// bounds seek straight to the offset, author tests read only the start of each record. Anything
/// else is evaluated with `Predicate.evaluate` on the transactions those leave.
public struct HistoryDescriptor<Transaction: HistoryTransaction>: Sendable {
    /// Which transactions: `nil` for all retained history.
    public var predicate: Predicate<Transaction>?
    /// Default: log order (oldest first).
    public var sortBy: [SortDescriptor<Transaction>]
    /// At most this many transactions (`nil`: no limit).
    public var fetchLimit: Int?

    /// A descriptor of the transactions `predicate` selects, in `sortBy` order (log order by
    /// default).
    public init(predicate: Predicate<Transaction>? = nil, sortBy: [SortDescriptor<Transaction>] = []) {
        self.predicate = predicate
        self.sortBy = sortBy
    }
}

/// A store that keeps history (SwiftData's `HistoryProviding`).
public protocol HistoryProviding<HistoryType> {
    /// The store's transaction type (``DefaultHistoryTransaction`` for ``LogStore``).
    associatedtype HistoryType: HistoryTransaction
    /// The transactions the descriptor selects.
    func fetchHistory(_ descriptor: HistoryDescriptor<HistoryType>) throws -> [HistoryType]
    /// Deletes the history the descriptor selects (a store may accept only some predicates).
    func deleteHistory(_ descriptor: HistoryDescriptor<HistoryType>) throws
}

/// Payload bytes of several transactions of one history fetch, copied in one after the other, so
/// that a fetch makes one allocation per chunk instead of an array per record (which, with the
/// copy, was about a tenth of P6's fetch of 1,000 transactions).
///
/// `@unchecked Sendable`: bytes are only appended, by the one fetch that fills the chunk, and a
/// range is handed out (to a ``HistoryBatch`` entry, or a ``HistoryChanges``) only once written;
/// what is handed out is never written again — a range taken back (``rewind(to:)``) is one the
/// fetch handed out and dropped itself — and reaches other threads only through the fetch's
/// result. `used` is touched only by that fetch.
final class PayloadChunk: @unchecked Sendable {
    private let base: UnsafeMutableRawPointer
    let capacity: Int
    private var used = 0

    init(capacity: Int) {
        precondition(capacity > 0)
        self.capacity = capacity
        base = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 16)
    }

    deinit { base.deallocate() }

    /// Copies `bytes` in after what it holds and returns where they are; `nil` when they do not fit.
    func append(_ bytes: UnsafeRawBufferPointer) -> Range<Int>? {
        guard bytes.count <= capacity - used else { return nil }
        if let source = bytes.baseAddress { (base + used).copyMemory(from: source, byteCount: bytes.count) }
        defer { used += bytes.count }
        return used..<(used + bytes.count)
    }

    /// Takes back what was appended from `offset` on (the filling fetch dropped those ranges).
    func rewind(to offset: Int) {
        precondition(offset >= 0 && offset <= used, "a rewind goes back within what was appended")
        used = offset
    }

    /// Bytes copied in earlier (a range ``append(_:)`` returned). Checked against the capacity,
    /// not `used`: another thread decoding a transaction must not read what the filling fetch
    /// writes (its ranges were written before they were handed out).
    func bytes(_ range: Range<Int>) -> UnsafeRawBufferPointer {
        precondition(range.lowerBound >= 0 && range.upperBound <= capacity)
        return UnsafeRawBufferPointer(start: base + range.lowerBound, count: range.count)
    }
}
