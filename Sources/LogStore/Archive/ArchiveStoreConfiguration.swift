import Foundation
import LogStoreEngine

/// Where an ``ArchiveStore`` keeps its JSON file.
///
/// ```swift
/// let configuration = ArchiveStoreConfiguration(name: "Trips", path: "/var/lib/trips.json")
/// let container = try ModelContainer(for: Trip.self, BucketListItem.self, configurations: configuration)
/// ```
public struct ArchiveStoreConfiguration: DataStoreConfiguration, Sendable {
    /// The store this configuration opens.
    public typealias Store = ArchiveStore

    /// The configuration's name (`"default"` unless given).
    public var name: String
    /// The schema to open with; ``ModelContainer`` sets it from its model types.
    public var schema: Schema?
    /// The JSON file holding the whole store (its directory is created when missing).
    public var fileURL: URL
    /// Whether a save returns only once the new file is durable: the temporary file is
    /// `fsync`ed before the rename and the directory after it (default). With `false` a save is
    /// still atomic (temporary file + rename), but a power cut may lose it — like the WWDC24
    /// sample's `Data.write(to:)`.
    public var isDurable: Bool
    /// What an insert colliding with a unique constraint does (see ``UniqueCollisionPolicy``).
    public var uniqueCollisionPolicy: UniqueCollisionPolicy = .upsert
    /// The file system the archive is read and written through (tests inject a simulated one).
    /// Not part of the configuration's identity (`==`, `hash`).
    public var fileSystem: any FileSystem = PosixFileSystem()

    /// An archive in the file at `fileURL`.
    public init(name: String = "default", schema: Schema? = nil, fileURL: URL, isDurable: Bool = true) {
        self.name = name
        self.schema = schema
        self.fileURL = fileURL
        self.isDurable = isDurable
    }

    /// An archive in the file at `path`.
    public init(name: String = "default", schema: Schema? = nil, path: String, isDurable: Bool = true) {
        self.init(name: name, schema: schema, fileURL: URL(fileURLWithPath: path), isDurable: isDurable)
    }

    /// The file's path.
    public var path: String { fileURL.standardizedFileURL.path }

    /// Equal when every option but the file system is equal.
    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.name == rhs.name && lhs.schema == rhs.schema && lhs.fileURL == rhs.fileURL && lhs.isDurable == rhs.isDurable
            && lhs.uniqueCollisionPolicy == rhs.uniqueCollisionPolicy
    }

    /// Hashes the name, file, durability and collision policy.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(fileURL)
        hasher.combine(isDurable)
        hasher.combine(uniqueCollisionPolicy)
    }
}
