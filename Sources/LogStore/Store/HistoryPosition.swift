import Foundation
import LogStoreEngine

/// A position in a store's history for time travel: a full token (its store and check are
/// verified) or a bare log offset (only that a transaction record starts there is verified).
public enum HistoryPosition: Sendable, Hashable, CustomStringConvertible {
    /// A history token: its store, offset and check are all verified.
    case token(DefaultHistoryToken)
    /// A bare log offset where a transaction record must start.
    case offset(UInt64)

    /// The log offset the position names.
    public var offset: UInt64 {
        switch self {
        case .token(let token): token.offset
        case .offset(let offset): offset
        }
    }

    /// Parses the CLI form: the token's JSON (`{"v":1,"store":"<UUID>","offset":"<decimal>","check":<u32>}`)
    /// or a bare decimal offset. `nil` when it is neither.
    public init?(parsing text: String) {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if let offset = UInt64(trimmed) {
            self = .offset(offset)
        } else if let token = try? JSONDecoder().decode(DefaultHistoryToken.self, from: Data(trimmed.utf8)) {
            self = .token(token)
        } else {
            return nil
        }
    }

    /// `token at offset … (check …)` or `offset …`.
    public var description: String {
        switch self {
        case .token(let token): "token at offset \(token.offset) (check \(token.check))"
        case .offset(let offset): "offset \(offset)"
        }
    }
}
