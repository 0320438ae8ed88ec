import SwiftCompilerPlugin
import SwiftSyntaxMacros

/// The compiler plugin that serves LogStore's model macros.
@main
struct LogStoreMacrosPlugin: CompilerPlugin {
    let providingMacros: [any Macro.Type] = [ModelMacro.self, PersistedPropertyMacro.self, MarkerMacro.self]
}
