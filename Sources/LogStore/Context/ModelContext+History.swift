import Foundation

extension ModelContext {
    /// The store's history (SwiftData's `ModelContext.fetchHistory`): forwards to the container's
    /// store, which must provide history of this transaction type.
    public func fetchHistory<Transaction: HistoryTransaction>(_ descriptor: HistoryDescriptor<Transaction>) throws
        -> [Transaction]
    {
        try historyProvider(of: Transaction.self).fetchHistory(descriptor)
    }

    /// Deletes the store's history up to what the descriptor selects (see
    /// ``LogStore/deleteHistory(_:force:)`` for what a ``LogStore`` accepts).
    public func deleteHistory<Transaction: HistoryTransaction>(_ descriptor: HistoryDescriptor<Transaction>) throws {
        try historyProvider(of: Transaction.self).deleteHistory(descriptor)
    }

    private func historyProvider<Transaction: HistoryTransaction>(of type: Transaction.Type) throws
        -> any HistoryProviding<Transaction>
    {
        guard let provider = container.store.base as? any HistoryProviding<Transaction> else {
            throw LogStoreError.unsupportedFeature(
                "The container's store (\(Swift.type(of: container.store))) keeps no "
                    + "history of \(Transaction.self).")
        }
        return provider
    }
}
