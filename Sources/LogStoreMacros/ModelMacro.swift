import SwiftDiagnostics
import SwiftSyntax
import SwiftSyntaxBuilder
import SwiftSyntaxMacros

/// `@Model`: a class's stored `var`s become persisted properties, each over a typed peer slot
/// (`_name: _PersistedSlot<Type>`) and tracked through the model's `ModelState`, and the class
/// gets what `PersistentModel` and `Observable` need.
///
/// Macros see syntax, not types (DECISIONS.md D13): whether a property is an attribute or a
/// relationship is left to overload resolution of `ModelProperty._persisted` in the emitted
/// `schemaProperties`; what syntax alone can tell wrong is diagnosed here.
public struct ModelMacro: MemberMacro, MemberAttributeMacro, ExtensionMacro {
    // MARK: MemberMacro

    public static func expansion(
        of node: AttributeSyntax, providingMembersOf declaration: some DeclGroupSyntax,
        conformingTo protocols: [TypeSyntax], in context: some MacroExpansionContext
    ) throws -> [DeclSyntax] {
        guard let classDecl = declaration.as(ClassDeclSyntax.self) else {
            context.diagnose(Diagnostic(node: Syntax(node), message: ModelDiagnostic.notAClass))
            return []
        }
        if !classDecl.modifiers.contains(where: { $0.name.tokenKind == .keyword(.final) }) {
            context.diagnose(ModelDiagnostic.notFinal(classDecl))
        }
        let model = ModelDescription(classDecl, in: context)
        let access = model.accessPrefix
        let typeName = model.typeName

        let properties = model.persisted.map { property in
            "    ._persisted(\(property.name.literal), \\\(typeName).\(property.name)\(property.arguments), "
                + "slot: { $0._\(property.name).value }),"
        }.joined(separator: "\n")
        var members: [DeclSyntax] = [
            """
            \(raw: access)static let schemaProperties: [ModelProperty<\(raw: typeName)>] = [
            \(raw: properties)
            ]
            """,
            "\(raw: access)static let uniquenessConstraints: [[String]] = \(raw: model.uniqueConstraints.literal)",
            "\(raw: access)static let indexes: [[String]] = \(raw: model.indexes.literal)",
            "\(raw: access)static let _usesModelStorage = true",
            "\(raw: access)let modelState = ModelState()",
            "private let _$observationRegistrar = Observation.ObservationRegistrar()",
        ]
        if !model.declaresEmptyInit {
            // A property with an initial value has it already (its init accessor runs first).
            let slots = model.persisted.filter { !$0.hasInitialValue }.map { "_\($0.name) = _PersistedSlot()" }
                .joined(separator: "\n")
            members.append(
                """
                /// An empty instance, which a fetch fills property by property.
                \(raw: access)required init() {
                \(raw: slots)
                }
                """)
        }
        return members
    }

    // MARK: MemberAttributeMacro

    public static func expansion(
        of node: AttributeSyntax, attachedTo declaration: some DeclGroupSyntax,
        providingAttributesFor member: some DeclSyntaxProtocol, in context: some MacroExpansionContext
    ) throws -> [AttributeSyntax] {
        guard declaration.is(ClassDeclSyntax.self), let variable = member.as(VariableDeclSyntax.self),
              StoredProperty(variable) != nil, !variable.hasAttribute(named: "Transient"),
              !variable.hasAttribute(named: "_PersistedProperty")
        else { return [] }
        return ["@_PersistedProperty"]
    }

    // MARK: ExtensionMacro

    public static func expansion(
        of node: AttributeSyntax, attachedTo declaration: some DeclGroupSyntax,
        providingExtensionsOf type: some TypeSyntaxProtocol, conformingTo protocols: [TypeSyntax],
        in context: some MacroExpansionContext
    ) throws -> [ExtensionDeclSyntax] {
        guard declaration.is(ClassDeclSyntax.self) else { return [] }
        let extensionDecl: DeclSyntax = "extension \(type.trimmed): PersistentModel, Observation.Observable {}"
        return [extensionDecl.cast(ExtensionDeclSyntax.self)]
    }
}

/// What `@Model` read from the class: its persisted properties, constraints and indexes.
struct ModelDescription {
    struct Property {
        var name: String
        /// `, options: [...], deleteRule: ..., inverse: ..., originalName: ...` as written, and
        /// `, defaultValue: <initial value>` when the declaration has one (SwiftData's schema
        /// default: what stored models without a value get when the attribute is added or made required).
        var arguments: String
        /// Whether the declaration has an initial value (`var count: Int = 0`).
        var hasInitialValue: Bool
    }

    var typeName: String
    var accessPrefix: String
    var persisted: [Property] = []
    var uniqueConstraints: [[String]] = []
    var indexes: [[String]] = []
    var declaresEmptyInit = false

    init(_ classDecl: ClassDeclSyntax, in context: some MacroExpansionContext) {
        typeName = classDecl.name.trimmedDescription
        let modifiers = classDecl.modifiers.map(\.name.text)
        accessPrefix = modifiers.contains("public") || modifiers.contains("open") ? "public " : ""
        var freestanding: [MacroExpansionDeclSyntax] = []
        for member in classDecl.memberBlock.members {
            if let variable = member.decl.as(VariableDeclSyntax.self) {
                readProperty(variable, in: context)
            } else if let initializer = member.decl.as(InitializerDeclSyntax.self),
                      initializer.signature.parameterClause.parameters.isEmpty, initializer.optionalMark == nil {
                declaresEmptyInit = true
            } else if let expansion = member.decl.as(MacroExpansionDeclSyntax.self) {
                freestanding.append(expansion)
            }
        }
        let names = Set(persisted.map(\.name))
        for expansion in freestanding {
            switch expansion.macroName.text {
            case "Unique": uniqueConstraints += Self.keyPathLists(expansion, known: names, in: context)
            case "Index": indexes += Self.keyPathLists(expansion, known: names, in: context)
            default: continue
            }
        }
    }

    private mutating func readProperty(_ variable: VariableDeclSyntax, in context: some MacroExpansionContext) {
        let isTransient = variable.hasAttribute(named: "Transient")
        let attribute = variable.attribute(named: "Attribute")
        let relationship = variable.attribute(named: "Relationship")
        guard let stored = StoredProperty(variable) else {
            // Options on something that is not a stored var: say so rather than ignore them.
            if let marker = attribute ?? relationship {
                context.diagnose(Diagnostic(node: Syntax(marker), message: ModelDiagnostic.notAStoredProperty))
            }
            return
        }
        if isTransient { return }
        if attribute != nil && relationship != nil {
            context.diagnose(Diagnostic(node: Syntax(relationship!), message: ModelDiagnostic.attributeAndRelationship))
        }
        guard stored.hasType else {
            context.diagnose(Diagnostic(node: Syntax(variable), message: ModelDiagnostic.needsExplicitType(stored.name)))
            return
        }
        if case let .accessors(list)? = variable.bindings.first?.accessorBlock?.accessors, let observer = list.first {
            // The property becomes computed (get/set over its slot): an observer would never run.
            context.diagnose(
                Diagnostic(node: Syntax(observer), message: ModelDiagnostic.observerOnPersistedProperty(stored.name)))
        }
        var arguments = ""
        if let marker = attribute ?? relationship, let list = marker.arguments?.as(LabeledExprListSyntax.self) {
            var options: [String] = []
            for argument in list {
                if let label = argument.label?.text {
                    // Only what `_persisted` takes; the rest (counts, hash modifiers) is accepted and unused.
                    if ["deleteRule", "inverse", "originalName"].contains(label) {
                        arguments += ", \(label): \(argument.expression.trimmedDescription)"
                    }
                } else {
                    options.append(argument.expression.trimmedDescription)
                }
            }
            if !options.isEmpty { arguments = ", options: [\(options.joined(separator: ", "))]" + arguments }
        }
        if let initialValue = stored.initialValue { arguments += ", defaultValue: \(initialValue)" }
        persisted.append(Property(name: stored.name, arguments: arguments, hasInitialValue: stored.initialValue != nil))
    }

    /// The property names of each `[\.a, \.b]` list of a `#Unique`/`#Index`, diagnosing names that
    /// are not persisted properties.
    private static func keyPathLists(_ expansion: MacroExpansionDeclSyntax, known: Set<String>,
                                     in context: some MacroExpansionContext) -> [[String]] {
        var lists: [[String]] = []
        for argument in expansion.arguments {
            guard let array = argument.expression.as(ArrayExprSyntax.self) else {
                context.diagnose(Diagnostic(node: Syntax(argument.expression), message: ModelDiagnostic.keyPathListExpected))
                continue
            }
            var names: [String] = []
            for element in array.elements {
                guard let keyPath = element.expression.as(KeyPathExprSyntax.self), keyPath.components.count == 1,
                      let property = keyPath.components.first?.component.as(KeyPathPropertyComponentSyntax.self)
                else {
                    context.diagnose(Diagnostic(node: Syntax(element.expression), message: ModelDiagnostic.keyPathListExpected))
                    continue
                }
                let name = property.declName.baseName.text
                guard known.contains(name) else {
                    context.diagnose(Diagnostic(node: Syntax(element.expression),
                                                message: ModelDiagnostic.unknownProperty(name, expansion.macroName.text)))
                    continue
                }
                names.append(name)
            }
            if !names.isEmpty { lists.append(names) }
        }
        return lists
    }
}

/// A `var` with one identifier binding and no getter of its own: what `@Model` persists.
struct StoredProperty {
    var name: String
    var hasType: Bool
    /// The initializer expression, as written (`0` in `var count: Int = 0`).
    var initialValue: String?
    /// The type its slot holds, as written (`Int` in `var count: Int = 0`); an implicitly unwrapped
    /// optional `T!` is held as `T?` (`!` is not allowed in a generic argument).
    var slotType: String

    init?(_ variable: VariableDeclSyntax) {
        guard variable.bindingSpecifier.tokenKind == .keyword(.var), variable.bindings.count == 1,
              let binding = variable.bindings.first,
              let identifier = binding.pattern.as(IdentifierPatternSyntax.self),
              !variable.modifiers.contains(where: { ["static", "class", "lazy"].contains($0.name.text) })
        else { return nil }
        if let accessors = binding.accessorBlock?.accessors {
            // A computed property (a getter, or get/set) is not stored; willSet/didSet are.
            switch accessors {
            case .getter: return nil
            case let .accessors(list):
                let kinds = list.map(\.accessorSpecifier.text)
                if kinds.contains(where: { !["willSet", "didSet"].contains($0) }) { return nil }
            }
        }
        name = identifier.identifier.text
        hasType = binding.typeAnnotation != nil
        if let type = binding.typeAnnotation?.type {
            if let unwrapped = type.as(ImplicitlyUnwrappedOptionalTypeSyntax.self) {
                slotType = unwrapped.wrappedType.trimmedDescription + "?"
            } else {
                slotType = type.trimmedDescription
            }
        } else {
            slotType = ""
        }
        initialValue = binding.initializer?.value.trimmedDescription
    }
}

extension VariableDeclSyntax {
    func attribute(named name: String) -> AttributeSyntax? {
        attributes.lazy.compactMap { $0.as(AttributeSyntax.self) }.first {
            $0.attributeName.trimmedDescription == name || $0.attributeName.trimmedDescription.hasSuffix(".\(name)")
        }
    }

    func hasAttribute(named name: String) -> Bool { attribute(named: name) != nil }
}

extension String {
    /// As a Swift string literal.
    var literal: String { "\"" + self + "\"" }
}

extension Array where Element == [String] {
    /// As a Swift literal: `[["a", "b"], ["c"]]`.
    var literal: String { "[" + map { "[" + $0.map(\.literal).joined(separator: ", ") + "]" }.joined(separator: ", ") + "]" }
}
