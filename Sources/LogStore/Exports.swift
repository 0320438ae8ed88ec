// `import LogStore` brings Foundation along, as `import SwiftData` does: ported code uses `Date`,
// `URL`, `#Predicate` and `SortDescriptor` without importing Foundation itself.
@_exported import Foundation
// `@Model` classes are `Observable`; their expansion names `Observation.ObservationRegistrar`.
@_exported import Observation
