import Foundation
import LogStore
import LogStoreEngine

/// Where a ``PostgresShipper`` reads a store's history.
///
/// ```swift
/// let fromApp = ShippingSource.store(container.dataStore(as: LogStore.self)!) // embedded, with a bookmark
/// let fromDisk = ShippingSource.directory("/var/lib/trips")                 // read-only, no bookmark
/// ```
public enum ShippingSource: Sendable {
    /// A store this process has open (the app embeds the shipper). The shipper registers a
    /// history consumer and acknowledges each commit, so retention never deletes what was not
    /// shipped, and `follow` wakes on each save through ``LogStore/historyTail(after:)``.
    case store(LogStore)
    /// A store directory read read-only, without the writer's lock (beside a live writer in
    /// another process). No consumer bookmark can be kept this way: retention may delete history
    /// before it is shipped, which then needs a reseed. `follow` polls.
    case directory(String, fileSystem: any FileSystem = PosixFileSystem())

    /// The store's directory (both cases).
    var directory: String {
        switch self {
        case let .store(store): store.configuration.directory
        case let .directory(directory, _): directory
        }
    }

    var fileSystem: any FileSystem {
        switch self {
        case let .store(store): store.configuration.fileSystem
        case let .directory(_, fileSystem): fileSystem
        }
    }

    /// Whether the shipper keeps a consumer bookmark (a writable store in this process).
    var keepsBookmark: Bool {
        if case .store = self { return true }
        return false
    }

    /// At most `limit` transactions after `token` (all retained history when `nil`), oldest first.
    func transactions(after token: DefaultHistoryToken?, limit: Int) throws -> [DefaultHistoryTransaction] {
        var descriptor = HistoryDescriptor<DefaultHistoryTransaction>()
        if let token {
            descriptor.predicate = #Predicate { $0.token > token }
        }
        descriptor.fetchLimit = limit
        switch self {
        case let .store(store): return try store.fetchHistory(descriptor)
        case let .directory(directory, fileSystem):
            return try LogStore.fetchHistory(directory: directory, fileSystem: fileSystem, descriptor)
        }
    }

    /// L: the newest deleted transaction, or `nil` while no history was deleted.
    func lowWaterMark() throws -> DefaultHistoryToken? {
        switch self {
        case let .store(store): store.historyLowWaterMark
        case let .directory(directory, fileSystem): try LogStore.historyLowWaterMark(directory: directory, fileSystem: fileSystem)
        }
    }

    /// The schema as stored: value types for the mirror's columns.
    func storedSchema() throws -> Schema? {
        try LogStore.storedSchema(directory: directory, fileSystem: fileSystem)
    }

    /// The store's models now, with the token of the last transaction they include.
    func currentState() throws -> StoreState {
        try LogStore.replay(directory: directory, fileSystem: fileSystem)
    }

    /// The store's visible log end (where the next transaction will start).
    var logEndOffset: UInt64? {
        switch self {
        case let .store(store): return store.logEndOffset
        case let .directory(directory, fileSystem):
            guard let log = try? Log.openReadOnly(directory: directory, fileSystem: fileSystem) else { return nil }
            defer { try? log.close() }
            return log.visibleEnd
        }
    }

    /// The store's UUID (the `store` of its tokens).
    func storeIdentifier() throws -> UUID {
        switch self {
        case let .store(store):
            guard let identifier = UUID(uuidString: store.identifier) else { preconditionFailure("a store identifier is a UUID") }
            return identifier
        case let .directory(directory, fileSystem):
            let log = try Log.openReadOnly(directory: directory, fileSystem: fileSystem)
            defer { try? log.close() }
            return log.storeID
        }
    }
}
