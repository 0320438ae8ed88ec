import Foundation

/// A stored property's placeholder in a `@Model` class: the value lives in the model's
/// ``ModelState``; this field only lets the compiler check that every initializer sets the
/// property (its init accessor initializes it).
public struct _PersistedSlot: Sendable {
    public init() {}
}

/// Told by a model's ``ModelState`` when a tracked property changes (the context the model is
/// registered in): the Model layer does not know `ModelContext`.
protocol ModelChangeObserver: AnyObject {
    func modelDidChange(_ model: any PersistentModel)
}

/// Lets `_value(at:)` answer `nil` for an optional property that has no stored value yet.
protocol _OptionalValue {
    static var nilValue: Self { get }
}

extension Optional: _OptionalValue {
    static var nilValue: Optional<Wrapped> { nil }
}

/// A model's property values by name. A model has a handful of properties and their names are
/// short literals, so a linear search comparing names (a small string compares as two words) costs
/// less than hashing each name into a dictionary — measured on the P3-ctx benchmark, where every
/// save makes a model, sets each property once and reads each back to encode it.
struct PropertyValues {
    private var entries: [(name: String, value: Any)] = []

    subscript(name: String) -> Any? {
        get {
            for entry in entries where entry.name == name { return entry.value }
            return nil
        }
        set {
            if let index = entries.firstIndex(where: { $0.name == name }) {
                if let newValue { entries[index].value = newValue } else { entries.remove(at: index) }
            } else if let newValue {
                if entries.isEmpty { entries.reserveCapacity(8) }
                entries.append((name, newValue))
            }
        }
    }
}

extension ModelState {
    // The storage of `@Model` classes: their persisted properties are computed properties over
    // these values (the macro's accessors call the methods below). Like SwiftData's backing data,
    // it lets a fetch make an empty instance with `init()` and fill it afterwards.

    /// Called by a property's init accessor: the initial value, not a change.
    public func _initialize<Value>(_ value: Value, at name: String) {
        values[name] = value
        isTracked = true
    }

    /// The property's value. A property without a value (saved before the attribute existed)
    /// reads as `nil` when optional; otherwise that is a programmer error.
    public func _value<Value>(at name: String, of entityName: @autoclosure () -> String) -> Value {
        if let value = values[name] { return value as! Value }
        if let optional = Value.self as? any _OptionalValue.Type { return optional.nilValue as! Value }
        preconditionFailure("\(entityName()).\(name) has no value: it was not set by the initializer and not "
            + "stored (a required attribute added after the model was saved needs a default value).")
    }

    /// Sets the property: records the change for the next save, tells the context, and keeps the
    /// inverse of a relationship in step.
    public func _set<Model: PersistentModel, Value>(
        _ value: Value, at name: String, on model: Model, keyPath: ReferenceWritableKeyPath<Model, Value>
    ) {
        let old = values[name]
        values[name] = value
        isTracked = true
        guard !isFilling else { return }
        changedNames.insert(name)
        Model.relationshipInverses.maintain(name, of: model, old: old, new: value)
        (context as? ModelChangeObserver)?.modelDidChange(model)
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
