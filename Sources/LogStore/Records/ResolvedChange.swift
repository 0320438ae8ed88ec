import Foundation

/// One effect of a save, as recorded in its transaction record (DECISIONS.md D5): permanent
/// identifiers only; an upsert is an update; every cascaded delete and nullified reference is its
/// own change. Replay applies these and nothing else.
public enum ResolvedChange: Sendable, Hashable {
    /// A new model with all its values.
    case insert(PersistentIdentifier, [String: AttributeValue])
    /// Changed values of an existing model (only the changed ones).
    case update(PersistentIdentifier, [String: AttributeValue])
    /// A deleted model, with the values of its `.preserveValueOnDeletion` properties.
    case delete(PersistentIdentifier, tombstone: [String: AttributeValue])

    /// The model the change is about.
    public var identifier: PersistentIdentifier {
        switch self {
        case .insert(let identifier, _), .update(let identifier, _), .delete(let identifier, _): identifier
        }
    }
}
