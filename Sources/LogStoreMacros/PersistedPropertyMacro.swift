import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxBuilder
import SwiftSyntaxMacros

/// `@_PersistedProperty` (added by `@Model` to each persisted property): the property becomes a
/// computed property over its peer `_name` slot (`_PersistedSlot<Type>`, the value typed and
/// stored in the instance), observable and tracked through the model's `ModelState`, with an
/// init accessor so that default values and the class's own initializers still set it (and the
/// compiler still checks that every initializer does); `init()` leaves the slots of properties
/// without an initial value empty, for a fetch to fill.
public struct PersistedPropertyMacro: AccessorMacro, PeerMacro {
    public static func expansion(
        of node: AttributeSyntax, providingAccessorsOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [AccessorDeclSyntax] {
        guard let variable = declaration.as(VariableDeclSyntax.self), let property = StoredProperty(variable),
              property.hasType
        else { return [] }
        let name = property.name
        return [
            """
            @storageRestrictions(initializes: _\(raw: name))
            init(initialValue) {
                _\(raw: name) = _PersistedSlot(initialValue)
            }
            """,
            """
            get {
                _$observationRegistrar.access(self, keyPath: \\.\(raw: name))
                return _\(raw: name).value ?? modelState._missingValue(at: \(literal: name), of: Self.entityName)
            }
            """,
            """
            set {
                _$observationRegistrar.withMutation(of: self, keyPath: \\.\(raw: name)) {
                    let old = _\(raw: name).value
                    _\(raw: name).value = newValue
                    modelState._didSet(at: \(literal: name), on: self, old: old, new: newValue)
                }
            }
            """,
        ]
    }

    public static func expansion(
        of node: AttributeSyntax, providingPeersOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        guard let variable = declaration.as(VariableDeclSyntax.self), let property = StoredProperty(variable),
              property.hasType
        else { return [] }
        return ["private var _\(raw: property.name): _PersistedSlot<\(raw: property.slotType)>"]
    }
}

/// `@Attribute`, `@Relationship`, `@Transient`, `#Unique` and `#Index` add nothing themselves:
/// `@Model` reads them from the class's syntax.
public struct MarkerMacro: PeerMacro, DeclarationMacro {
    public static func expansion(
        of node: AttributeSyntax, providingPeersOf declaration: some DeclSyntaxProtocol,
        in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        if let variable = declaration.as(VariableDeclSyntax.self), StoredProperty(variable) == nil,
           ["Attribute", "Relationship"].contains(node.attributeName.trimmedDescription) {
            // @Model says this too; outside a @Model class nobody else would.
            return []
        }
        return []
    }

    public static func expansion(
        of node: some FreestandingMacroExpansionSyntax, in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        []
    }
}

enum ModelDiagnostic: DiagnosticMessage {
    case notAClass
    case notAStoredProperty
    case attributeAndRelationship
    case needsExplicitType(String)
    case keyPathListExpected
    case unknownProperty(String, String)
    case notFinalClass
    case observerOnPersistedProperty(String)

    var message: String {
        switch self {
        case .notAClass: "@Model applies to a class; a struct, enum or actor cannot be a model"
        case .notAStoredProperty: "@Attribute and @Relationship apply to stored 'var' properties, not to computed ones"
        case .attributeAndRelationship: "a property is an attribute or a relationship, not both"
        case let .needsExplicitType(name): "the persisted property '\(name)' needs an explicit type, e.g. 'var \(name): String'"
        case .keyPathListExpected: "expected an array of key paths to properties, e.g. [\\.name, \\.startDate]"
        case let .unknownProperty(name, macro): "#\(macro) names '\(name)', which is not a persisted property of this model"
        case let .observerOnPersistedProperty(name):
            "willSet/didSet on the persisted property '\(name)' would never run (@Model makes it a computed "
                + "property); observe it with withObservationTracking, or mark it @Transient"
        case .notFinalClass:
            "@Model classes must be 'final': PersistentModel's requirements name 'Self' (schemaProperties: "
                + "[ModelProperty<Self>]), which a non-final class cannot satisfy, and model inheritance is not supported"
        }
    }

    var diagnosticID: MessageID {
        let id = switch self {
        case .notAClass: "notAClass"
        case .notAStoredProperty: "notAStoredProperty"
        case .attributeAndRelationship: "attributeAndRelationship"
        case .needsExplicitType: "needsExplicitType"
        case .keyPathListExpected: "keyPathListExpected"
        case .unknownProperty: "unknownProperty"
        case .notFinalClass: "notFinalClass"
        case .observerOnPersistedProperty: "observerOnPersistedProperty"
        }
        return MessageID(domain: "LogStoreMacros", id: id)
    }

    var severity: DiagnosticSeverity { .error }
}
