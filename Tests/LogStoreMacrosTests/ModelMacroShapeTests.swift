import LogStoreMacros
import SwiftSyntaxMacros
import SwiftSyntaxMacrosTestSupport
import XCTest

/// More of what `@Model`, `@Relationship`, `#Unique` and `#Index` expand to and refuse: non-final
/// classes, to-many relationships with inverses, several constraints, and the key paths
/// `#Unique`/`#Index` cannot use.
final class ModelMacroShapeTests: XCTestCase {
    let macros: [String: any Macro.Type] = [
        "Model": ModelMacro.self, "_PersistedProperty": PersistedPropertyMacro.self,
        "Attribute": MarkerMacro.self, "Relationship": MarkerMacro.self, "Transient": MarkerMacro.self,
        "Unique": MarkerMacro.self, "Index": MarkerMacro.self,
    ]

    /// The members every expansion ends with, after `schemaProperties`.
    func tail(_ type: String, unique: String = "[]", indexes: String = "[]", emptyInit: String? = "") -> String {
        var text = "\n" + """

                static let uniquenessConstraints: [[String]] = \(unique)

                static let indexes: [[String]] = \(indexes)

                static let _usesModelStorage = true

                let modelState = ModelState()

                private let _$observationRegistrar = Observation.ObservationRegistrar()
            """
        if let emptyInit {
            text += """


                    /// An empty instance, which a fetch fills property by property.
                    required init() {
                \(emptyInit)
                    }
                """
        }
        return text + """

            }

            extension \(type): PersistentModel, Observation.Observable {
            }
            """
    }

    func testANonFinalClassIsAnErrorWithAFixIt() {
        assertMacroExpansion(
            """
            @Model
            class Note {
            }
            """,
            expandedSource: """
            class Note {

                static let schemaProperties: [ModelProperty<Note>] = [

                ]
            """ + tail("Note"),
            diagnostics: [
                DiagnosticSpec(
                    message: "@Model classes must be 'final': PersistentModel's requirements name 'Self' (schemaProperties: "
                        + "[ModelProperty<Self>]), which a non-final class cannot satisfy, and model inheritance is not supported",
                    line: 2, column: 1, fixIts: [FixItSpec(message: "Add 'final'")])
            ],
            macros: macros,
            applyFixIts: ["Add 'final'"],
            fixedSource: """
            @Model
            final class Note {
            }
            """)
    }

    func testAToManyRelationshipWithItsInverseAndSeveralConstraints() {
        assertMacroExpansion(
            """
            @Model
            final class Trip {
                #Unique<Trip>([\\.name, \\.start], [\\.code])
                var name: String
                var start: Date
                @Attribute(.unique) var code: String
                @Relationship(deleteRule: .cascade, inverse: \\Item.trip) var items: [Item] = []
                init(name: String) { self.name = name; start = .now; code = name }
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
                var start: Date {
                    @storageRestrictions(initializes: _start)
                    init(initialValue) {
                        _start = _PersistedSlot(initialValue)
                    }
                    get {
                        _$observationRegistrar.access(self, keyPath: \\.start)
                        return _start.value ?? modelState._missingValue(at: "start", of: Self.entityName)
                    }
                    set {
                        _$observationRegistrar.withMutation(of: self, keyPath: \\.start) {
                            let old = _start.value
                            _start.value = newValue
                            modelState._didSet(at: "start", on: self, old: old, new: newValue)
                        }
                    }
                }

                private var _start: _PersistedSlot<Date>
                var code: String {
                    @storageRestrictions(initializes: _code)
                    init(initialValue) {
                        _code = _PersistedSlot(initialValue)
                    }
                    get {
                        _$observationRegistrar.access(self, keyPath: \\.code)
                        return _code.value ?? modelState._missingValue(at: "code", of: Self.entityName)
                    }
                    set {
                        _$observationRegistrar.withMutation(of: self, keyPath: \\.code) {
                            let old = _code.value
                            _code.value = newValue
                            modelState._didSet(at: "code", on: self, old: old, new: newValue)
                        }
                    }
                }

                private var _code: _PersistedSlot<String>
                var items: [Item] {
                    @storageRestrictions(initializes: _items)
                    init(initialValue) {
                        _items = _PersistedSlot(initialValue)
                    }
                    get {
                        _$observationRegistrar.access(self, keyPath: \\.items)
                        return _items.value ?? modelState._missingValue(at: "items", of: Self.entityName)
                    }
                    set {
                        _$observationRegistrar.withMutation(of: self, keyPath: \\.items) {
                            let old = _items.value
                            _items.value = newValue
                            modelState._didSet(at: "items", on: self, old: old, new: newValue)
                        }
                    }
                }

                private var _items: _PersistedSlot<[Item]>
                init(name: String) { self.name = name; start = .now; code = name }

                static let schemaProperties: [ModelProperty<Trip>] = [
                    ._persisted("name", \\Trip.name, slot: {
                            $0._name.value
                        }),
                    ._persisted("start", \\Trip.start, slot: {
                            $0._start.value
                        }),
                    ._persisted("code", \\Trip.code, options: [.unique], slot: {
                            $0._code.value
                        }),
                    ._persisted("items", \\Trip.items, deleteRule: .cascade, inverse: \\Item.trip, defaultValue: [], slot: {
                            $0._items.value
                        }),
                ]
            """ + tail("Trip", unique: #"[["name", "start"], ["code"]]"#, emptyInit: """
                    _name = _PersistedSlot()
                    _start = _PersistedSlot()
                    _code = _PersistedSlot()
            """),
            macros: macros)
    }

    func testUniqueAndIndexAloneExpandToNothing() {
        assertMacroExpansion(
            """
            #Unique<Trip>([\\.name])
            #Index<Trip>([\\.name], [\\.start])
            """,
            expandedSource: "",
            macros: macros)
    }

    func testIndexKeyPathsMustNamePersistedPropertiesDirectly() {
        assertMacroExpansion(
            """
            @Model
            final class Trip {
                #Index<Trip>([\\.name.count], [\\.cache], [\\.label])
                var name: String
                @Transient var cache: Int = 0
                var label: String { name }
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
                var cache: Int = 0
                var label: String { name }
                init() { name = "" }

                static let schemaProperties: [ModelProperty<Trip>] = [
                    ._persisted("name", \\Trip.name, slot: {
                            $0._name.value
                        }),
                ]
            """ + tail("Trip", emptyInit: nil),
            diagnostics: [
                DiagnosticSpec(message: "expected an array of key paths to properties, e.g. [\\.name, \\.startDate]",
                               line: 3, column: 19),
                DiagnosticSpec(message: "#Index names 'cache', which is not a persisted property of this model",
                               line: 3, column: 35),
                DiagnosticSpec(message: "#Index names 'label', which is not a persisted property of this model",
                               line: 3, column: 46),
            ],
            macros: macros)
    }

    func testARelationshipOnAComputedPropertyIsAnError() {
        assertMacroExpansion(
            """
            @Model
            final class Trip {
                @Relationship(deleteRule: .cascade) var first: Item? { nil }
            }
            """,
            expandedSource: """
            final class Trip {
                var first: Item? { nil }

                static let schemaProperties: [ModelProperty<Trip>] = [

                ]
            """ + tail("Trip"),
            diagnostics: [
                DiagnosticSpec(message: "@Attribute and @Relationship apply to stored 'var' properties, not to computed ones",
                               line: 3, column: 5)
            ],
            macros: macros)
    }
}
