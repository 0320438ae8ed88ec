import Foundation
import LogStore
import LogStoreEngine
@_exported import SampleTrips

/// Which store a model-layer workload saves to.
public enum ModelStoreKind: Sendable {
    /// A ``LogStore`` in `directory/store` with the given durability (other options default).
    case logStore(Durability)
    /// An ``ArchiveStore`` (one JSON file, rewritten and fsynced per save) in `directory`, seeded
    /// with `seedModels` trips saved before the measurement.
    case archive(seedModels: Int)
}

/// Where a save comes from.
public enum SaveLayer: Sendable, Equatable {
    /// `ModelContext.insert` + `save()`, one context per thread for the whole benchmark (an app's
    /// main context): every saved model stays registered, and `save()` compares each registered
    /// model with its saved values, so a save's cost grows with the number saved before it.
    case longLivedContext
    /// `ModelContext.insert` + `save()` on a new context for every save (the context's steady
    /// per-save cost, without registered models piling up).
    case contextPerSave
    /// `store.save(DataStoreSaveChangesRequest)` with snapshots built directly (the store layer
    /// without the context). LogStore only.
    case store

    public var label: String {
        switch self {
        case .longLivedContext: "long-lived context"
        case .contextPerSave: "new context per save"
        case .store: "store.save, no context"
        }
    }
}

/// Saves of `insertsPerSave` new `Trip`s each, through the model layer, from any number of threads
/// sharing one `ModelContainer` (each thread has its own context). Trip names are unique, so every
/// insert is an insert.
public final class ModelSaveWorkload: Workload, @unchecked Sendable {
    // @unchecked: each thread touches only its own slot; the harness reads counters between
    // iterations (after every thread finished).
    public let container: ModelContainer
    public let layer: SaveLayer
    public let insertsPerSave: Int
    let kind: ModelStoreKind
    let slots: [Slot]
    let seedModels: Int
    let logStore: LogStore?
    let archivePath: String?

    final class Slot: @unchecked Sendable {
        var context: ModelContext?
        var saves = 0
    }

    /// With `registeredModels`, each long-lived context first saves that many Trips (in saves of
    /// 1,000, before the measurement) and keeps them registered, as an app's main context would.
    public init(
        directory: String, store kind: ModelStoreKind, layer: SaveLayer, threads: Int, insertsPerSave: Int = 1,
        registeredModels: Int = 0
    ) throws {
        self.kind = kind
        self.layer = layer
        self.insertsPerSave = insertsPerSave
        switch kind {
        case .logStore(let durability):
            container = try ModelContainer(
                for: tripModels,
                configuration: LogStoreConfiguration(directory: directory + "/store", durability: durability))
            logStore = container.dataStore(as: LogStore.self)
            archivePath = nil
            seedModels = 0
        case .archive(let seedModels):
            precondition(layer != .store, "the store-layer workload is LogStore only")
            let path = directory + "/trips.json"
            container = try ModelContainer(for: tripModels, configuration: ArchiveStoreConfiguration(path: path))
            logStore = nil
            archivePath = path
            self.seedModels = seedModels
            if seedModels > 0 {
                let seeding = ModelContext(container)
                for index in 0..<seedModels { seeding.insert(Trip(TripValues(index: index))) }
                try seeding.save()
            }
        }
        slots = (0..<threads).map { _ in Slot() }
        if layer == .longLivedContext {
            for slot in slots { slot.context = ModelContext(container) }
        }
        registeredBefore = registeredModels
        for (number, slot) in slots.enumerated() where registeredModels > 0 {
            let context = try slot.context.unwrap(or: "registeredModels needs a long-lived context")
            for start in stride(from: 0, to: registeredModels, by: 1_000) {
                for index in start..<min(registeredModels, start + 1_000) {
                    context.insert(Trip(TripValues(index: 1_000_000_000 + number * 10_000_000 + index)))
                }
                try context.save()
            }
        }
    }

    /// Trips each long-lived context held (saved and registered) before the measurement.
    let registeredBefore: Int

    public func perform(thread: Int, index: Int) throws {
        let slot = slots[thread]
        let first = seedModels + index * insertsPerSave
        switch layer {
        case .longLivedContext, .contextPerSave:
            let context = slot.context ?? ModelContext(container)
            for offset in 0..<insertsPerSave { context.insert(Trip(TripValues(index: first + offset))) }
            try context.save()
        case .store:
            var request = DataStoreSaveChangesRequest<DefaultSnapshot>()
            request.inserted.reserveCapacity(insertsPerSave)
            for offset in 0..<insertsPerSave {
                request.inserted.append(
                    DefaultSnapshot(
                        persistentIdentifier: .temporary(entityName: Trip.entityName),
                        values: TripValues(index: first + offset).attributeValues))
            }
            _ = try logStore!.save(request)
        }
        slot.saves += 1
    }

    var saveCount: Int { slots.reduce(0) { $0 + $1.saves } }

    public var counters: [String: Double] {
        let saves = Double(saveCount)
        var counters = ["saves": saves, "changes": saves * Double(insertsPerSave)]
        if let logStore {
            let statistics = logStore.logStatistics
            counters["records"] = Double(statistics.appendCount)
            counters["fdatasyncs"] = Double(statistics.syncCount)
            counters["rolls"] = Double(statistics.rollCount)
            counters["logBytes"] = Double(logStore.logEndOffset)
            counters["payloadBytes"] = Double(statistics.payloadByteCount)
            counters["storedPayloadBytes"] = Double(statistics.storedPayloadByteCount)
        }
        return counters
    }

    public var facts: [String: String] {
        var facts = [
            "layer": layer.label,
            "insertsPerSave": String(insertsPerSave),
            "threads": String(slots.count),
            "registeredBefore": String(registeredBefore),
            "savesAtEnd": String(saveCount),
        ]
        if layer == .longLivedContext {
            // Each saved Trip stays registered in the context that saved it.
            facts["registeredPerContextAtEnd"] = String(saveCount * insertsPerSave / max(1, slots.count))
        }
        switch kind {
        case .logStore(let durability):
            facts["store"] = "LogStore"
            facts["durability"] = "\(durability)"
            facts["processIdentifierBytes"] = String(LogStore.processIdentifier.utf8.count)
        case .archive:
            facts["store"] = "ArchiveStore"
            facts["modelsAtStart"] = String(seedModels)
            facts["modelsAtEnd"] = String(seedModels + saveCount * insertsPerSave)
            if let archivePath,
                let size = (try? FileManager.default.attributesOfItem(atPath: archivePath))?[.size] as? Int
            {
                facts["archiveBytesAtEnd"] = String(size)
            }
        }
        return facts
    }

    public func close() throws {
        for slot in slots { slot.context = nil }
        try logStore?.close()
    }
}

extension Optional {
    /// The value, or a ``HarnessError`` saying why it is missing.
    func unwrap(or reason: String) throws -> Wrapped {
        guard let self else { throw HarnessError(reason) }
        return self
    }
}
