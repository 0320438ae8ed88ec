import Foundation

/// What a history predicate says that the store can act on without `Predicate.evaluate`
/// (DECISIONS.md D6, D9): its top-level `&&` terms on `token`, `author` and `timestamp`.
struct HistoryQuery: Sendable {
    /// `author == operand` or `author != operand`, with Swift's semantics (`author != "x"` holds
    /// for a nil author): ``AuthorBytesTest`` tests it on the stored bytes.
    enum AuthorTest: Sendable, Equatable {
        case equals(String?)
        case notEquals(String?)
    }

    /// An ``AuthorTest`` on an author's stored UTF-8 bytes: equal bytes are equal strings, and two
    /// different ASCII strings are different; anything else is compared as Swift Strings
    /// (canonical equivalence: "é" == "e\u{301}", and "\u{212A}" — the Kelvin sign — == "K"). The
    /// operand's bytes and whether they are ASCII are worked out once, not per record (an author
    /// filter tests nine records in ten that it does not take; comparing through the operand's
    /// UTF-8 view and checking it for ASCII each time was a tenth of P6's author fetch).
    struct AuthorBytesTest: Sendable {
        /// `nil`: the operand is `nil`.
        let operand: [UInt8]?
        let operandString: String?
        let operandIsASCII: Bool
        let negated: Bool

        init(_ test: AuthorTest) {
            switch test {
            case .equals(let expected), .notEquals(let expected): operandString = expected
            }
            operand = operandString.map { Array($0.utf8) }
            operandIsASCII = operand?.allSatisfy { $0 < 0x80 } ?? true
            if case .notEquals = test { negated = true } else { negated = false }
        }

        func matches(_ authorBytes: UnsafeRawBufferPointer?) -> Bool {
            let isEqual: Bool
            switch (authorBytes, operand) {
            case (nil, nil): isEqual = true
            case (nil, _): isEqual = false
            case (let bytes?, nil):
                guard Self.isUTF8(bytes) else { return true }
                isEqual = false
            case (let bytes?, let expected?):
                if expected.hasSameBytes(as: bytes) {
                    isEqual = true
                } else if operandIsASCII && bytes.allSatisfy({ $0 < 0x80 }) {
                    isEqual = false
                } else if let author = String(validating: bytes, as: UTF8.self) {
                    isEqual = author == operandString
                } else {
                    return true
                }
            }
            return negated ? !isEqual : isEqual
        }

        /// An author that is not UTF-8 is taken whatever the test, so that decoding it refuses the
        /// record (`corruptRecord`), as a fetch without the filter does — never skipped quietly by
        /// one filter and refused by another (found by review).
        private static func isUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
            bytes.allSatisfy { $0 < 0x80 } || String(validating: bytes, as: UTF8.self) != nil
        }
    }

    struct Bound<Value: Sendable>: Sendable {
        var value: Value
        var inclusive: Bool
    }

    /// The strongest lower bound on `token` (`token > s` or `token >= s`).
    var tokenLowerBound: Bound<DefaultHistoryToken>?
    /// The strongest upper bound on `token`.
    var tokenUpperBound: Bound<DefaultHistoryToken>?
    var timestampUpperBound: Bound<Date>?
    var authorTests: [AuthorTest] = []
    /// Every `DefaultHistoryToken` literal anywhere in the predicate (validated before any evaluation).
    var tokenLiterals: [DefaultHistoryToken] = []
    /// Some term is not one of the above: the predicate must still be evaluated.
    var needsEvaluation = false
    /// Terms that are neither token nor timestamp upper bounds (deleteHistory accepts only those).
    var hasTermsOtherThanUpperBounds = false

    init() {}

    init<Transaction: HistoryTransaction>(_ predicate: Predicate<Transaction>?) {
        guard let predicate else { return }
        tokenLiterals = Self.tokenLiterals(in: predicate.expression)
        for term in Self.conjuncts(of: predicate.expression) { take(term, transaction: Transaction.self) }
    }

    /// Whether a transaction at `offset` passes the token bounds.
    func matchesTokenBounds(offset: UInt64) -> Bool {
        if let bound = tokenLowerBound, bound.inclusive ? offset < bound.value.offset : offset <= bound.value.offset {
            return false
        }
        if let bound = tokenUpperBound, bound.inclusive ? offset > bound.value.offset : offset >= bound.value.offset {
            return false
        }
        return true
    }

    /// Whether a record at `offset` and every later one fail the token upper bound.
    func isPastUpperBound(_ offset: UInt64) -> Bool {
        guard let bound = tokenUpperBound else { return false }
        return bound.inclusive ? offset > bound.value.offset : offset >= bound.value.offset
    }

    // MARK: Reading the expression tree

    private static func conjuncts(of expression: Any) -> [Any] {
        if let conjunction = expression as? any ConjunctionExpression {
            return conjuncts(of: conjunction.left) + conjuncts(of: conjunction.right)
        }
        return [expression]
    }

    private mutating func take<Transaction: HistoryTransaction>(_ term: Any, transaction: Transaction.Type) {
        // A key path through the protocol requirement is not equal to the concrete type's stored
        // property path that `#Predicate` records: accept both.
        let concrete = Transaction.self == DefaultHistoryTransaction.self
        let tokenPaths: Set<AnyKeyPath> = concrete ? [\DefaultHistoryTransaction.token] : [\Transaction.token]
        let authorPaths: Set<AnyKeyPath> = concrete ? [\DefaultHistoryTransaction.author] : [\Transaction.author]
        let timestampPaths: Set<AnyKeyPath> =
            concrete ? [\DefaultHistoryTransaction.timestamp] : [\Transaction.timestamp]
        if let comparison = term as? any ComparisonExpression {
            // `keyPath op value`, or `value op keyPath` (the operator then reads the other way).
            var op = comparison.comparisonOperator
            var path = (comparison.left as? any KeyPathExpression)?.anyKeyPath
            var value = (comparison.right as? any ValueExpression)?.anyValue
            if path == nil, let flipped = (comparison.right as? any KeyPathExpression)?.anyKeyPath {
                path = flipped
                value = (comparison.left as? any ValueExpression)?.anyValue
                op = op.reversed
            }
            if let path, let value {
                if tokenPaths.contains(path), let token = value as? DefaultHistoryToken {
                    takeTokenBound(op, token)
                    return
                }
                if timestampPaths.contains(path), let date = value as? Date, op == .lessThan || op == .lessThanOrEqual {
                    // An accepted deleteHistory bound; a fetch evaluates it.
                    let bound = Bound(value: date, inclusive: op == .lessThanOrEqual)
                    if let current = timestampUpperBound,
                        current.value < date || (current.value == date && !current.inclusive)
                    {
                        // The current bound is the stronger one.
                    } else {
                        timestampUpperBound = bound
                    }
                    needsEvaluation = true
                    return
                }
            }
        }
        if let equality = term as? any EqualityExpression {
            var path = (equality.left as? any KeyPathExpression)?.anyKeyPath
            var other = equality.right
            if path == nil {
                path = (equality.right as? any KeyPathExpression)?.anyKeyPath
                other = equality.left
            }
            if let path, authorPaths.contains(path), let operand = Self.stringOperand(other) {
                authorTests.append(equality.isNegated ? .notEquals(operand.value) : .equals(operand.value))
                hasTermsOtherThanUpperBounds = true
                return
            }
        }
        needsEvaluation = true
        hasTermsOtherThanUpperBounds = true
    }

    private mutating func takeTokenBound(_ op: PredicateExpressions.ComparisonOperator, _ token: DefaultHistoryToken) {
        switch op {
        case .greaterThan, .greaterThanOrEqual:
            let bound = Bound(value: token, inclusive: op == .greaterThanOrEqual)
            hasTermsOtherThanUpperBounds = true
            guard let current = tokenLowerBound else {
                tokenLowerBound = bound
                return
            }
            // The stronger lower bound: the higher offset; at equal offsets the exclusive one.
            if token.offset > current.value.offset || (token.offset == current.value.offset && !bound.inclusive) {
                tokenLowerBound = bound
            }
        case .lessThan, .lessThanOrEqual:
            let bound = Bound(value: token, inclusive: op == .lessThanOrEqual)
            guard let current = tokenUpperBound else {
                tokenUpperBound = bound
                return
            }
            if token.offset < current.value.offset || (token.offset == current.value.offset && !bound.inclusive) {
                tokenUpperBound = bound
            }
        }
    }

    /// `"x"`, a captured `String?`, or `nil`: `.some(value)`; anything else `nil`.
    private static func stringOperand(_ expression: Any) -> (value: String?, Void)? {
        if expression is any NilLiteralExpression { return (nil, ()) }
        guard let value = (expression as? any ValueExpression)?.anyValue else { return nil }
        if let string = value as? String { return (string, ()) }
        // A captured `String?` holding nil.
        if value is String?, Mirror(reflecting: value).displayStyle == .optional,
            Mirror(reflecting: value).children.isEmpty
        {
            return (nil, ())
        }
        return nil
    }

    /// Every `DefaultHistoryToken` value in the tree (a token may sit anywhere, even in a term the
    /// store does not push down). The expression kinds the store reads are walked through their
    /// views below, anything else by reflection.
    static func tokenLiterals(in expression: Any) -> [DefaultHistoryToken] {
        var found: [DefaultHistoryToken] = []
        var worklist: [Any] = [expression]
        var visited = 0
        // Bounded: an expression tree is finite and acyclic; the cap guards against surprises.
        while let next = worklist.popLast(), visited < 100_000 {
            visited += 1
            if let token = next as? DefaultHistoryToken {
                found.append(token)
                continue
            }
            // The common nodes without a mirror: reflecting them cost 6.5 % of P6's fetch of 1,000
            // transactions (once per fetch, 2026-11-27). Children in declaration order, as a mirror
            // lists them, so tokens are found (and checked) in the same order.
            if let node = next as? any ExpressionWithOperands {
                worklist.append(node.left)
                worklist.append(node.right)
                continue
            }
            if let value = next as? any ValueExpression {
                worklist.append(value.anyValue)
                continue
            }
            if let keyPath = next as? any KeyPathExpression {
                worklist.append(keyPath.rootExpression)
                continue
            }
            // Leaves that hold no token: not reflected (a string's mirror copied it character by
            // character — 3 % of P6's fetch of 1,000 transactions, once per fetch).
            if next is any VariableExpression || next is any NilLiteralExpression || next is String
                || next is AnyKeyPath || next is any Numeric || next is Bool || next is Date
            {
                continue
            }
            worklist += Mirror(reflecting: next).children.map(\.value)
        }
        return found
    }
}

extension PredicateExpressions.ComparisonOperator {
    /// The operator with its operands swapped (`a < b` ⇔ `b > a`).
    var reversed: Self {
        switch self {
        case .lessThan: .greaterThan
        case .lessThanOrEqual: .greaterThanOrEqual
        case .greaterThan: .lessThan
        case .greaterThanOrEqual: .lessThanOrEqual
        }
    }
}

// MARK: Views of Foundation's expression types without their generic parameters

protocol ConjunctionExpression {
    var left: Any { get }
    var right: Any { get }
}

protocol ComparisonExpression {
    var left: Any { get }
    var right: Any { get }
    var comparisonOperator: PredicateExpressions.ComparisonOperator { get }
}

protocol EqualityExpression {
    var left: Any { get }
    var right: Any { get }
    var isNegated: Bool { get }
}

protocol KeyPathExpression {
    var anyKeyPath: AnyKeyPath { get }
    /// The expression the key path is applied to (a variable, or an optional's unwrapped value).
    var rootExpression: Any { get }
}

/// A node with two operands and nothing else that can hold a value (its operator aside).
protocol ExpressionWithOperands {
    var left: Any { get }
    var right: Any { get }
}

/// A predicate's variable: an identifier, no value.
protocol VariableExpression {}

protocol ValueExpression {
    var anyValue: Any { get }
}

protocol NilLiteralExpression {}

extension PredicateExpressions.Conjunction: ConjunctionExpression {
    var left: Any { lhs }
    var right: Any { rhs }
}

extension PredicateExpressions.Comparison: ComparisonExpression {
    var left: Any { lhs }
    var right: Any { rhs }
    var comparisonOperator: PredicateExpressions.ComparisonOperator { op }
}

extension PredicateExpressions.Equal: EqualityExpression {
    var left: Any { lhs }
    var right: Any { rhs }
    var isNegated: Bool { false }
}

extension PredicateExpressions.NotEqual: EqualityExpression {
    var left: Any { lhs }
    var right: Any { rhs }
    var isNegated: Bool { true }
}

extension PredicateExpressions.KeyPath: KeyPathExpression {
    var anyKeyPath: AnyKeyPath { keyPath }
    var rootExpression: Any { root }
}

extension PredicateExpressions.Variable: VariableExpression {}
extension PredicateExpressions.Conjunction: ExpressionWithOperands {}
extension PredicateExpressions.Disjunction: ExpressionWithOperands {
    var left: Any { lhs }
    var right: Any { rhs }
}
extension PredicateExpressions.Comparison: ExpressionWithOperands {}
extension PredicateExpressions.Equal: ExpressionWithOperands {}
extension PredicateExpressions.NotEqual: ExpressionWithOperands {}

extension PredicateExpressions.Value: ValueExpression {
    var anyValue: Any { value }
}

extension PredicateExpressions.NilLiteral: NilLiteralExpression {}
