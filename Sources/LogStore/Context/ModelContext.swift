import Foundation

/// Tracks model instances, their inserts, changes and deletes, and saves them to the container's
/// store (SwiftData's `ModelContext`). Use a context from one thread or task at a time.
///
/// ```swift
/// let context = ModelContext(container)
/// context.insert(Trip(name: "Lisbon", destination: "Portugal"))
/// try context.save()
/// let trips = try context.fetch(FetchDescriptor<Trip>(predicate: #Predicate { $0.destination == "Portugal" }))
/// ```
///
/// Changes are found at save time by comparing each registered instance's values with those
/// last saved or fetched (DECISIONS.md D9).
public final class ModelContext {
    /// The container whose store this context reads and saves.
    public let container: ModelContainer
    /// Recorded as the author of this context's transactions.
    public var author: String?

    /// Identity map: one instance per identifier.
    var registered: [PersistentIdentifier: any PersistentModel] = [:]
    /// Values as last saved or fetched, per registered identifier.
    var savedValues: [PersistentIdentifier: [String: AttributeValue]] = [:]
    /// Inserted and not yet saved, in insertion order.
    var inserted: [any PersistentModel] = []
    /// Deleted and not yet saved.
    var deleted: [PersistentIdentifier: any PersistentModel] = [:]
    /// Registered, saved `@Model` instances set since their last save or fetch: they report their
    /// own changes, so a save looks at these instead of encoding every registered model.
    var changedModels: [ObjectIdentifier: any PersistentModel] = [:]
    /// The saves in flight — a ``save()-7kswr`` async suspended while its record becomes durable,
    /// and any save made meanwhile — by sequence number: what each request carries. A save made
    /// meanwhile does not send it again, a fetch's refresh and `rollback()` leave it to its save.
    var savesInFlight: [Int: SaveInFlight] = [:]
    var nextSaveSequence = 0
    /// Inserts a save in flight carries that were deleted meanwhile, by their temporary
    /// identifiers: that save stores them, and then their delete is pending (`apply`).
    var insertsDeletedWhileBeingSaved: [PersistentIdentifier: any PersistentModel] = [:]
    /// Models a save in flight deletes that were inserted again meanwhile: once it has deleted
    /// them they are pending inserts (with their identifiers), as a model inserted after its
    /// delete was saved is.
    var reinsertedWhileBeingDeleted: Set<PersistentIdentifier> = []
    /// Whether a model without its own change tracking (a hand-written conformance) was ever
    /// registered: then saves compare every registered model's values with its saved ones.
    var hasUntrackedModels = false

    /// Whether changes are saved without a call to ``save()-7kswr``: on the main actor's next turn
    /// after an insert, a delete or (for models that track their changes) a property change.
    /// On for ``ModelContainer/mainContext``, off for contexts you make. Autosave errors are
    /// kept in ``lastAutosaveError``; call ``save()-7kswr`` yourself where you must know.
    public var autosaveEnabled = false
    /// The error of the last autosave that failed, if any (cleared by a successful save).
    public private(set) var lastAutosaveError: (any Error)?
    /// Set for the container's main-actor context: the only one whose autosave runs.
    var isMainContext = false
    /// An autosave is scheduled and has not run yet.
    private var autosaveScheduled = false

    /// A new context on the container's store, with no registered models, no author and autosave
    /// off.
    public init(_ container: ModelContainer) {
        self.container = container
    }

    /// After a change: schedules one save on the main actor's next turn (coalescing the changes
    /// made meanwhile), for the main context with autosave on.
    func changeMade() {
        guard autosaveEnabled, isMainContext, !autosaveScheduled else { return }
        autosaveScheduled = true
        // The main context is only used on the main actor (ModelContainer.mainContext is
        // @MainActor), so the task runs where the context lives.
        nonisolated(unsafe) let context = self
        Task { @MainActor in context.autosave() }
    }

    private func autosave() {
        autosaveScheduled = false
        guard autosaveEnabled, hasChanges else { return }
        do {
            try save()
            lastAutosaveError = nil
        } catch {
            lastAutosaveError = error
        }
    }

    /// Registers a new model; it is saved with the next ``save()-7kswr``. Related unsaved models are
    /// inserted with it at save time.
    public func insert<T: PersistentModel>(_ model: T) {
        precondition(
            model.modelState.unbackedReason == nil,
            "insert(_:) of the instance model(for: \(model.persistentModelID)) made with no values: "
                + (model.modelState.unbackedReason ?? ""))
        let identifier = model.persistentModelID
        if registered[identifier] != nil { return }
        // Deleted while a save in flight stores it, and inserted again: it stays that save's.
        if !insertsDeletedWhileBeingSaved.isEmpty { insertsDeletedWhileBeingSaved[identifier] = nil }
        if isDeleteBeingSaved(identifier) { reinsertedWhileBeingDeleted.insert(identifier) }
        if let restored = deleted.removeValue(forKey: identifier) {
            registered[identifier] = restored
            // Changes made before the delete are pending again (they were dropped with it).
            if !restored.modelState.changedNames.isEmpty { changedModels[ObjectIdentifier(restored)] = restored }
            return
        }
        model.modelState.context = self
        registered[identifier] = model
        inserted.append(model)
        if !T._usesModelStorage { hasUntrackedModels = true }
        changeMade()
    }

    /// Marks a model for deletion at the next save (an unsaved insert is simply dropped).
    public func delete<T: PersistentModel>(_ model: T) {
        let identifier = model.persistentModelID
        if let index = inserted.firstIndex(where: { $0 === model }) {
            inserted.remove(at: index)
            registered[identifier] = nil
            model.modelState.context = nil
            // Sent by a save in flight: that save stores it; its delete is for the next save.
            if isInsertBeingSaved(model) {
                insertsDeletedWhileBeingSaved[identifier] = model
                changeMade()
            }
            return
        }
        guard registered[identifier] != nil else { return }
        deleted[identifier] = model
        registered[identifier] = nil
        changedModels[ObjectIdentifier(model)] = nil
        changeMade()
    }

    /// The registered instance with this identifier, if any.
    public func registeredModel<T: PersistentModel>(for identifier: PersistentIdentifier) -> T? {
        registered[identifier] as? T
    }

    /// Whether a save would write anything.
    public var hasChanges: Bool {
        if !inserted.isEmpty || !deleted.isEmpty || !insertsDeletedWhileBeingSaved.isEmpty { return true }
        if changedModels.values.contains(where: { !changedValues(of: $0).isEmpty }) { return true }
        return hasUntrackedModels
            && registered.contains { identifier, model in
                !identifier.isTemporary && encode(model) != savedValuesWithSavesInFlight(of: identifier)
            }
    }

    /// A tracked model's changed properties whose values differ from the saved ones.
    func changedValues(of model: any PersistentModel) -> [String: AttributeValue] {
        let identifier = model.persistentModelID
        // With saves in flight, against what the store holds once they are saved (a property set
        // back to its value before a save in flight is a change).
        guard !identifier.isTemporary,
            let saved = savesInFlight.isEmpty ? savedValues[identifier] : savedValuesWithSavesInFlight(of: identifier)
        else { return [:] }
        return encode(model, only: model.modelState.changedNames).filter { saved[$0.key] != $0.value }
    }

    /// Discards unsaved inserts, deletes and changes: registered models get their saved values back.
    /// What a save in flight (``save()-7kswr`` async, suspended) carries is not undone: it is
    /// being saved, and is registered as saved when that save returns.
    public func rollback() {
        for model in inserted where !isInsertBeingSaved(model) {
            registered[model.persistentModelID] = nil
            model.modelState.context = nil
        }
        inserted.removeAll { !isInsertBeingSaved($0) }
        // A delete of an insert in flight is undone: the insert is pending again, as that save's.
        for (identifier, model) in insertsDeletedWhileBeingSaved {
            model.modelState.context = self
            registered[identifier] = model
            inserted.append(model)
        }
        insertsDeletedWhileBeingSaved.removeAll()
        // An insert in flight changed meanwhile: back to the values its save carries.
        for model in inserted where !model.modelState.changedNames.isEmpty {
            guard let values = valuesBeingSaved(ofInsert: model) else { continue }
            try? fill(model, with: values)
        }
        // So is a model deleted by a save in flight and inserted again meanwhile.
        for identifier in reinsertedWhileBeingDeleted {
            guard let model = registered.removeValue(forKey: identifier) else { continue }
            changedModels[ObjectIdentifier(model)] = nil
            deleted[identifier] = model
        }
        reinsertedWhileBeingDeleted.removeAll()
        var restored: [(PersistentIdentifier, any PersistentModel)] = []
        for (identifier, model) in deleted where !isDeleteBeingSaved(identifier) {
            registered[identifier] = model
            restored.append((identifier, model))
        }
        deleted = deleted.filter { isDeleteBeingSaved($0.key) }
        // A model changed before its delete comes back with its saved values (filled once every
        // restored model is registered, so references between them resolve).
        for (identifier, model) in restored where !model.modelState.changedNames.isEmpty {
            guard let values = savedValuesWithSavesInFlight(of: identifier) else { continue }
            try? fill(model, with: values)
        }
        // Back to the saved values — with what a save in flight carries, which it is saving.
        for model in changedModels.values {
            guard let values = savedValuesWithSavesInFlight(of: model.persistentModelID) else { continue }
            try? fill(model, with: values)
        }
        changedModels.removeAll()
        guard hasUntrackedModels else { return }
        for (identifier, model) in registered {
            guard let values = savedValuesWithSavesInFlight(of: identifier), encode(model) != values else { continue }
            try? fill(model, with: values)
        }
    }

    /// Runs `block`, then saves; if the block throws, nothing is saved and its changes are rolled back.
    public func transaction(block: () throws -> Void) throws {
        do {
            try block()
        } catch {
            rollback()
            throw error
        }
        try save()
    }

    // MARK: Encoding models

    func encode(_ model: any PersistentModel) -> [String: AttributeValue] {
        encodeTyped(model)
    }

    private func encodeTyped<M: PersistentModel>(_ model: M) -> [String: AttributeValue] {
        // Room for every property at once: grown one by one, a Trip's values rehashed three times.
        var values = [String: AttributeValue](minimumCapacity: M.schemaProperties.count)
        for property in M.schemaProperties { values[property.name] = property.read(model) }
        return values
    }

    /// The values of the named properties only.
    func encode(_ model: any PersistentModel, only names: Set<String>) -> [String: AttributeValue] {
        encodeTyped(model, only: names)
    }

    private func encodeTyped<M: PersistentModel>(_ model: M, only names: Set<String>) -> [String: AttributeValue] {
        var values: [String: AttributeValue] = [:]
        for property in M.schemaProperties where names.contains(property.name) {
            values[property.name] = property.read(model)
        }
        return values
    }

    func relatedModels(of model: any PersistentModel) -> [any PersistentModel] {
        relatedTyped(model)
    }

    private func relatedTyped<M: PersistentModel>(_ model: M) -> [any PersistentModel] {
        var related: [any PersistentModel] = []
        for property in M.schemaProperties where property.relationship != nil { related += property.related(model) }
        return related
    }

    /// Sets the model's properties from stored values (not changes to save). Unless
    /// `keepingPendingChanges` (a fetch's refresh of some properties), the model has no pending
    /// change afterwards.
    func fill(_ model: any PersistentModel, with values: [String: AttributeValue], keepingPendingChanges: Bool = false)
        throws
    {
        try fillTyped(model, values, keepingPendingChanges: keepingPendingChanges)
    }

    private func fillTyped<M: PersistentModel>(
        _ model: M, _ values: [String: AttributeValue], keepingPendingChanges: Bool
    ) throws {
        // Values from the store are not changes, and the store keeps both sides of relationships.
        try model.modelState.filling {
            for property in M.schemaProperties {
                guard let value = values[property.name] else { continue }
                try property.write(model, value) { identifier in self.registered[identifier] }
            }
        }
        guard !keepingPendingChanges else { return }
        model.modelState.changedNames.removeAll()
        changedModels[ObjectIdentifier(model)] = nil
    }
}

extension ModelContext: ModelChangeObserver {
    /// A tracked model registered here was set: remember it for the next save, and autosave.
    func modelDidChange(_ model: any PersistentModel) {
        if !model.persistentModelID.isTemporary, registered[model.persistentModelID] === model {
            changedModels[ObjectIdentifier(model)] = model
        }
        changeMade()
    }
}

extension PersistentModel {
    /// The context the model is registered in, if any.
    public var modelContext: ModelContext? { modelState.context as? ModelContext }
}
