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
                    @storageRestrictions(initializes: _title, accesses: modelState)
                    init(initialValue) {
                        modelState._initialize(initialValue, at: "title")
                        _title = _PersistedSlot()
                    }
                    get {
                        _$observationRegistrar.access(self, keyPath: \\.title)
                        return modelState._value(at: "title", of: Self.entityName)
                    }
                    set {
                        _$observationRegistrar.withMutation(of: self, keyPath: \\.title) {
                            modelState._set(newValue, at: "title", on: self, keyPath: \\.title)
                        }
                    }
                }

                private var _title: _PersistedSlot
                var count: Int {
                    @storageRestrictions(initializes: _count, accesses: modelState)
                    init(initialValue) {
                        modelState._initialize(initialValue, at: "count")
                        _count = _PersistedSlot()
                    }
                    get {
                        _$observationRegistrar.access(self, keyPath: \\.count)
                        return modelState._value(at: "count", of: Self.entityName)
                    }
                    set {
                        _$observationRegistrar.withMutation(of: self, keyPath: \\.count) {
                            modelState._set(newValue, at: "count", on: self, keyPath: \\.count)
                        }
                    }
                }

                private var _count: _PersistedSlot

                static let schemaProperties: [ModelProperty<Item>] = [
                    ._persisted("title", \\Item.title),
                    ._persisted("count", \\Item.count, defaultValue: 0),
                ]

                static let uniquenessConstraints: [[String]] = []

                static let indexes: [[String]] = []

                static let _usesModelStorage = true

                let modelState = ModelState()

                private let _$observationRegistrar = Observation.ObservationRegistrar()

                /// An empty instance, which a fetch fills property by property.
                required init() {
                    _title = _PersistedSlot()
                    _count = _PersistedSlot()
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
                    @storageRestrictions(initializes: _name, accesses: modelState)
                    init(initialValue) {
                        modelState._initialize(initialValue, at: "name")
                        _name = _PersistedSlot()
                    }
                    get {
                        _$observationRegistrar.access(self, keyPath: \\.name)
                        return modelState._value(at: "name", of: Self.entityName)
                    }
                    set {
                        _$observationRegistrar.withMutation(of: self, keyPath: \\.name) {
                            modelState._set(newValue, at: "name", on: self, keyPath: \\.name)
                        }
                    }
                }

                private var _name: _PersistedSlot
                var startDate: Date {
                    @storageRestrictions(initializes: _startDate, accesses: modelState)
                    init(initialValue) {
                        modelState._initialize(initialValue, at: "startDate")
                        _startDate = _PersistedSlot()
                    }
                    get {
                        _$observationRegistrar.access(self, keyPath: \\.startDate)
                        return modelState._value(at: "startDate", of: Self.entityName)
                    }
                    set {
                        _$observationRegistrar.withMutation(of: self, keyPath: \\.startDate) {
                            modelState._set(newValue, at: "startDate", on: self, keyPath: \\.startDate)
                        }
                    }
                }

                private var _startDate: _PersistedSlot
                var stay: Stay? {
                    @storageRestrictions(initializes: _stay, accesses: modelState)
                    init(initialValue) {
                        modelState._initialize(initialValue, at: "stay")
                        _stay = _PersistedSlot()
                    }
                    get {
                        _$observationRegistrar.access(self, keyPath: \\.stay)
                        return modelState._value(at: "stay", of: Self.entityName)
                    }
                    set {
                        _$observationRegistrar.withMutation(of: self, keyPath: \\.stay) {
                            modelState._set(newValue, at: "stay", on: self, keyPath: \\.stay)
                        }
                    }
                }

                private var _stay: _PersistedSlot
                var isSelected: Bool = false
                var computed: Int { 1 }
                init() { name = ""; startDate = .now }

                public static let schemaProperties: [ModelProperty<Trip>] = [
                    ._persisted("name", \\Trip.name, options: [.preserveValueOnDeletion], originalName: "title"),
                    ._persisted("startDate", \\Trip.startDate),
                    ._persisted("stay", \\Trip.stay, deleteRule: .cascade, inverse: \\Stay.trip),
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
                    @storageRestrictions(initializes: _name, accesses: modelState)
                    init(initialValue) {
                        modelState._initialize(initialValue, at: "name")
                        _name = _PersistedSlot()
                    }
                    get {
                        _$observationRegistrar.access(self, keyPath: \\.name)
                        return modelState._value(at: "name", of: Self.entityName)
                    }
                    set {
                        _$observationRegistrar.withMutation(of: self, keyPath: \\.name) {
                            modelState._set(newValue, at: "name", on: self, keyPath: \\.name)
                        }
                    }
                }

                private var _name: _PersistedSlot
                init() { name = "" }

                static let schemaProperties: [ModelProperty<Trip>] = [
                    ._persisted("name", \\Trip.name),
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
