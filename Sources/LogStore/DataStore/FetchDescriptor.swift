import Foundation

/// What to fetch: a Foundation `#Predicate`, `SortDescriptor`s, and a window (SwiftData's
/// `FetchDescriptor`).
///
/// ```swift
/// var descriptor = FetchDescriptor<Trip>(predicate: #Predicate { $0.destination == "Lisbon" },
///                                        sortBy: [SortDescriptor(\.startDate)])
/// descriptor.fetchLimit = 10
/// let trips = try context.fetch(descriptor)
/// ```
public struct FetchDescriptor<T: PersistentModel>: @unchecked Sendable {
    // @unchecked: Predicate and SortDescriptor over a class are not Sendable; a descriptor is a
    // value handed from the context to the store within one save/fetch call.
    /// Which models: `nil` for all of `T`.
    public var predicate: Predicate<T>?
    /// The order, first descriptor first; unsorted results come in insertion order.
    public var sortBy: [SortDescriptor<T>]
    /// At most this many models (`nil`: no limit).
    public var fetchLimit: Int?
    /// Skip this many models of the sorted result first (`nil`: none).
    public var fetchOffset: Int?
    /// Whether unsaved inserts, changes and deletes of the context take part (default `true`).
    public var includePendingChanges = true
    /// Set by ``ModelContext`` after the store declined `predicate`: the store may return a
    /// superset — the rows matching the `&&` terms it recognises — and the context evaluates the
    /// whole predicate over them (D9). Sort, offset and limit are left to the context.
    var candidatesOnly = false

    /// A descriptor of the models of `T` that `predicate` selects, in `sortBy` order.
    public init(predicate: Predicate<T>? = nil, sortBy: [SortDescriptor<T>] = []) {
        self.predicate = predicate
        self.sortBy = sortBy
    }
}
