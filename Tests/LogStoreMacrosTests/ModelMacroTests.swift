import LogStoreMacros
import SwiftSyntaxMacros
import SwiftSyntaxMacrosTestSupport
import XCTest

/// What `@Model` and its companions expand to, and what they refuse.
final class ModelMacroTests: XCTestCase {
    let macros: [String: any Macro.Type] = [
        "Model": ModelMacro.self, "_PersistedProperty": PersistedPropertyMacro.self,
        "Attribute": MarkerMacro.self, "Relationship": MarkerMacro.self, "Transient": MarkerMacro.self,
        "Unique": MarkerMacro.self, "Index": MarkerMacro.self,
    ]

    func testATwoPropertyClassBecomesAModel() {
        assertMacroExpansion(
            """
            @Model
            final class Item {
                var title: String
                var count: Int = 0
            }
            """,
            expandedSource: """
            final class Item {
                var title: String {
                    @storageRestrictions(initializes: _title)
                    init(initialValue) {
                        _title = _PersistedSlot(initialValue)
                    }
                    get {
                        _$observationRegistrar.access(self, keyPath: \\.title)
                        return _title.value ?? modelState._missingValue(at: "title", of: Self.entityName)
                    }
                    set {
                        _$observationRegistrar.withMutation(of: self, keyPath: \\.title) {
                            let old = _title.value
                            _title.value = newValue
                            modelState._didSet(at: "title", on: self, old: old, new: newValue)
                        }
                    }
                }

                private var _title: _PersistedSlot<String>
                var count: Int {
                    @storageRestrictions(initializes: _count)
                    init(initialValue) {
                        _count = _PersistedSlot(initialValue)
                    }
                    get {
                        _$observationRegistrar.access(self, keyPath: \\.count)
                        return _count.value ?? modelState._missingValue(at: "count", of: Self.entityName)
                    }
                    set {
                        _$observationRegistrar.withMutation(of: self, keyPath: \\.count) {
                            let old = _count.value
                            _count.value = newValue
                            modelState._didSet(at: "count", on: self, old: old, new: newValue)
                        }
                    }
                }

                private var _count: _PersistedSlot<Int>

                static let schemaProperties: [ModelProperty<Item>] = [
                    ._persisted("title", \\Item.title, slot: {
                            $0._title.value
                        }),
                    ._persisted("count", \\Item.count, defaultValue: 0, slot: {
                            $0._count.value
                        }),
                ]

                static let uniquenessConstraints: [[String]] = []

                static let indexes: [[String]] = []

                static let _usesModelStorage = true

                let modelState = ModelState()

                private let _$observationRegistrar = Observation.ObservationRegistrar()

                /// An empty instance, which a fetch fills property by property.
                required init() {
                    _title = _PersistedSlot()
                }
            }

            extension Item: PersistentModel, Observation.Observable {
            }
            """,
            macros: macros)
    }

    func testOptionsConstraintsAndTransientPropertiesAreRead() {
        assertMacroExpansion(
            """
            @Model
            public final class Trip {
                #Unique<Trip>([\\.name, \\.startDate])
                #Index<Trip>([\\.startDate])
                @Attribute(.preserveValueOnDeletion, originalName: "title") var name: String
                var startDate: Date
                @Relationship(deleteRule: .cascade, inverse: \\Stay.trip) var stay: Stay?
                @Transient var isSelected: Bool = false
                var computed: Int { 1 }
                init() { name = ""; startDate = .now }
            }
            """,
            expandedSource: """
            public final class Trip {
                var name: String {
                    @storageRestrictions(initializes: _name)
                    init(initialValue) {
                        _name = _PersistedSlot(initialValue)
                    }
                    get {
                        _$observationRegistrar.access(self, keyPath: \\.name)
                        return _name.value ?? modelState._missingValue(at: "name", of: Self.entityName)
                    }
                    set {
                        _$observationRegistrar.withMutation(of: self, keyPath: \\.name) {
                            let old = _name.value
                            _name.value = newValue
                            modelState._didSet(at: "name", on: self, old: old, new: newValue)
                        }
                    }
                }

                private var _name: _PersistedSlot<String>
                var startDate: Date {
                    @storageRestrictions(initializes: _startDate)
                    init(initialValue) {
                        _startDate = _PersistedSlot(initialValue)
                    }
                    get {
                        _$observationRegistrar.access(self, keyPath: \\.startDate)
                        return _startDate.value ?? modelState._missingValue(at: "startDate", of: Self.entityName)
                    }
                    set {
                        _$observationRegistrar.withMutation(of: self, keyPath: \\.startDate) {
                            let old = _startDate.value
                            _startDate.value = newValue
                            modelState._didSet(at: "startDate", on: self, old: old, new: newValue)
                        }
                    }
                }

                private var _startDate: _PersistedSlot<Date>
                var stay: Stay? {
                    @storageRestrictions(initializes: _stay)
                    init(initialValue) {
                        _stay = _PersistedSlot(initialValue)
                    }
                    get {
                        _$observationRegistrar.access(self, keyPath: \\.stay)
                        return _stay.value ?? modelState._missingValue(at: "stay", of: Self.entityName)
                    }
                    set {
                        _$observationRegistrar.withMutation(of: self, keyPath: \\.stay) {
                            let old = _stay.value
                            _stay.value = newValue
                            modelState._didSet(at: "stay", on: self, old: old, new: newValue)
                        }
                    }
                }

                private var _stay: _PersistedSlot<Stay?>
                var isSelected: Bool = false
                var computed: Int { 1 }
                init() { name = ""; startDate = .now }

                public static let schemaProperties: [ModelProperty<Trip>] = [
                    ._persisted("name", \\Trip.name, options: [.preserveValueOnDeletion], originalName: "title", slot: {
                            $0._name.value
                        }),
                    ._persisted("startDate", \\Trip.startDate, slot: {
                            $0._startDate.value
                        }),
                    ._persisted("stay", \\Trip.stay, deleteRule: .cascade, inverse: \\Stay.trip, slot: {
                            $0._stay.value
                        }),
                ]

                public static let uniquenessConstraints: [[String]] = [["name", "startDate"]]

                public static let indexes: [[String]] = [["startDate"]]

                public static let _usesModelStorage = true

                public let modelState = ModelState()

                private let _$observationRegistrar = Observation.ObservationRegistrar()
            }

            extension Trip: PersistentModel, Observation.Observable {
            }
            """,
            macros: macros)
    }

    func testAUniqueConstraintNamingNoStoredPropertyIsAnError() {
        assertMacroExpansion(
            """
            @Model
            final class Trip {
                #Unique<Trip>([\\.nmae])
                var name: String
                init() { name = "" }
            }
            """,
            expandedSource: """
            final class Trip {
                var name: String {
                    @storageRestrictions(initializes: _name)
                    init(initialValue) {
                        _name = _PersistedSlot(initialValue)
                    }
                    get {
                        _$observationRegistrar.access(self, keyPath: \\.name)
                        return _name.value ?? modelState._missingValue(at: "name", of: Self.entityName)
                    }
                    set {
                        _$observationRegistrar.withMutation(of: self, keyPath: \\.name) {
                            let old = _name.value
                            _name.value = newValue
                            modelState._didSet(at: "name", on: self, old: old, new: newValue)
                        }
                    }
                }

                private var _name: _PersistedSlot<String>
                init() { name = "" }

                static let schemaProperties: [ModelProperty<Trip>] = [
                    ._persisted("name", \\Trip.name, slot: {
                            $0._name.value
                        }),
                ]

                static let uniquenessConstraints: [[String]] = []

                static let indexes: [[String]] = []

                static let _usesModelStorage = true

                let modelState = ModelState()

                private let _$observationRegistrar = Observation.ObservationRegistrar()
            }

            extension Trip: PersistentModel, Observation.Observable {
            }
            """,
            diagnostics: [
                DiagnosticSpec(message: "#Unique names 'nmae', which is not a persisted property of this model",
                               line: 3, column: 20)
            ],
            macros: macros)
    }

    /// `T!` cannot be a generic argument: its slot holds `T?`.
    func testAnImplicitlyUnwrappedPropertyHasAnOptionalSlot() {
        assertMacroExpansion(
            """
            @Model
            final class Note {
                var text: String!
                init() { text = nil }
            }
            """,
            expandedSource: """
            final class Note {
                var text: String! {
                    @storageRestrictions(initializes: _text)
                    init(initialValue) {
                        _text = _PersistedSlot(initialValue)
                    }
                    get {
                        _$observationRegistrar.access(self, keyPath: \\.text)
                        return _text.value ?? modelState._missingValue(at: "text", of: Self.entityName)
                    }
                    set {
                        _$observationRegistrar.withMutation(of: self, keyPath: \\.text) {
                            let old = _text.value
                            _text.value = newValue
                            modelState._didSet(at: "text", on: self, old: old, new: newValue)
                        }
                    }
                }

                private var _text: _PersistedSlot<String?>
                init() { text = nil }

                static let schemaProperties: [ModelProperty<Note>] = [
                    ._persisted("text", \\Note.text, slot: {
                            $0._text.value
                        }),
                ]

                static let uniquenessConstraints: [[String]] = []

                static let indexes: [[String]] = []

                static let _usesModelStorage = true

                let modelState = ModelState()

                private let _$observationRegistrar = Observation.ObservationRegistrar()
            }

            extension Note: PersistentModel, Observation.Observable {
            }
            """,
            macros: macros)
    }

    /// An observer on a persisted property would never run: @Model makes the property computed.
    func testAnObserverOnAPersistedPropertyIsAnError() {
        assertMacroExpansion(
            """
            @Model
            final class Counter {
                var count: Int = 0 {
                    didSet { print(count) }
                }
                init() {}
            }
            """,
            expandedSource: """
            final class Counter {
                var count: Int {
                    didSet { print(count) }
                    @storageRestrictions(initializes: _count)
                    init(initialValue) {
                        _count = _PersistedSlot(initialValue)
                    }

                    get {
                        _$observationRegistrar.access(self, keyPath: \\.count)
                        return _count.value ?? modelState._missingValue(at: "count", of: Self.entityName)
                    }

                    set {
                        _$observationRegistrar.withMutation(of: self, keyPath: \\.count) {
                            let old = _count.value
                            _count.value = newValue
                            modelState._didSet(at: "count", on: self, old: old, new: newValue)
                        }
                    }
                }

                private var _count: _PersistedSlot<Int>
                init() {}

                static let schemaProperties: [ModelProperty<Counter>] = [
                    ._persisted("count", \\Counter.count, defaultValue: 0, slot: {
                            $0._count.value
                        }),
                ]

                static let uniquenessConstraints: [[String]] = []

                static let indexes: [[String]] = []

                static let _usesModelStorage = true

                let modelState = ModelState()

                private let _$observationRegistrar = Observation.ObservationRegistrar()
            }

            extension Counter: PersistentModel, Observation.Observable {
            }
            """,
            diagnostics: [
                DiagnosticSpec(
                    message: "willSet/didSet on the persisted property 'count' would never run (@Model makes it a "
                        + "computed property); observe it with withObservationTracking, or mark it @Transient",
                    line: 4, column: 9)
            ],
            macros: macros)
    }

    func testAModelMustBeAClass() {
        assertMacroExpansion(
            """
            @Model
            struct Trip {
                var name: String
            }
            """,
            expandedSource: """
            struct Trip {
                var name: String
            }
            """,
            diagnostics: [
                DiagnosticSpec(message: "@Model applies to a class; a struct, enum or actor cannot be a model",
                               line: 1, column: 1)
            ],
            macros: macros)
    }

    func testAPersistedPropertyNeedsAnExplicitType() {
        assertMacroExpansion(
            """
            @Model
            final class Trip {
                var name = ""
            }
            """,
            expandedSource: """
            final class Trip {
                var name = ""

                static let schemaProperties: [ModelProperty<Trip>] = [

                ]

                static let uniquenessConstraints: [[String]] = []

                static let indexes: [[String]] = []

                static let _usesModelStorage = true

                let modelState = ModelState()

                private let _$observationRegistrar = Observation.ObservationRegistrar()

                /// An empty instance, which a fetch fills property by property.
                required init() {

                }
            }

            extension Trip: PersistentModel, Observation.Observable {
            }
            """,
            diagnostics: [
                DiagnosticSpec(message: "the persisted property 'name' needs an explicit type, e.g. 'var name: String'",
                               line: 3, column: 5)
            ],
            macros: macros)
    }

    func testAnAttributeOnAComputedPropertyIsAnError() {
        assertMacroExpansion(
            """
            @Model
            final class Trip {
                @Attribute(.unique) var label: String { "x" }
            }
            """,
            expandedSource: """
            final class Trip {
                var label: String { "x" }

                static let schemaProperties: [ModelProperty<Trip>] = [

                ]

                static let uniquenessConstraints: [[String]] = []

                static let indexes: [[String]] = []

                static let _usesModelStorage = true

                let modelState = ModelState()

                private let _$observationRegistrar = Observation.ObservationRegistrar()

                /// An empty instance, which a fetch fills property by property.
                required init() {

                }
            }

            extension Trip: PersistentModel, Observation.Observable {
            }
            """,
            diagnostics: [
                DiagnosticSpec(message: "@Attribute and @Relationship apply to stored 'var' properties, not to computed ones",
                               line: 3, column: 5)
            ],
            macros: macros)
    }
}
