import Foundation
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
    /// The shapes of this layout's rows (``shape(kinds:)``), held weakly: a shape holds its
    /// layout, and is let go with the last row of it.
    private let shapes = Mutex(ShapeCache())

    private struct ShapeCache {
        struct Entry { weak var shape: RowShape? }
        /// The shape found last (rows made one after another mostly share one).
        weak var last: RowShape?
        /// Shapes by a hash of their kinds.
        var byHash: [Int: [Entry]] = [:]
        var count = 0
        /// Entries left after the last purge of entries whose shape is gone.
        var liveAfterPurge = 0
        /// Entries are purged once there are this many, or twice as many as the last purge left
        /// (rows whose optional values are set in ever new combinations): the cache stays within
        /// twice the shapes rows hold, and a purge costs O(1) a shape made, spread out.
        static let purgeAt = 1_024
    }

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

    /// The shape of rows of this layout whose values are of `kinds` (one per position): the same
    /// object for the same kinds while a row of it lives.
    func shape(kinds: UnsafeBufferPointer<UInt8>) -> RowShape {
        shapes.withLock { cache in
            if let last = cache.last, last.hasKinds(kinds) { return last }
            var hasher = Hasher()
            hasher.combine(bytes: UnsafeRawBufferPointer(kinds))
            let hash = hasher.finalize()
            if let found = cache.byHash[hash]?.lazy.compactMap(\.shape).first(where: { $0.hasKinds(kinds) }) {
                cache.last = found
                return found
            }
            let shape = RowShape(layout: self, kinds: kinds)
            if cache.count >= max(ShapeCache.purgeAt, 2 * cache.liveAfterPurge) {
                // Let go of the entries of shapes no row holds any more.
                cache.byHash = cache.byHash.compactMapValues { entries in
                    let live = entries.filter { $0.shape != nil }
                    return live.isEmpty ? nil : live
                }
                cache.count = cache.byHash.values.reduce(0) { $0 + $1.count }
                cache.liveAfterPurge = cache.count
            }
            cache.byHash[hash, default: []].append(ShapeCache.Entry(shape: shape))
            cache.count += 1
            cache.last = shape
            return shape
        }
    }

    /// The layout of no names (a hole, ``RowValues/hole``; a row about to be filled).
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

/// How one slot of a row is packed (``RowSlots``): a kind byte, kept in the row's shape
/// (``RowShape``), and a payload of 0, 8, 16 or 24 bytes in the row. The values every model has
/// — a Trip's strings, dates, `nil`s and empty arrays — take only their own bytes; the rest
/// (data, references, non-empty arrays) keep the whole ``AttributeValue``.
enum PackedKind: UInt8 {
    /// No value under the name (the slot of an `AttributeValue?` that is `nil`).
    case absent = 0
    case null, boolFalse, boolTrue, emptyArray
    case int, double, date
    case string, uuid
    /// Any other value, kept whole.
    case other

    /// Payload sizes in 8-byte words, two bits per kind: 1 for int, double and date; 2 for string
    /// and uuid; 3 for other (``AttributeValue``'s 24-byte stride); 0 for the rest.
    private static let wordTable: UInt32 = 1 << 10 | 1 << 12 | 1 << 14 | 2 << 16 | 2 << 18 | 3 << 20

    /// The payload's size in 8-byte words of a kind byte read from a row.
    @inline(__always)
    static func payloadWords(_ raw: UInt8) -> Int { Int(truncatingIfNeeded: wordTable >> (UInt32(raw) &* 2)) & 3 }

    @inline(__always)
    static func of(_ value: AttributeValue?) -> PackedKind {
        guard let value else { return .absent }
        switch value {
        case .null: return .null
        case .bool(let bool): return bool ? .boolTrue : .boolFalse
        case .int: return .int
        case .double: return .double
        case .date: return .date
        case .string: return .string
        case .uuid: return .uuid
        case .array(let elements) where elements.isEmpty: return .emptyArray
        case .array, .data, .reference: return .other
        }
    }
}

/// The kinds of a row's values and where each one's payload starts (``RowSlots``): one object for
/// the rows of a layout whose values are of the same kinds — most rows of an entity — so a row
/// holds only its payloads. Made and shared by ``RowLayout/shape(kinds:)``.
final class RowShape: @unchecked Sendable {
    // @unchecked: immutable once made; `entries` is allocated in init and freed in deinit.
    let layout: RowLayout
    /// Per position of the layout, the byte offset of its payload in a row's elements shifted
    /// left by 8, or'd with its kind (``PackedKind``): what a read needs in one load, without an
    /// array's bounds check (a position without a payload has the offset where the next one
    /// would start).
    let entries: UnsafeMutablePointer<UInt32>
    /// The number of positions (the layout's names).
    let count: Int
    /// The payloads' size in 8-byte words.
    let payloadWords: Int

    fileprivate init(layout: RowLayout, kinds: UnsafeBufferPointer<UInt8>) {
        precondition(kinds.count == layout.count, "\(kinds.count) kinds for a layout of \(layout.count)")
        precondition(
            MemoryLayout<AttributeValue>.stride == 24 && MemoryLayout<String>.stride == 16
                && MemoryLayout<UUID>.stride == 16, "PackedKind's payload sizes do not fit this platform")
        entries = .allocate(capacity: max(kinds.count, 1))
        var offset = 0
        for (position, kind) in kinds.enumerated() {
            precondition(offset < 1 << 24, "a row of \(offset) bytes")
            entries[position] = UInt32(offset) << 8 | UInt32(kind)
            offset += PackedKind.payloadWords(kind) * 8
        }
        self.layout = layout
        count = kinds.count
        payloadWords = offset / 8
    }

    deinit { entries.deallocate() }

    /// The kind of `position`.
    @inline(__always)
    func kind(at position: Int) -> UInt8 { Self.kind(entries[position]) }

    /// The kind in an entry.
    @inline(__always)
    static func kind(_ entry: UInt32) -> UInt8 { UInt8(truncatingIfNeeded: entry) }

    /// The payload's byte offset in an entry.
    @inline(__always)
    static func offset(_ entry: UInt32) -> Int { Int(entry >> 8) }

    func hasKinds(_ other: UnsafeBufferPointer<UInt8>) -> Bool {
        other.count == count && other.indices.allSatisfy { other[$0] == kind(at: $0) }
    }
}

/// A row's values in one allocation: its ``RowShape`` (layout, kinds, payload offsets) in the
/// header, then each value's payload in position order (docs/DECISIONS.md D9) — a Trip's six
/// values take 48 bytes where six `AttributeValue?` slots took 144. Immutable once shared:
/// ``RowValues`` copies it before changing it unless it holds the only reference.
///
/// The header holds the shape unmanaged — retained when the row is made or moves to another
/// shape, released by `deinit` — so that reading a value borrows it: a strong reference read
/// out of the header would retain and release the one shape a million rows share (and that
/// every reading thread shares) at every read.
final class RowSlots: ManagedBuffer<Unmanaged<RowShape>, UInt64> {
    /// Slots for `layout` holding `values` (one per position, `nil` for none).
    static func make(_ layout: RowLayout, values: UnsafeBufferPointer<AttributeValue?>) -> RowSlots {
        precondition(values.count == layout.count, "\(values.count) values for a layout of \(layout.count)")
        let shape = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: layout.count) { kinds in
            for (position, value) in values.enumerated() { kinds[position] = PackedKind.of(value).rawValue }
            return layout.shape(kinds: UnsafeBufferPointer(kinds))
        }
        let slots = unsafeDowncast(
            create(minimumCapacity: shape.payloadWords) { _ in Unmanaged.passRetained(shape) }, to: RowSlots.self)
        slots.withUnsafeMutablePointerToElements { elements in
            let raw = UnsafeMutableRawPointer(elements)
            for (position, value) in values.enumerated() {
                let entry = shape.entries[position]
                let kind = RowShape.kind(entry)
                guard let value, kind >= PackedKind.int.rawValue else { continue }
                store(value, PackedKind(rawValue: kind)!, at: raw + RowShape.offset(entry))
            }
        }
        return slots
    }

    /// Slots for `layout`, every one empty.
    static func make(_ layout: RowLayout) -> RowSlots {
        withUnsafeTemporaryAllocation(of: AttributeValue?.self, capacity: layout.count) { values in
            values.initialize(repeating: nil)
            defer { values.deinitialize() }
            return make(layout, values: UnsafeBufferPointer(values))
        }
    }

    /// The rows of no names share one (a row about to be filled, a model of no values: no
    /// allocation each; a removed row's hole is ``hole``).
    /// (Never changed: a RowValues holding it never holds the only reference.)
    nonisolated(unsafe) static let empty = make(.empty)

    /// A removed row's slot in its entity's rows (``EntityRows``): told from a live row of no
    /// values (``empty``) by identity, where a flag per row took a byte.
    nonisolated(unsafe) static let hole = make(.empty)

    /// Slots for `layout` holding this row's first `count` values (the rest of the layout empty)
    /// as `change` leaves them, packed once; this row keeps its own.
    func remade(
        in layout: RowLayout, copying count: Int, _ change: (UnsafeMutableBufferPointer<AttributeValue?>) -> Void
    ) -> RowSlots {
        precondition(count <= layout.count && count <= self.layout.count, "copying \(count) slots too many")
        return withUnsafeTemporaryAllocation(of: AttributeValue?.self, capacity: layout.count) { values in
            for position in 0..<count { (values.baseAddress! + position).initialize(to: self[position]) }
            (values.baseAddress! + count).initialize(repeating: nil, count: layout.count - count)
            defer { values.deinitialize() }
            change(values)
            return RowSlots.make(layout, values: UnsafeBufferPointer(values))
        }
    }

    /// `body` with the shape, borrowed (no retain), read through a pointer: `header`, a class's
    /// stored property, is checked for exclusive access on every read (a tenth of a predicate's
    /// scan, `findTrips` profile).
    @inline(__always)
    func withShape<Result>(_ body: (RowShape) -> Result) -> Result {
        withUnsafeMutablePointerToHeader { $0.pointee._withUnsafeGuaranteedRef(body) }
    }

    var shape: RowShape { withShape { $0 } }

    var layout: RowLayout {
        @inline(__always) get { withShape { $0.layout } }
    }

    /// Whether `value` can replace slot `position`'s in place: its payload has the same size.
    @inline(__always)
    func fits(_ value: AttributeValue?, at position: Int) -> Bool {
        let stored = withShape { $0.kind(at: position) }
        return PackedKind.payloadWords(stored) == PackedKind.payloadWords(PackedKind.of(value).rawValue)
    }

    /// The value in slot `position` (`nil`: none).
    @inline(__always)
    subscript(position: Int) -> AttributeValue? {
        withUnsafeMutablePointers { header, elements in
            header.pointee._withUnsafeGuaranteedRef { shape in
                Self.value(shape.entries[position], in: UnsafeMutableRawPointer(elements))
            }
        }
    }

    /// The value an entry of this row's shape describes.
    @inline(__always)
    static func value(_ entry: UInt32, in elements: UnsafeMutableRawPointer) -> AttributeValue? {
        let kind = RowShape.kind(entry)
        guard kind >= PackedKind.int.rawValue else { return payloadless(kind) }
        return load(kind, at: elements + RowShape.offset(entry))
    }

    /// `body` with the shape (borrowed) and the elements.
    @inline(__always)
    func withShapeAndElements<Result>(_ body: (RowShape, UnsafeMutableRawPointer) -> Result) -> Result {
        withUnsafeMutablePointers { header, elements in
            header.pointee._withUnsafeGuaranteedRef { body($0, UnsafeMutableRawPointer(elements)) }
        }
    }

    /// Calls `body` with each slot's value in position order.
    @inline(__always)
    func forEachSlot(_ body: (Int, AttributeValue?) throws -> Void) rethrows {
        try withUnsafeMutablePointers { header, elements in
            try header.pointee._withUnsafeGuaranteedRef { shape in
                let raw = UnsafeMutableRawPointer(elements)
                for position in 0..<shape.count { try body(position, Self.value(shape.entries[position], in: raw)) }
            }
        }
    }

    /// Replaces slot `position`'s value by one whose payload has the same size, in place (the
    /// caller holds the only reference); a value of another kind takes the shape of its kinds.
    func replace(_ position: Int, with value: AttributeValue?) {
        let shape = shape  // held (retained) while the header may move to another shape
        let old = shape.kind(at: position)
        let new = PackedKind.of(value)
        precondition(PackedKind.payloadWords(old) == PackedKind.payloadWords(new.rawValue), "a payload of another size")
        withUnsafeMutablePointers { header, elements in
            let payload = UnsafeMutableRawPointer(elements) + RowShape.offset(shape.entries[position])
            Self.deinitialize(old, at: payload)
            if let value, new.rawValue >= PackedKind.int.rawValue { Self.store(value, new, at: payload) }
            if new.rawValue != old {
                let moved = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: shape.count) { kinds in
                    for index in kinds.indices { kinds[index] = shape.kind(at: index) }
                    kinds[position] = new.rawValue
                    return shape.layout.shape(kinds: UnsafeBufferPointer(kinds))
                }
                header.pointee = Unmanaged.passRetained(moved)
                Unmanaged.passUnretained(shape).release()
            }
        }
    }

    @inline(__always)
    private static func payloadless(_ kind: UInt8) -> AttributeValue? {
        switch kind {
        case PackedKind.null.rawValue: .null
        case PackedKind.boolFalse.rawValue: .bool(false)
        case PackedKind.boolTrue.rawValue: .bool(true)
        case PackedKind.emptyArray.rawValue: .array([])
        default: nil
        }
    }

    @inline(__always)
    private static func load(_ kind: UInt8, at payload: UnsafeMutableRawPointer) -> AttributeValue {
        switch kind {
        case PackedKind.int.rawValue: .int(payload.load(as: Int64.self))
        case PackedKind.double.rawValue: .double(payload.load(as: Double.self))
        case PackedKind.date.rawValue: .date(Date(timeIntervalSinceReferenceDate: payload.load(as: Double.self)))
        case PackedKind.string.rawValue: .string(payload.assumingMemoryBound(to: String.self).pointee)
        case PackedKind.uuid.rawValue: .uuid(payload.load(as: UUID.self))
        default: payload.assumingMemoryBound(to: AttributeValue.self).pointee
        }
    }

    private static func store(_ value: AttributeValue, _ kind: PackedKind, at payload: UnsafeMutableRawPointer) {
        switch (kind, value) {
        case (.int, .int(let int)): payload.storeBytes(of: int, as: Int64.self)
        case (.double, .double(let double)): payload.storeBytes(of: double, as: Double.self)
        case (.date, .date(let date)): payload.storeBytes(of: date.timeIntervalSinceReferenceDate, as: Double.self)
        case (.string, .string(let string)): payload.initializeMemory(as: String.self, repeating: string, count: 1)
        case (.uuid, .uuid(let uuid)): payload.storeBytes(of: uuid, as: UUID.self)
        case (.other, _): payload.initializeMemory(as: AttributeValue.self, repeating: value, count: 1)
        default: preconditionFailure("\(value) packed as kind \(kind)")
        }
    }

    private static func deinitialize(_ kind: UInt8, at payload: UnsafeMutableRawPointer) {
        switch kind {
        case PackedKind.string.rawValue: payload.assumingMemoryBound(to: String.self).deinitialize(count: 1)
        case PackedKind.other.rawValue: payload.assumingMemoryBound(to: AttributeValue.self).deinitialize(count: 1)
        default: break
        }
    }

    deinit {
        withUnsafeMutablePointers { header, elements in
            let raw = UnsafeMutableRawPointer(elements)
            header.pointee._withUnsafeGuaranteedRef { shape in
                for position in 0..<shape.count {
                    let entry = shape.entries[position]
                    Self.deinitialize(RowShape.kind(entry), at: raw + RowShape.offset(entry))
                }
            }
            header.pointee.release()
        }
    }
}

/// A stored model's values by attribute name, kept by position in a shared ``RowLayout``: one
/// allocation (``RowSlots``) holding the layout and a slot per name.
///
/// It reads like the `[String: AttributeValue]` it replaces — a subscript by name, a sequence of
/// (name, value) pairs, `count` of the names that have a value, equality and hashing that ignore
/// the layout — at a fraction of the memory: a dictionary of a Trip's six values took 410 bytes
/// (keys, values and a hash table per row), an array of slots and a layout reference 192 and 16,
/// one allocation of the layout and six `AttributeValue?` slots 176 and 8, and packed by kind
/// (``RowShape``, ``RowSlots``) 80 and 8 — with malloc's header (docs/DECISIONS.md D9).
struct RowValues: @unchecked Sendable, Hashable, Sequence, AttributeValuesByName, ExpressibleByDictionaryLiteral {
    // @unchecked: the slots are changed only through a RowValues holding the only reference to
    // them (copied first otherwise), so values shared between threads are never changed.
    private var storage: RowSlots

    var layout: RowLayout { storage.layout }

    /// The row's shape: its layout, its values' kinds and where each payload is.
    var shape: RowShape { storage.shape }

    /// No values, in `layout` (every slot empty).
    init(layout: RowLayout = .empty) {
        storage = layout === RowLayout.empty ? RowSlots.empty : RowSlots.make(layout)
    }

    /// The values of `pairs` (a later value of one name wins), in `layout` or a layout extended
    /// from it by the names it lacks: packed once (a value set at a time would repack the row
    /// for each).
    init<Pairs: Sequence<(key: String, value: AttributeValue)>>(_ pairs: Pairs, layout: RowLayout) {
        var missing: [String: AttributeValue] = [:]
        // The rows of the empty layout share one allocation; every pair is then a missing name.
        storage = withUnsafeTemporaryAllocation(of: AttributeValue?.self, capacity: layout.count) { values in
            values.initialize(repeating: nil)
            defer { values.deinitialize() }
            for (name, value) in pairs {
                if let position = layout.position(of: name) {
                    values[position] = value
                } else {
                    missing[name] = value
                }
            }
            return layout === RowLayout.empty ? RowSlots.empty : RowSlots.make(layout, values: UnsafeBufferPointer(values))
        }
        for name in missing.keys.sorted() { append(name, missing[name]!) }
    }

    private init(storage: RowSlots) { self.storage = storage }

    /// A removed row's values (no values; ``isHole`` tells it from a live row of none).
    static let hole = RowValues(storage: RowSlots.hole)

    /// Whether these are ``hole``'s.
    var isHole: Bool {
        @inline(__always) get { storage === RowSlots.hole }
    }

    /// The values of `values`, one per position of `layout` (`nil`: none) — a decoder that
    /// knows each value's position.
    init(layout: RowLayout, values: UnsafeBufferPointer<AttributeValue?>) {
        storage = RowSlots.make(layout, values: values)
    }

    /// The bytes of the row's one allocation: object header, shape reference and payloads (tests
    /// of the packing).
    var packedByteCount: Int {
        24 + storage.shape.payloadWords * 8
    }

    /// The value at `position` of this row's layout (`nil`: none).
    @inline(__always)
    func value(at position: Int) -> AttributeValue? {
        assert(position < storage.layout.count, "slot \(position) of \(storage.layout.count)")
        return storage[position]
    }

    /// Sets slot `position`: in place when the slots are this row's alone and the value's
    /// payload has the old one's size; repacked otherwise.
    @inline(__always)
    private mutating func setSlot(_ position: Int, _ value: AttributeValue?) {
        assert(position < storage.layout.count, "slot \(position) of \(storage.layout.count)")
        if storage.fits(value, at: position) && isKnownUniquelyReferenced(&storage) {
            storage.replace(position, with: value)
        } else {
            storage = storage.remade(in: storage.layout, copying: storage.layout.count) { $0[position] = value }
        }
    }

    /// Moves the row to its layout extended by `name`, holding `value` there.
    private mutating func append(_ name: String, _ value: AttributeValue) {
        let extended = storage.layout.extended(with: name)
        let count = storage.layout.count
        storage = storage.remade(in: extended, copying: count) { $0[count] = value }
        assert(extended.count == count + 1, "a layout extended by one name has \(extended.count) names after \(count)")
    }

    /// Sets the values of `pairs` (a later value of one name wins). Names the layout lacks extend
    /// it in name order, whatever order `pairs` has (a dictionary's differs from one dictionary to
    /// the next): rows needing the same names reach the same layout, and the cached extensions
    /// stay bounded by the orders of names, not the orders of dictionaries (found by review).
    mutating func assign<Pairs: Sequence<(key: String, value: AttributeValue)>>(_ pairs: Pairs) {
        var missing: [String: AttributeValue] = [:]
        // Values whose payload fits the one they replace are set in place; from the first that
        // does not, the rest wait and the row is repacked once (later values of a name win).
        var pending: [(position: Int, value: AttributeValue)] = []
        for (name, value) in pairs {
            if let position = layout.position(of: name) {
                if pending.isEmpty && storage.fits(value, at: position) && isKnownUniquelyReferenced(&storage) {
                    storage.replace(position, with: value)
                } else {
                    pending.append((position, value))
                }
            } else {
                missing[name] = value
            }
        }
        if !pending.isEmpty {
            storage = storage.remade(in: storage.layout, copying: storage.layout.count) { values in
                for (position, value) in pending { values[position] = value }
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
            return value(at: position)
        }
        set {
            if let position = layout.position(of: name) {
                setSlot(position, newValue)
            } else if let newValue {
                append(name, newValue)
            }
        }
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
        fileprivate var shape: RowShape?
        fileprivate var entry: UInt32?
    }

    /// The value of `name`, looked up in the layout only when the layout differs from the one
    /// `cache` saw last, and its kind and payload's place only when the shape does (a
    /// predicate's scan reads the same names from rows sharing one shape: one load of the
    /// row's shape, compared, then the payload).
    @inline(__always)
    func value(of name: String, cache: inout PositionCache) -> AttributeValue? {
        storage.withShapeAndElements { shape, elements in
            if cache.shape !== shape {
                if cache.layout !== shape.layout {
                    cache.layout = shape.layout
                    cache.position = shape.layout.position(of: name)
                }
                cache.shape = shape
                cache.entry = cache.position.map { shape.entries[$0] }
            }
            guard let entry = cache.entry else { return nil }
            return RowSlots.value(entry, in: elements)
        }
    }

    /// Removes the value of `name`, returning it.
    @discardableResult
    mutating func removeValue(forKey name: String) -> AttributeValue? {
        guard let position = layout.position(of: name) else { return nil }
        defer { setSlot(position, nil) }
        return value(at: position)
    }

    /// The number of names with a value.
    var count: Int {
        storage.withShape { shape in
            (0..<shape.count).reduce(0) { $0 + (shape.kind(at: $1) == PackedKind.absent.rawValue ? 0 : 1) }
        }
    }

    var isEmpty: Bool {
        storage.withShape { shape in !(0..<shape.count).contains { shape.kind(at: $0) != PackedKind.absent.rawValue } }
    }

    /// The values as a dictionary (what snapshots and history hand to users).
    var dictionary: [String: AttributeValue] {
        var dictionary: [String: AttributeValue] = [:]
        dictionary.reserveCapacity(count)
        forEachValue { name, value in dictionary[name] = value }
        return dictionary
    }

    /// The values, without names (for scans that need no names: references).
    var storedValues: [AttributeValue] {
        var values: [AttributeValue] = []
        storage.forEachSlot { _, value in if let value { values.append(value) } }
        return values
    }

    /// Calls `body` with each name that has a value and the value, in layout order (one pass
    /// over the packed values, where the iterator finds each value's place anew).
    func forEachValue(_ body: (String, AttributeValue) throws -> Void) rethrows {
        let names = layout.names
        try storage.forEachSlot { position, value in if let value { try body(names[position], value) } }
    }

    struct Iterator: IteratorProtocol {
        /// Holds the row's storage, so the shape's entries and the elements stay where they are.
        fileprivate let values: RowValues
        fileprivate let names: [String]
        fileprivate let entries: UnsafeMutablePointer<UInt32>
        fileprivate let elements: UnsafeMutableRawPointer
        fileprivate var position = 0

        fileprivate init(values: RowValues) {
            self.values = values
            (names, entries, elements) = values.storage.withShapeAndElements { ($0.layout.names, $0.entries, $1) }
        }

        mutating func next() -> (key: String, value: AttributeValue)? {
            while position < names.count {
                defer { position += 1 }
                if let value = RowSlots.value(entries[position], in: elements) { return (names[position], value) }
            }
            return nil
        }
    }

    /// The (name, value) pairs of the names with a value, in layout order.
    func makeIterator() -> Iterator { Iterator(values: self) }

    var underestimatedCount: Int { 0 }

    /// Equal when the same names have the same values, whatever the layouts.
    static func == (left: RowValues, right: RowValues) -> Bool {
        if left.storage === right.storage { return true }
        if left.layout === right.layout {
            return (0..<left.layout.count).allSatisfy { left.storage[$0] == right.storage[$0] }
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
        forEachValue { name, value in
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
