import Foundation
import LogStoreEngine

/// SwiftData's `ModelConfiguration`: LogStore's configuration under SwiftData's name and
/// initializers, so `ModelConfiguration(isStoredInMemoryOnly: true)` and
/// `ModelContainer(for: Trip.self)` work as they do with SwiftData.
///
/// ```swift
/// let container = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(url: storeURL))
/// let preview = try ModelContainer(for: Trip.self, configurations: ModelConfiguration(isStoredInMemoryOnly: true))
/// ```
public typealias ModelConfiguration = LogStoreConfiguration

extension LogStoreConfiguration {
    /// A store in the default location — `$XDG_DATA_HOME/<program>/<name>.store` (by default
    /// `~/.local/share/<program>/default.store`) — or, with `isStoredInMemoryOnly`, a store in a
    /// fresh directory of its own in memory (`/dev/shm` where it exists), without `fdatasync`,
    /// removed when the store closes. With `allowsSave: false`, saves throw.
    public init(_ name: String? = nil, schema: Schema? = nil, isStoredInMemoryOnly: Bool = false, allowsSave: Bool = true) {
        let name = name ?? "default"
        let directory = isStoredInMemoryOnly ? Self.inMemoryDirectory(name) : Self.defaultDirectory(name)
        self.init(name: name, schema: schema, directory: directory, durability: isStoredInMemoryOnly ? .none : .synchronous)
        self.isStoredInMemoryOnly = isStoredInMemoryOnly
        self.allowsSave = allowsSave
    }

    /// A store in the directory at `url` (created when missing).
    public init(_ name: String? = nil, schema: Schema? = nil, url: URL, allowsSave: Bool = true) {
        self.init(name: name ?? "default", schema: schema, directory: url.standardizedFileURL.path)
        self.allowsSave = allowsSave
    }

    /// The store directory, as a file URL.
    public var url: URL { URL(fileURLWithPath: directory, isDirectory: true) }

    /// `$XDG_DATA_HOME` (or `~/.local/share`) `/<program>/<name>.store`.
    static func defaultDirectory(_ name: String) -> String {
        let environment = ProcessInfo.processInfo.environment
        let base = environment["XDG_DATA_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? (NSHomeDirectory() + "/.local/share")
        return base + "/" + ProcessInfo.processInfo.processName + "/" + name + ".store"
    }

    /// A new directory path in memory-backed storage where there is some.
    static func inMemoryDirectory(_ name: String) -> String {
        var isDirectory: ObjCBool = false
        let base = FileManager.default.fileExists(atPath: "/dev/shm", isDirectory: &isDirectory) && isDirectory.boolValue
            ? "/dev/shm" : NSTemporaryDirectory()
        return base + "/logstore-memory-\(name)-\(UUID().uuidString)"
    }
}
