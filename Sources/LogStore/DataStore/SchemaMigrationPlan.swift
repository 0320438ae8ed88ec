import Foundation

extension Schema {
    /// A schema's version (SwiftData's `Schema.Version`): `Schema.Version(1, 0, 0)`. A store
    /// migrated through a ``SchemaMigrationPlan`` records the version it is at.
    public struct Version: Hashable, Comparable, Codable, Sendable, CustomStringConvertible {
        /// The first number of `major.minor.patch`.
        public var major: Int
        /// The second number.
        public var minor: Int
        /// The third number.
        public var patch: Int

        /// `Schema.Version(1, 0, 0)`.
        public init(_ major: Int, _ minor: Int, _ patch: Int) {
            self.major = major
            self.minor = minor
            self.patch = patch
        }

        /// Ordered by major, then minor, then patch.
        public static func < (lhs: Version, rhs: Version) -> Bool {
            (lhs.major, lhs.minor, lhs.patch) < (rhs.major, rhs.minor, rhs.patch)
        }

        /// `"1.0.0"`.
        public var description: String { "\(major).\(minor).\(patch)" }
    }

    /// The schema of a versioned schema's models (SwiftData's `Schema(versionedSchema:)`).
    public init(versionedSchema: any VersionedSchema.Type) {
        self.init(versionedSchema.models)
    }
}

/// One version of an app's models (SwiftData's `VersionedSchema`): the model types as they were
/// declared in that version, usually nested in the conforming enum.
///
/// ```swift
/// enum TripsSchemaV1: VersionedSchema {
///     static let versionIdentifier = Schema.Version(1, 0, 0)
///     static var models: [any PersistentModel.Type] { [Trip.self] }
///     @Model final class Trip { var name: String; init(name: String) { self.name = name } }
/// }
/// ```
public protocol VersionedSchema {
    /// This version's number; a store migrated to it records it.
    static var versionIdentifier: Schema.Version { get }
    /// The model types of this version (those their relationships reach are found too).
    static var models: [any PersistentModel.Type] { get }
}

/// How a store moves from one schema version to the next (SwiftData's `SchemaMigrationPlan`):
/// the versions oldest first, and one stage from each version to the next. Pass it to
/// ``ModelContainer/init(for:migrationPlan:configurations:)-(_,_,Configuration...)``; on open the
/// store runs the stages from the version it records to the container's.
///
/// In a ``LogStore`` each stage is recorded in the log as a schema record naming the version and
/// the mapping (renamed, removed and filled attributes, removed entities), so replay, time
/// travel and history read exactly across it (docs/FORMAT.md §7.1).
public protocol SchemaMigrationPlan {
    /// Every version, oldest first.
    static var schemas: [any VersionedSchema.Type] { get }
    /// One stage from each version to a later one (usually the next).
    static var stages: [MigrationStage] { get }
}

/// One step of a ``SchemaMigrationPlan`` (SwiftData's `MigrationStage`).
public enum MigrationStage: @unchecked Sendable {
    // @unchecked: the closures are called once, during the open that runs the stage, on the
    // thread that opens the store.

    /// A change the store makes by itself: attributes and entities added or removed, attributes
    /// renamed (`@Attribute(originalName:)`), an optional attribute made required (models without
    /// a value get the attribute's default value).
    case lightweight(fromVersion: any VersionedSchema.Type, toVersion: any VersionedSchema.Type)
    /// A lightweight change with code around it: `willMigrate` gets a context on the old
    /// version's models, `didMigrate` one on the new version's (where it may fill a new required
    /// attribute). Each saves as an ordinary transaction whose author names the stage
    /// (``MigrationStage/author(from:to:phase:)``). A new required attribute without a default
    /// reads as a placeholder (`0`, `""`, `false`…) in `didMigrate` until it is set; every stored
    /// model must get a value, or the open throws `schemaMismatch` and the stage writes nothing.
    /// `willMigrate`'s saves commit before the schema changes: if the open fails after them, the
    /// store is at the old version with those saves, and the next open runs the stage again.
    case custom(
        fromVersion: any VersionedSchema.Type, toVersion: any VersionedSchema.Type,
        willMigrate: ((ModelContext) throws -> Void)?, didMigrate: ((ModelContext) throws -> Void)?)

    /// The version the stage starts from.
    public var fromVersion: any VersionedSchema.Type {
        switch self {
        case .lightweight(let from, _), .custom(let from, _, _, _): from
        }
    }

    /// The version the stage ends at.
    public var toVersion: any VersionedSchema.Type {
        switch self {
        case .lightweight(_, let to), .custom(_, let to, _, _): to
        }
    }

    /// The author of a custom stage's transactions: `"LogStore migration 1.0.0 → 2.0.0
    /// (willMigrate)"`, so history can tell them from the app's own saves.
    public static func author(from: Schema.Version, to: Schema.Version, phase: String) -> String {
        "LogStore migration \(from) → \(to) (\(phase))"
    }
}
