import Foundation

/// Predicate push-down (DECISIONS.md D9): a `#Predicate`'s expression tree is read and compiled
/// into closures over a row's stored values, so a store filters without materialising models or
/// calling `Predicate.evaluate` (~500 ns a call here).
///
/// Recognised: attribute key paths on the model (through `schemaProperties`), constants, `nil`,
/// `==`, `!=`, `<`, `<=`, `>`, `>=`, `&&`, `||`, `!`, `?.`/`flatMap` and `??` on optionals,
/// `contains` and `starts(with:)` of strings, and `contains` of an array (`[a, b].contains($0.x)`).
/// Comparisons convert the stored values back to the key path's Swift type and use that type's
/// own operators, so strings compare with `String` semantics (`"é" == "e\u{301}"`). Anything else
/// (relationships, other functions) makes the whole predicate unrecognised: the store declines
/// it and the context evaluates it with `Predicate.evaluate` — correctness first.
enum PredicatePushDown {
    /// A compiled expression: the value of the expression for a row's values.
    typealias Evaluation = (_ row: [String: AttributeValue], _ bindings: Bindings) -> AttributeValue

    /// Values bound by `flatMap` variables while one row is evaluated.
    final class Bindings {
        var values: [AttributeValue]
        init(count: Int) { values = Array(repeating: .null, count: count) }
    }

    /// A compiled predicate: `matches(values)` for a row.
    struct Filter {
        let evaluation: Evaluation
        let bindingCount: Int

        func makeMatcher() -> ([String: AttributeValue]) -> Bool {
            let bindings = Bindings(count: bindingCount)
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
        return Filter(evaluation: evaluation, bindingCount: compiler.slots.count)
    }

    /// Attribute (not relationship) properties of a model by key path, with the value a fetched
    /// instance has when its row lacks the attribute (the value `init()` gives it).
    struct AttributeTable {
        var byKeyPath: [AnyKeyPath: (name: String, missing: AttributeValue)] = [:]

        init<T: PersistentModel>(_ type: T.Type) {
            let blank = T()
            for property in T.schemaProperties where property.attribute != nil {
                // A @Model instance has no value for a property its row lacks: it reads as nil.
                let missing = T._usesModelStorage && blank.modelState.values[property.name] == nil
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

        init(modelVariable: PredicateExpressions.VariableID, attributes: AttributeTable) {
            self.modelVariable = modelVariable
            self.attributes = attributes
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
        guard let slot = compiler.slots[key] else { return nil }  // the model itself is not a value
        return { _, bindings in bindings.values[slot] }
    }
}

extension PredicateExpressions.KeyPath: PushDownExpression {
    func pushDown(_ compiler: PredicatePushDown.Compiler) -> PredicatePushDown.Evaluation? {
        guard let variable = root as? PredicateExpressions.Variable<Root.Output>,
            variable.key == compiler.modelVariable,
            let (name, missing) = compiler.attributes.byKeyPath[keyPath as AnyKeyPath]
        else { return nil }
        return { row, _ in row[name] ?? missing }
    }
}

extension PredicateExpressions.Value: PushDownExpression {
    func pushDown(_ compiler: PredicatePushDown.Compiler) -> PredicatePushDown.Evaluation? {
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
        // Only optionals of storable types (whose nil is `.null`) are recognised.
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
