import Foundation

extension ModelContext {
    /// The store's history (SwiftData's `ModelContext.fetchHistory`): forwards to the container's
    /// store, which must provide history of this transaction type. LogStore's transactions come
    /// back with their changes typed by the container's models, so
    /// `case .update(let update as DefaultHistoryUpdate<Trip>)` matches.
    public func fetchHistory<Transaction: HistoryTransaction>(_ descriptor: HistoryDescriptor<Transaction>) throws
        -> [Transaction]
    {
        let transactions = try historyProvider(of: Transaction.self).fetchHistory(descriptor)
        guard let defaults = transactions as? [DefaultHistoryTransaction] else { return transactions }
        let modelTypes = container.modelTypes
        return defaults.map { $0.typed(by: modelTypes) } as! [Transaction]
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
