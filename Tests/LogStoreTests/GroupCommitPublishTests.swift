import Foundation
import Synchronization
import LogStoreEngine
import LogStoreTestSupport
import Testing

@testable import LogStore

/// A durable save returns with its record published — also when the publication that took it was
/// another save's (a group commit's first waiter to publish takes every record its fdatasync
/// covered, and the others return without taking the store's lock again).
@Suite struct GroupCommitPublishTests {
    static let schema = Schema([Schema.Entity("Note", attributes: [.init("text", .string)])])

    @Test func everySaveOfConcurrentSaversReturnsWithItsRecordPublished() throws {
        let temporary = TemporaryDirectory("group-commit-publish")
        defer { temporary.remove() }
        let store = try LogStore(
            LogStoreConfiguration(schema: Self.schema, directory: temporary.path, durability: .synchronous))
        defer { try? store.close() }
        let savers = 8
        let savesEach = 60
        let unpublished = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: savers) { saver in
            for index in 0..<savesEach {
                var request = DataStoreSaveChangesRequest<DefaultSnapshot>()
                request.inserted = [
                    DefaultSnapshot(
                        persistentIdentifier: .temporary(entityName: "Note"), values: ["text": .string("\(saver)-\(index)")])
                ]
                do {
                    let result = try store.save(request)
                    let identifier = result.remappedIdentifiers.values.first!
                    if !store.inner.withLock({ $0.published.contains(identifier) }) {
                        unpublished.withLock { $0.append("saver \(saver) save \(index)") }
                    }
                } catch {
                    unpublished.withLock { $0.append("saver \(saver) save \(index) threw \(error)") }
                }
            }
        }
        let missing = unpublished.withLock { $0 }
        #expect(missing.isEmpty, "\(missing.count) saves returned before their record was published: \(missing.prefix(5))")
        #expect(store.inner.withLock { $0.published.count(of: "Note") } == savers * savesEach)
        #expect(store.inner.withLock { $0.pending.isEmpty })
    }
}
