import Foundation
import Synchronization

/// A persisted property's value in a `@Model` class: the macro's peer `_name` field, typed, so
/// reading a property costs a field load (no dictionary, no existential, no dynamic cast —
/// measured on the P3-ctx benchmark, where each save makes a model, sets each property once and
/// reads each back to encode it). Empty in an instance that a fetch made with `init()` and has not
/// filled yet, or whose row lacks the attribute.
public struct _PersistedSlot<Value> {
    public var value: Value?

    /// An empty slot (`init()` of a `@Model` class, before a fetch fills it).
    @inlinable public init() { value = nil }

    /// A slot holding the property's initial value.
    @inlinable public init(_ value: Value) { self.value = value }
}

extension _PersistedSlot: Sendable where Value: Sendable {}

/// Whether a slot holds a value, without knowing its type (``ModelState/_propertiesWithValues(of:)``).
protocol _AnyPersistedSlot {
    var hasValue: Bool { get }
}

extension _PersistedSlot: _AnyPersistedSlot {
    var hasValue: Bool { value != nil }
}

/// Told by a model's ``ModelState`` when a tracked property changes (the context the model is
/// registered in): the Model layer does not know `ModelContext`.
protocol ModelChangeObserver: AnyObject {
    func modelDidChange(_ model: any PersistentModel)
}

/// Lets `_missingValue(at:of:)` answer `nil` for an optional property that has no stored value yet.
protocol _OptionalValue {
    static var nilValue: Self { get }
}

extension Optional: _OptionalValue {
    static var nilValue: Optional<Wrapped> { nil }
}

extension ModelState {
    // `@Model` classes keep each persisted property's value in a typed slot (`_PersistedSlot`);
    // the property is a computed property over it, and the macro's accessors call the methods
    // below. Like SwiftData's backing data, an empty slot lets a fetch make an instance with
    // `init()` and fill it afterwards.

    /// The value of a property whose slot is empty: the value a fetch is writing through the
    /// property's key path (a key-path write reads the property first, then sets it), else `nil`
    /// for an optional property. A required property without a value (saved before the attribute
    /// existed) is a programmer error.
    public func _missingValue<Value>(at name: String, of entityName: @autoclosure () -> String) -> Value {
        if let seed = seedValue, seed.name == name, let value = seed.value as? Value { return value }
        if let optional = Value.self as? any _OptionalValue.Type { return optional.nilValue as! Value }
        if let unbackedReason {
            preconditionFailure(
                "\(entityName()).\(name) has no value: model(for: \(storedIdentifier.map { "\($0)" } ?? "?")) "
                    + "made a model with none — \(unbackedReason). registeredModel(for:) or a fetch can answer "
                    + "\"none\".")
        }
        preconditionFailure("\(entityName()).\(name) has no value: it was not set by the initializer and not "
            + "stored (a required attribute added after the model was saved needs a default value).")
    }

    /// After a property was set (its slot holds `new`): records the change for the next save,
    /// tells the context, and keeps the inverse of a relationship in step.
    public func _didSet<Model: PersistentModel, Value>(at name: String, on model: Model, old: Value?, new: Value) {
        guard !isFilling else { return }
        changedNames.insert(name)
        Model.relationshipInverses.maintain(name, of: model, old: old, new: new)
        (context as? ModelChangeObserver)?.modelDidChange(model)
    }

    /// Runs `write` (a fetch writing `value` through the property's key path) with `value` as
    /// what an empty slot reads: the key-path write reads the property before it sets it.
    func seeding<Value>(_ value: Value, at name: String, _ write: () throws -> Void) rethrows {
        let outer = seedValue
        seedValue = (name, value)
        defer { seedValue = outer }
        try write()
    }

    /// The names of the persisted properties whose slots hold a value in `model` (a blank
    /// instance: those with an initial value). Read by reflection, once per type — by
    /// `Mirror(reflecting:)`, so a `@Model` class with its own `customMirror` that hides the
    /// `_name` slots reads as having none (its predicates then treat a row without an attribute
    /// as `nil` instead of the initial value).
    static func _propertiesWithValues<Model: PersistentModel>(of model: Model) -> Set<String> {
        if let names = PropertiesWithValuesCache.names.withLock({ $0[ObjectIdentifier(Model.self)] }) { return names }
        var names: Set<String> = []
        for child in Mirror(reflecting: model).children {
            guard let label = child.label, label.hasPrefix("_"), let slot = child.value as? any _AnyPersistedSlot,
                slot.hasValue
            else { continue }
            names.insert(String(label.dropFirst()))
        }
        PropertiesWithValuesCache.names.withLock { $0[ObjectIdentifier(Model.self)] = names }
        return names
    }

    /// Runs `body` (a fetch filling the model) without recording changes or maintaining inverses:
    /// the values come from the store, which keeps both sides already.
    func filling<T>(_ body: () throws -> T) rethrows -> T {
        let wasFilling = isFilling
        isFilling = true
        defer { isFilling = wasFilling }
        return try body()
    }
}

/// ``ModelState/_propertiesWithValues(of:)`` per model type.
private enum PropertiesWithValuesCache {
    static let names = Mutex<[ObjectIdentifier: Set<String>]>([:])
}
