import Foundation

/// A fresh path under the system's temporary directory for one test's store (or archive), removed
/// with everything below it by ``remove()`` or when the object goes away. The directory itself is
/// not created: stores create their directories, and some tests need a path that does not exist
/// yet.
///
/// ```swift
/// let temporary = TemporaryDirectory("readme"), directory = temporary.path
/// defer { temporary.remove() }
/// let container = try ModelContainer(for: Trip.self,
///                                    configurations: LogStoreConfiguration(directory: directory))
/// ```
public final class TemporaryDirectory: Sendable {
    /// The path, unique per instance: `<tmp>/logstore-<label>-<UUID>`.
    public let path: String

    public init(_ label: String = "test") {
        path =
            URL(fileURLWithPath: NSTemporaryDirectory())
            .appendingPathComponent("logstore-\(label)-\(UUID().uuidString)").path
    }

    deinit { remove() }

    /// `path/component`.
    public func appending(_ component: String) -> String { path + "/" + component }

    /// Removes the directory and everything in it (nothing if it does not exist).
    public func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}
