import SwiftDiagnostics
import SwiftSyntax

extension ModelDiagnostic {
    /// `@Model` on a class that is not `final`, with a fix-it that adds `final`.
    static func notFinal(_ classDecl: ClassDeclSyntax) -> Diagnostic {
        var modifiers = classDecl.modifiers
        var changes: [FixIt.Change] = []
        if modifiers.isEmpty {
            // `final` goes where `class` starts (after the line break that follows `@Model`).
            let keyword = classDecl.classKeyword
            modifiers.append(DeclModifierSyntax(name: .keyword(.final, leadingTrivia: keyword.leadingTrivia), trailingTrivia: .space))
            changes.append(.replaceLeadingTrivia(token: keyword, newTrivia: []))
        } else {
            modifiers.append(DeclModifierSyntax(name: .keyword(.final), trailingTrivia: .space))
        }
        changes.insert(.replace(oldNode: Syntax(classDecl.modifiers), newNode: Syntax(modifiers)), at: 0)
        return Diagnostic(
            node: Syntax(classDecl.classKeyword), message: ModelDiagnostic.notFinalClass,
            fixIt: FixIt(message: AddFinalFixIt(), changes: changes))
    }
}

/// The fix-it of ``ModelDiagnostic/notFinalClass``.
struct AddFinalFixIt: FixItMessage {
    var message: String { "Add 'final'" }
    var fixItID: MessageID { MessageID(domain: "LogStoreMacros", id: "addFinal") }
}
