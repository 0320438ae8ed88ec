import Foundation
import LogStoreEngine

// Added for LogStorePostgres (issue 16): a reader without the model types needs the value types
// of the stored schema to build and extend PostgreSQL tables; `StoreState` carries names only.

extension LogStore {
    /// The schema the store in `directory` stores — entity names, attribute and relationship
    /// names and value types, read-only and without the writer's lock (like
    /// ``fetchHistory(directory:fileSystem:_:)``) — or `nil` when it stores none yet.
    ///
    /// Options, unique constraints and delete rules live in code, not in the store (DECISIONS.md
    /// D5): every relationship comes back with the nullify rule, every attribute without options.
    /// Tables only grow, so a schema read later covers every transaction read earlier.
    ///
    /// ```swift
    /// if let schema = try LogStore.storedSchema(directory: "/var/lib/trips") {
    ///     for entity in schema.entities { print(entity.name, entity.properties.map(\.valueType)) }
    /// }
    /// ```
    public static func storedSchema(directory: String, fileSystem: any FileSystem = PosixFileSystem()) throws
        -> Schema? {
        try StoreReader.withReadOnlyStore(directory: directory, fileSystem: fileSystem) { store throws(LogStoreError) in
            try store.historyReader().table.storedSchema
        }
    }
}
