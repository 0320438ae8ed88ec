import Foundation

/// Predicate push-down (DECISIONS.md D9): a `#Predicate`'s expression tree is read and compiled
/// into closures over a row's stored values, so a store filters without materialising models or
/// calling `Predicate.evaluate` (~500 ns a call here).
///
/// Recognised: attribute key paths on the model (through `schemaProperties`), constants, `nil`,
/// `==`, `!=`, `<`, `<=`, `>`, `>=`, `&&`, `||`, `!`, `?.`/`flatMap` and `??` on optionals,
/// `contains` and `starts(with:)` of strings, and `contains` of an array (`[a, b].contains($0.x)`).
/// Comparisons convert the stored values back to the key path's Swift type and use that type's
/// own operators, so strings compare with `String` semantics (`"é" == "e\u{301}"`). A to-one
/// relationship is recognised through its identifier only — `$0.trip?.persistentModelID == id`,
/// `$0.trip.persistentModelID != id` — compared with the stored reference. Anything else (other
/// uses of relationships, other functions) makes the whole predicate unrecognised: the store
/// declines it and the context evaluates it with `Predicate.evaluate` — correctness first. It then
/// asks for candidates (``compileConjuncts(_:)``): the rows matching the top-level `&&` terms that
/// are recognised, a superset the context filters.
enum PredicatePushDown {
    /// A compiled expression: the value of the expression for a row's values.
    typealias Evaluation = (_ row: RowValues, _ bindings: Bindings) -> AttributeValue

    /// Values bound by `flatMap` variables while one row is evaluated, and each attribute read's
    /// position in the last row layout it saw (a scan's rows mostly share one): one matcher's,
    /// used by one thread.
    final class Bindings {
        var values: [AttributeValue]
        var reads: [RowValues.PositionCache]
        init(count: Int, readCount: Int = 0) {
            values = Array(repeating: .null, count: count)
            reads = Array(repeating: RowValues.PositionCache(), count: readCount)
        }
    }

    /// A compiled predicate: `matches(values)` for a row.
    struct Filter {
        let evaluation: Evaluation
        let bindingCount: Int
        let readCount: Int

        func makeMatcher() -> (RowValues) -> Bool {
            let bindings = Bindings(count: bindingCount, readCount: readCount)
            return { row in
                if case .bool(true) = evaluation(row, bindings) { return true }
                return false
            }
        }
    }

    /// The predicate compiled, or `nil` when any part of it is not recognised.
    static func compile<T: PersistentModel>(_ predicate: Predicate<T>) -> Filter? {
        let compiler = Compiler(modelVariable: predicate.variable.key, attributes: AttributeTable(T.self))
        guard let evaluation = compiler.compile(predicate.expression) else { return nil }
        return Filter(evaluation: evaluation, bindingCount: compiler.slots.count, readCount: compiler.readCount)
    }

    /// A filter from the top-level `&&` terms of `predicate` that are recognised (all of them
    /// when the whole predicate is), or `nil` when none is: rows it rejects fail the predicate, rows
    /// it accepts may not match it.
    static func compileConjuncts<T: PersistentModel>(_ predicate: Predicate<T>) -> Filter? {
        let compiler = Compiler(modelVariable: predicate.variable.key, attributes: AttributeTable(T.self))
        var terms: [Evaluation] = []
        func collect(_ expression: Any) {
            if let conjunction = expression as? any ConjunctionTerms {
                conjunction.terms.forEach(collect)
            } else if let evaluation = compiler.compile(expression) {
                terms.append(evaluation)
            }
        }
        collect(predicate.expression)
        guard !terms.isEmpty else { return nil }
        return Filter(
            evaluation: { row, bindings in
                for term in terms {
                    guard case .bool(true) = term(row, bindings) else { return .bool(false) }
                }
                return .bool(true)
            }, bindingCount: compiler.slots.count, readCount: compiler.readCount)
    }

    /// Attribute properties of a model by key path, with the value a fetched instance has when its
    /// row lacks the attribute (the value `init()` gives it); and its to-one relationships, whose
    /// stored value is a `.reference` (or `.null`).
    struct AttributeTable {
        var byKeyPath: [AnyKeyPath: (name: String, missing: AttributeValue)] = [:]
        var toOneByKeyPath: [AnyKeyPath: String] = [:]

        init<T: PersistentModel>(_ type: T.Type) {
            let blank = T()
            for property in T.schemaProperties {
                if let relationship = property.relationship, !relationship.isToMany {
                    toOneByKeyPath[property.keyPath as AnyKeyPath] = property.name
                }
            }
            let withValues = T._usesModelStorage ? ModelState._propertiesWithValues(of: blank) : []
            for property in T.schemaProperties where property.attribute != nil {
                // A @Model instance has no value for a property its row lacks: it reads as nil.
                let missing = T._usesModelStorage && !withValues.contains(property.name)
                    ? AttributeValue.null : property.read(blank)
                byKeyPath[property.keyPath as AnyKeyPath] = (property.name, missing)
            }
        }
    }

    final class Compiler {
        let modelVariable: PredicateExpressions.VariableID
        let attributes: AttributeTable
        /// flatMap variables → binding slot.
        var slots: [PredicateExpressions.VariableID: Int] = [:]
        /// flatMap variables bound to a related model's reference (usable only for its
        /// `persistentModelID`, never as a value).
        var referenceSlots: [PredicateExpressions.VariableID: Int] = [:]
        /// Attribute reads compiled so far: each has a position cache in ``Bindings/reads``.
        private(set) var readCount = 0

        init(modelVariable: PredicateExpressions.VariableID, attributes: AttributeTable) {
            self.modelVariable = modelVariable
            self.attributes = attributes
        }

        /// A position cache for one more attribute read.
        func newRead() -> Int {
            defer { readCount += 1 }
            return readCount
        }

        func compile(_ expression: Any) -> Evaluation? {
            (expression as? any PushDownExpression)?.pushDown(self)
        }

        func bind(_ variable: PredicateExpressions.VariableID) -> Int {
            if let slot = slots[variable] { return slot }
            slots[variable] = slots.count
            return slots.count - 1
        }
    }

    /// Whether `keyPath` is `\M.persistentModelID` of some model type `M`.
    static func isPersistentModelID(_ keyPath: AnyKeyPath) -> Bool {
        guard let model = type(of: keyPath).rootType as? any PersistentModel.Type else { return false }
        return isPersistentModelID(keyPath, of: model)
    }

    private static func isPersistentModelID<M: PersistentModel>(_ keyPath: AnyKeyPath, of model: M.Type) -> Bool {
        keyPath == \M.persistentModelID as AnyKeyPath
    }

    /// Whether values of type `V` are model identifiers, stored as `.reference` (`nil` as `.null`).
    static func isIdentifier<V>(_ type: V.Type) -> Bool {
        V.self == PersistentIdentifier.self || V.self == PersistentIdentifier?.self
    }

    /// `sameIdentifier` against a constant side (`… == modelID`, either way round), with the
    /// constant's entity and key taken out once: the WWDC24 session's `findTrips` compares every
    /// trip's stored reference with one identifier. `nil` when neither side is a constant.
    static func identifierMatch(
        _ lhs: @escaping Evaluation, _ lhsExpression: Any, _ rhs: @escaping Evaluation, _ rhsExpression: Any
    ) -> ((_ row: RowValues, _ bindings: Bindings) -> Bool)? {
        let constant: AttributeValue
        let side: Evaluation
        if rhsExpression is any ConstantExpression {
            (constant, side) = (rhs(RowValues(), Bindings(count: 0)), lhs)
        } else if lhsExpression is any ConstantExpression {
            (constant, side) = (lhs(RowValues(), Bindings(count: 0)), rhs)
        } else {
            return nil
        }
        guard case .reference(let target) = constant else {
            return { row, bindings in side(row, bindings).isNull }
        }
        let entityName = target.entityName
        let primaryKey = target.primaryKey
        let storeIdentifier = target.storeIdentifier
        return { row, bindings in
            guard case .reference(let identifier) = side(row, bindings) else { return false }
            return identifier.primaryKey == primaryKey && identifier.entityName == entityName
                && identifier.storeIdentifier == storeIdentifier
        }
    }

    /// Equality of two identifiers as `PersistentIdentifier`'s `==` has it: the same entity, key
    /// and store (another store's identifier with a key this store holds — `logstore import` keeps
    /// keys — names none of its models; RELIABILITY bug 8).
    static func sameIdentifier(_ a: AttributeValue, _ b: AttributeValue) -> Bool {
        switch (a, b) {
        case (.null, .null): true
        case (.reference(let x), .reference(let y)):
            x.primaryKey == y.primaryKey && x.entityName == y.entityName && x.storeIdentifier == y.storeIdentifier
        default: false
        }
    }

    /// Converts stored values to `V` when `V` is a storable type.
    static func converter<V>(_ type: V.Type) -> ((AttributeValue) -> V?)? {
        guard let convertible = V.self as? any AttributeConvertible.Type else { return nil }
        return makeConverter(convertible, V.self)
    }

    private static func makeConverter<A: AttributeConvertible, V>(_ stored: A.Type, _ type: V.Type) -> (AttributeValue)
        -> V?
    {
        precondition(A.self == V.self)
        return { value in A(attributeValue: value).map { unsafeBitCast($0, to: V.self) } }
    }

    /// The stored form of a constant, when its type is storable.
    static func attributeValue<V>(_ value: V) -> AttributeValue? {
        guard let convertible = V.self as? any AttributeConvertible.Type else { return nil }
        return storedForm(convertible, value)
    }

    private static func storedForm<A: AttributeConvertible, V>(_ stored: A.Type, _ value: V) -> AttributeValue {
        precondition(A.self == V.self)
        return unsafeBitCast(value, to: A.self).attributeValue
    }
}

/// An expression node the push-down compiler recognises.
protocol PushDownExpression {
    func pushDown(_ compiler: PredicatePushDown.Compiler) -> PredicatePushDown.Evaluation?
}

/// `a && b`, seen as its two terms (for candidate filters).
protocol ConjunctionTerms {
    var terms: [Any] { get }
}

extension PredicateExpressions.Conjunction: ConjunctionTerms {
    var terms: [Any] { [lhs, rhs] }
}

/// Strings' `contains` and `starts(with:)` exactly as the predicate expressions evaluate them
/// (generic `Collection`/`Sequence` algorithms over `Character`s, not Foundation's).
private func collectionContains<C: Collection>(_ base: C, _ other: C) -> Bool where C.Element: Equatable {
    base.contains(other)
}

private func sequenceStarts<S: Sequence>(_ base: S, with prefix: S) -> Bool where S.Element: Equatable {
    base.starts(with: prefix)
}

extension PredicateExpressions.Variable: PushDownExpression {
    func pushDown(_ compiler: PredicatePushDown.Compiler) -> PredicatePushDown.Evaluation? {
        // The model itself, or a related model bound by flatMap, is not a value.
        guard compiler.referenceSlots[key] == nil, let slot = compiler.slots[key] else { return nil }
        return { _, bindings in bindings.values[slot] }
    }
}

extension PredicateExpressions.KeyPath: PushDownExpression {
    func pushDown(_ compiler: PredicatePushDown.Compiler) -> PredicatePushDown.Evaluation? {
        // `related.persistentModelID`, where `related` is a to-one relationship of the model (or
        // a flatMap variable bound to one): the stored reference itself.
        if PredicatePushDown.isPersistentModelID(keyPath as AnyKeyPath) {
            guard let reference = compiler.compileReference(root) else { return nil }
            return reference
        }
        guard let variable = root as? PredicateExpressions.Variable<Root.Output>,
            variable.key == compiler.modelVariable,
            let (name, missing) = compiler.attributes.byKeyPath[keyPath as AnyKeyPath]
        else { return nil }
        let read = compiler.newRead()
        return { row, bindings in row.value(of: name, cache: &bindings.reads[read]) ?? missing }
    }
}

extension PredicatePushDown.Compiler {
    /// An expression whose value is a related model, compiled to its stored reference: a to-one
    /// relationship key path on the model, or a flatMap variable bound to one. `nil` otherwise.
    func compileReference(_ expression: Any) -> PredicatePushDown.Evaluation? {
        if let variable = expression as? any ReferenceVariable {
            guard let slot = referenceSlots[variable.variableKey] else { return nil }
            return { _, bindings in bindings.values[slot] }
        }
        guard let keyPath = expression as? any ModelKeyPathExpression,
            keyPath.rootVariableKey == modelVariable,
            let name = attributes.toOneByKeyPath[keyPath.anyKeyPath]
        else { return nil }
        let read = newRead()
        return { row, bindings in row.value(of: name, cache: &bindings.reads[read]) ?? .null }
    }
}

/// A key path expression whose root is a variable (to find relationship key paths on the model;
/// `anyKeyPath` comes from the history query's ``KeyPathExpression``).
protocol ModelKeyPathExpression {
    var rootVariableKey: PredicateExpressions.VariableID? { get }
    var anyKeyPath: AnyKeyPath { get }
}

extension PredicateExpressions.KeyPath: ModelKeyPathExpression {
    var rootVariableKey: PredicateExpressions.VariableID? {
        (root as? PredicateExpressions.Variable<Root.Output>)?.key
    }
}

/// A variable expression, seen without its type (flatMap variables bound to related models).
protocol ReferenceVariable {
    var variableKey: PredicateExpressions.VariableID { get }
}

extension PredicateExpressions.Variable: ReferenceVariable {
    var variableKey: PredicateExpressions.VariableID { key }
}

/// A constant of a predicate (`PredicateExpressions.Value`): its compiled value reads no row.
protocol ConstantExpression {}

extension PredicateExpressions.Value: ConstantExpression {}

extension PredicateExpressions.Value: PushDownExpression {
    func pushDown(_ compiler: PredicatePushDown.Compiler) -> PredicatePushDown.Evaluation? {
        if let identifier = value as? PersistentIdentifier {
            return { _, _ in .reference(identifier) }
        }
        if Output.self == PersistentIdentifier?.self {
            let constant = (value as? PersistentIdentifier?).flatMap { $0 }.map(AttributeValue.reference) ?? .null
            return { _, _ in constant }
        }
        guard let constant = PredicatePushDown.attributeValue(value) else { return nil }
        return { _, _ in constant }
    }
}

extension PredicateExpressions.NilLiteral: PushDownExpression {
    func pushDown(_ compiler: PredicatePushDown.Compiler) -> PredicatePushDown.Evaluation? {
        { _, _ in .null }
    }
}

extension PredicateExpressions.Equal: PushDownExpression {
    func pushDown(_ compiler: PredicatePushDown.Compiler) -> PredicatePushDown.Evaluation? {
        if PredicatePushDown.isIdentifier(LHS.Output.self) {
            guard let lhs = compiler.compile(lhs), let rhs = compiler.compile(rhs) else { return nil }
            if let match = PredicatePushDown.identifierMatch(lhs, self.lhs, rhs, self.rhs) {
                return { row, bindings in .bool(match(row, bindings)) }
            }
            return { row, bindings in .bool(PredicatePushDown.sameIdentifier(lhs(row, bindings), rhs(row, bindings))) }
        }
        guard let convert = PredicatePushDown.converter(LHS.Output.self),
            let lhs = compiler.compile(lhs), let rhs = compiler.compile(rhs)
        else { return nil }
        return { row, bindings in
            guard let a = convert(lhs(row, bindings)), let b = convert(rhs(row, bindings)) else { return .bool(false) }
            return .bool(a == b)
        }
    }
}

extension PredicateExpressions.NotEqual: PushDownExpression {
    func pushDown(_ compiler: PredicatePushDown.Compiler) -> PredicatePushDown.Evaluation? {
        if PredicatePushDown.isIdentifier(LHS.Output.self) {
            guard let lhs = compiler.compile(lhs), let rhs = compiler.compile(rhs) else { return nil }
            if let match = PredicatePushDown.identifierMatch(lhs, self.lhs, rhs, self.rhs) {
                return { row, bindings in .bool(!match(row, bindings)) }
            }
            return { row, bindings in .bool(!PredicatePushDown.sameIdentifier(lhs(row, bindings), rhs(row, bindings))) }
        }
        guard let convert = PredicatePushDown.converter(LHS.Output.self),
            let lhs = compiler.compile(lhs), let rhs = compiler.compile(rhs)
        else { return nil }
        return { row, bindings in
            guard let a = convert(lhs(row, bindings)), let b = convert(rhs(row, bindings)) else { return .bool(false) }
            return .bool(a != b)
        }
    }
}

extension PredicateExpressions.Comparison: PushDownExpression {
    func pushDown(_ compiler: PredicatePushDown.Compiler) -> PredicatePushDown.Evaluation? {
        guard let convert = PredicatePushDown.converter(LHS.Output.self),
            let lhs = compiler.compile(lhs), let rhs = compiler.compile(rhs)
        else { return nil }
        let op = op
        return { row, bindings in
            guard let a = convert(lhs(row, bindings)), let b = convert(rhs(row, bindings)) else { return .bool(false) }
            switch op {
            case .lessThan: return .bool(a < b)
            case .lessThanOrEqual: return .bool(a <= b)
            case .greaterThan: return .bool(a > b)
            case .greaterThanOrEqual: return .bool(a >= b)
            }
        }
    }
}

extension PredicateExpressions.Conjunction: PushDownExpression {
    func pushDown(_ compiler: PredicatePushDown.Compiler) -> PredicatePushDown.Evaluation? {
        guard let lhs = compiler.compile(lhs), let rhs = compiler.compile(rhs) else { return nil }
        return { row, bindings in
            guard case .bool(true) = lhs(row, bindings) else { return .bool(false) }
            return rhs(row, bindings)
        }
    }
}

extension PredicateExpressions.Disjunction: PushDownExpression {
    func pushDown(_ compiler: PredicatePushDown.Compiler) -> PredicatePushDown.Evaluation? {
        guard let lhs = compiler.compile(lhs), let rhs = compiler.compile(rhs) else { return nil }
        return { row, bindings in
            if case .bool(true) = lhs(row, bindings) { return .bool(true) }
            return rhs(row, bindings)
        }
    }
}

extension PredicateExpressions.Negation: PushDownExpression {
    func pushDown(_ compiler: PredicatePushDown.Compiler) -> PredicatePushDown.Evaluation? {
        guard let wrapped = compiler.compile(wrapped) else { return nil }
        return { row, bindings in
            guard case .bool(let value) = wrapped(row, bindings) else { return .bool(false) }
            return .bool(!value)
        }
    }
}

extension PredicateExpressions.OptionalFlatMap: PushDownExpression {
    func pushDown(_ compiler: PredicatePushDown.Compiler) -> PredicatePushDown.Evaluation? {
        // `$0.trip?.…`: a to-one relationship, bound as its stored reference; the transform may
        // only read its `persistentModelID` (``Compiler/compileReference(_:)``).
        if Wrapped.self is any PersistentModel.Type {
            guard let reference = compiler.compileReference(wrapped) else { return nil }
            // `$0.trip?.persistentModelID`: the stored reference itself (`.null` when nil), no binding.
            if let keyPath = transform as? any ModelKeyPathExpression, keyPath.rootVariableKey == variable.key,
                PredicatePushDown.isPersistentModelID(keyPath.anyKeyPath)
            {
                return reference
            }
            let slot = compiler.bind(variable.key)
            compiler.referenceSlots[variable.key] = slot
            guard let transform = compiler.compile(transform) else { return nil }
            return { row, bindings in
                let value = reference(row, bindings)
                if value.isNull { return .null }
                bindings.values[slot] = value
                return transform(row, bindings)
            }
        }
        // Otherwise only optionals of storable types (whose nil is `.null`) are recognised.
        guard PredicatePushDown.converter(Wrapped.self) != nil, let wrapped = compiler.compile(wrapped) else {
            return nil
        }
        let slot = compiler.bind(variable.key)
        guard let transform = compiler.compile(transform) else { return nil }
        return { row, bindings in
            let value = wrapped(row, bindings)
            if value.isNull { return .null }
            bindings.values[slot] = value
            return transform(row, bindings)
        }
    }
}

extension PredicateExpressions.NilCoalesce: PushDownExpression {
    func pushDown(_ compiler: PredicatePushDown.Compiler) -> PredicatePushDown.Evaluation? {
        guard PredicatePushDown.converter(RHS.Output.self) != nil,
            let lhs = compiler.compile(lhs), let rhs = compiler.compile(rhs)
        else { return nil }
        return { row, bindings in
            let value = lhs(row, bindings)
            return value.isNull ? rhs(row, bindings) : value
        }
    }
}

extension PredicateExpressions.CollectionContainsCollection: PushDownExpression {
    func pushDown(_ compiler: PredicatePushDown.Compiler) -> PredicatePushDown.Evaluation? {
        guard Base.Output.self == String.self, Other.Output.self == String.self,
            let base = compiler.compile(base), let other = compiler.compile(other)
        else { return nil }
        return { row, bindings in
            guard case .string(let a) = base(row, bindings), case .string(let b) = other(row, bindings) else {
                return .bool(false)
            }
            return .bool(collectionContains(a, b))
        }
    }
}

extension PredicateExpressions.SequenceStartsWith: PushDownExpression {
    func pushDown(_ compiler: PredicatePushDown.Compiler) -> PredicatePushDown.Evaluation? {
        guard Base.Output.self == String.self, Prefix.Output.self == String.self,
            let base = compiler.compile(base), let prefix = compiler.compile(prefix)
        else { return nil }
        return { row, bindings in
            guard case .string(let a) = base(row, bindings), case .string(let b) = prefix(row, bindings) else {
                return .bool(false)
            }
            return .bool(sequenceStarts(a, with: b))
        }
    }
}

extension PredicateExpressions.SequenceContains: PushDownExpression {
    func pushDown(_ compiler: PredicatePushDown.Compiler) -> PredicatePushDown.Evaluation? {
        // Arrays of storable values only (a String is a sequence of Characters: not recognised).
        guard let sequenceType = LHS.Output.self as? any AttributeConvertible.Type,
            case .array = sequenceType.valueType,
            let convert = PredicatePushDown.converter(RHS.Output.self),
            let sequence = compiler.compile(sequence), let element = compiler.compile(element)
        else { return nil }
        return { row, bindings in
            guard case .array(let values) = sequence(row, bindings), let wanted = convert(element(row, bindings)) else {
                return .bool(false)
            }
            return .bool(values.contains { convert($0).map { $0 == wanted } ?? false })
        }
    }
}
