import Synchronization

/// Values by attribute name: a stored row's (``RowValues``) or a snapshot's dictionary.
protocol AttributeValuesByName {
    subscript(name: String) -> AttributeValue? { get }
}

extension Dictionary: AttributeValuesByName where Key == String, Value == AttributeValue {}

/// The attribute names of rows stored positionally, in position order: one layout is shared by the
/// rows of an entity, so a row keeps only its values (``RowValues``).
///
/// Immutable; a row given a value under a name its layout lacks moves to ``extended(with:)``, a
/// layout with that name appended, which is made once per layout and name and then shared (a
/// migration renaming an attribute of a million rows makes one new layout, not a million).
final class RowLayout: Sendable {
    /// The names, in position order.
    let names: [String]
    private let positions: [String: Int]
    private let extensions = Mutex<[String: RowLayout]>([:])

    /// A layout of these names, in this order. Names must be distinct.
    init(names: [String]) {
        var positions: [String: Int] = [:]
        positions.reserveCapacity(names.count)
        for (position, name) in names.enumerated() {
            let previous = positions.updateValue(position, forKey: name)
            precondition(previous == nil, "a row layout names \(name) twice")
        }
        self.names = names
        self.positions = positions
    }

    /// The layout of no names (a deleted row's hole; a row about to be filled).
    static let empty = RowLayout(names: [])

    var count: Int { names.count }

    /// The position of `name`, or `nil` when the layout lacks it.
    @inline(__always)
    func position(of name: String) -> Int? { positions[name] }

    /// This layout with `name` appended: the same object for the same name every time — except
    /// from the empty layout, which is shared by every new state and caches nothing (a layout made
    /// from it belongs to the row, or the entity, that asked).
    func extended(with name: String) -> RowLayout {
        assert(positions[name] == nil, "\(name) is already in the layout")
        if names.isEmpty { return RowLayout(names: [name]) }
        return extensions.withLock { extensions in
            if let known = extensions[name] { return known }
            let layout = RowLayout(names: names + [name])
            extensions[name] = layout
            return layout
        }
    }
}

/// A row's layout and its slots in one allocation: the layout in the header, a slot per name of
/// it after (`nil` where a name has no value). Immutable once shared: ``RowValues`` copies it
/// before changing it unless it holds the only reference.
final class RowSlots: ManagedBuffer<RowLayout, AttributeValue?> {
    /// Slots for `layout`, every one empty.
    static func make(_ layout: RowLayout) -> RowSlots {
        let slots = unsafeDowncast(create(minimumCapacity: layout.count) { _ in layout }, to: RowSlots.self)
        slots.withUnsafeMutablePointerToElements { $0.initialize(repeating: nil, count: layout.count) }
        return slots
    }

    /// The rows of no names share one (a hole, a row about to be filled: no allocation each).
    /// (Never changed: a RowValues holding it never holds the only reference.)
    nonisolated(unsafe) static let empty = make(.empty)

    /// Slots for `layout`, the first `count` copied from `source`'s (a layout extended from
    /// its) and the rest empty; `source` keeps its own.
    static func make(_ layout: RowLayout, copying count: Int, of source: RowSlots) -> RowSlots {
        precondition(count <= layout.count && count <= source.layout.count, "copying \(count) slots too many")
        let slots = unsafeDowncast(create(minimumCapacity: layout.count) { _ in layout }, to: RowSlots.self)
        slots.withUnsafeMutablePointerToElements { target in
            source.withUnsafeMutablePointerToElements { target.initialize(from: $0, count: count) }
            (target + count).initialize(repeating: nil, count: layout.count - count)
        }
        return slots
    }

    /// The layout, read through a pointer: `header`, a class's stored property, is checked for
    /// exclusive access on every read (a tenth of a predicate's scan, `findTrips` profile).
    var layout: RowLayout {
        @inline(__always) get { withUnsafeMutablePointerToHeader { $0.pointee } }
    }

    deinit {
        _ = withUnsafeMutablePointers { layout, slots in slots.deinitialize(count: layout.pointee.count) }
    }
}

/// A stored model's values by attribute name, kept by position in a shared ``RowLayout``: one
/// allocation (``RowSlots``) holding the layout and a slot per name.
///
/// It reads like the `[String: AttributeValue]` it replaces — a subscript by name, a sequence of
/// (name, value) pairs, `count` of the names that have a value, equality and hashing that ignore
/// the layout — at a fraction of the memory: a dictionary of a Trip's six values took 410 bytes
/// (keys, values and a hash table per row), an array of slots and a layout reference 192 and 16,
/// one allocation 176 and 8 (docs/DECISIONS.md D9).
struct RowValues: @unchecked Sendable, Hashable, Sequence, AttributeValuesByName, ExpressibleByDictionaryLiteral {
    // @unchecked: the slots are changed only through a RowValues holding the only reference to
    // them (copied first otherwise), so values shared between threads are never changed.
    private var storage: RowSlots

    var layout: RowLayout { storage.layout }

    /// No values, in `layout` (every slot empty).
    init(layout: RowLayout = .empty) {
        storage = layout === RowLayout.empty ? RowSlots.empty : RowSlots.make(layout)
    }

    /// The values of `pairs` (a later value of one name wins), in `layout` or a layout extended
    /// from it by the names it lacks.
    init<Pairs: Sequence<(key: String, value: AttributeValue)>>(_ pairs: Pairs, layout: RowLayout) {
        self.init(layout: layout)
        assign(pairs)
    }

    /// The value in slot `position`.
    @inline(__always)
    private func slot(_ position: Int) -> AttributeValue? {
        assert(position < storage.layout.count, "slot \(position) of \(storage.layout.count)")
        return storage.withUnsafeMutablePointerToElements { $0[position] }
    }

    /// Sets slot `position`, copying the slots first when they are shared.
    @inline(__always)
    private mutating func setSlot(_ position: Int, _ value: AttributeValue?) {
        assert(position < storage.layout.count, "slot \(position) of \(storage.layout.count)")
        if !isKnownUniquelyReferenced(&storage) {
            storage = RowSlots.make(storage.layout, copying: storage.layout.count, of: storage)
        }
        storage.withUnsafeMutablePointerToElements { $0[position] = value }
    }

    /// Moves the row to its layout extended by `name`, holding `value` there.
    private mutating func append(_ name: String, _ value: AttributeValue) {
        let extended = storage.layout.extended(with: name)
        let count = storage.layout.count
        storage = RowSlots.make(extended, copying: count, of: storage)
        storage.withUnsafeMutablePointerToElements { $0[count] = value }
        assert(extended.count == count + 1, "a layout extended by one name has \(extended.count) names after \(count)")
    }

    /// Sets the values of `pairs` (a later value of one name wins). Names the layout lacks extend
    /// it in name order, whatever order `pairs` has (a dictionary's differs from one dictionary to
    /// the next): rows needing the same names reach the same layout, and the cached extensions
    /// stay bounded by the orders of names, not the orders of dictionaries (found by review).
    mutating func assign<Pairs: Sequence<(key: String, value: AttributeValue)>>(_ pairs: Pairs) {
        var missing: [String: AttributeValue] = [:]
        for (name, value) in pairs {
            if let position = layout.position(of: name) {
                setSlot(position, value)
            } else {
                missing[name] = value
            }
        }
        guard !missing.isEmpty else { return }
        for name in missing.keys.sorted() { append(name, missing[name]!) }
    }

    /// These values in a layout of their names (tests and one-off rows).
    init(dictionaryLiteral elements: (String, AttributeValue)...) {
        self.init(elements.lazy.map { (key: $0.0, value: $0.1) }, layout: .empty)
    }

    /// The value stored under `name`, or `nil`. Setting `nil` removes it.
    subscript(name: String) -> AttributeValue? {
        get {
            guard let position = layout.position(of: name) else { return nil }
            return slot(position)
        }
        set {
            if let position = layout.position(of: name) {
                setSlot(position, newValue)
            } else if let newValue {
                append(name, newValue)
            }
        }
    }

    /// Sets the value at `position` of `layout`, which must be this row's, returning the value it
    /// replaces (a decoder that knows each value's position: no name looked up).
    @discardableResult
    mutating func updateValue(_ value: AttributeValue, at position: Int, in layout: RowLayout) -> AttributeValue? {
        precondition(layout === self.layout && position < layout.count, "slot \(position) of another layout")
        let previous = slot(position)
        setSlot(position, value)
        return previous
    }

    /// Sets the value of `name`, returning the value it replaces.
    @discardableResult
    mutating func updateValue(_ value: AttributeValue, forKey name: String) -> AttributeValue? {
        let previous = self[name]
        self[name] = value
        return previous
    }

    /// These values with `changes` applied (a change's value replaces the stored one).
    func merging(_ changes: [String: AttributeValue]) -> RowValues {
        var merged = self
        merged.assign(changes)
        return merged
    }

    /// Where one name was in the last layout a reader saw.
    struct PositionCache {
        fileprivate var layout: RowLayout?
        fileprivate var position: Int?
    }

    /// The value of `name`, looked up in the layout only when the layout differs from the one
    /// `cache` saw last (a predicate's scan reads the same names from rows sharing one layout).
    @inline(__always)
    func value(of name: String, cache: inout PositionCache) -> AttributeValue? {
        if cache.layout !== layout {
            cache.layout = layout
            cache.position = layout.position(of: name)
        }
        guard let position = cache.position else { return nil }
        return slot(position)
    }

    /// Removes the value of `name`, returning it.
    @discardableResult
    mutating func removeValue(forKey name: String) -> AttributeValue? {
        guard let position = layout.position(of: name) else { return nil }
        defer { setSlot(position, nil) }
        return slot(position)
    }

    /// The number of names with a value.
    var count: Int { (0..<layout.count).reduce(0) { $0 + (slot($1) == nil ? 0 : 1) } }

    var isEmpty: Bool { !(0..<layout.count).contains { slot($0) != nil } }

    /// The values as a dictionary (what snapshots and history hand to users).
    var dictionary: [String: AttributeValue] {
        var dictionary: [String: AttributeValue] = [:]
        dictionary.reserveCapacity(count)
        for (name, value) in self { dictionary[name] = value }
        return dictionary
    }

    /// The values, without names (for scans that need no names: references).
    var storedValues: some Sequence<AttributeValue> { (0..<layout.count).lazy.compactMap { slot($0) } }

    struct Iterator: IteratorProtocol {
        fileprivate let values: RowValues
        fileprivate let names: [String]
        fileprivate var position = 0

        mutating func next() -> (key: String, value: AttributeValue)? {
            while position < names.count {
                defer { position += 1 }
                if let value = values.slot(position) { return (names[position], value) }
            }
            return nil
        }
    }

    /// The (name, value) pairs of the names with a value, in layout order.
    func makeIterator() -> Iterator { Iterator(values: self, names: layout.names) }

    var underestimatedCount: Int { 0 }

    /// Equal when the same names have the same values, whatever the layouts.
    static func == (left: RowValues, right: RowValues) -> Bool {
        if left.storage === right.storage { return true }
        if left.layout === right.layout {
            return (0..<left.layout.count).allSatisfy { left.slot($0) == right.slot($0) }
        }
        guard left.count == right.count else { return false }
        for (name, value) in left where right[name] != value { return false }
        return true
    }

    /// Hashes the (name, value) pairs in no particular order (as a dictionary does), so equal
    /// values in different layouts hash alike.
    func hash(into hasher: inout Hasher) {
        var combined = 0
        var count = 0
        for (name, value) in self {
            var pair = Hasher()
            pair.combine(name)
            pair.combine(value)
            combined ^= pair.finalize()
            count += 1
        }
        hasher.combine(count)
        hasher.combine(combined)
    }
}
