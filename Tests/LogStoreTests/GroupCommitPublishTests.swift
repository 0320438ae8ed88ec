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

    /// Alone and in a store shared by writing processes (where the pending list also holds the
    /// records the turn caught up with, and saves go through the save writer).
    @Test(arguments: [false, true])
    func everySaveOfConcurrentSaversReturnsWithItsRecordPublished(allowsOtherWriters: Bool) throws {
        let temporary = TemporaryDirectory("group-commit-publish")
        defer { temporary.remove() }
        var configuration = LogStoreConfiguration(schema: Self.schema, directory: temporary.path, durability: .synchronous)
        configuration.allowsOtherWriters = allowsOtherWriters
        let store = try LogStore(configuration)
        defer { try? store.close() }
        let savers = 8
        let savesEach = 60
        let unpublished = Mutex<[String]>([])
        // Threads of their own: `concurrentPerform` runs as many at once as there are cores (2
        // here), too few to share a group commit.
        let done = DispatchGroup()
        for saver in 0..<savers {
            done.enter()
            Thread {
                defer { done.leave() }
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
            }.start()
        }
        done.wait()
        let missing = unpublished.withLock { $0 }
        #expect(missing.isEmpty, "\(missing.count) saves returned before their record was published: \(missing.prefix(5))")
        #expect(store.inner.withLock { $0.published.count(of: "Note") } == savers * savesEach)
        #expect(store.inner.withLock { $0.pending.isEmpty })
        // The path under test ran: some saves found their record published by another's
        // publication (8 saver threads share group commits on any machine).
        #expect(store.publicationsSkipped.load(ordering: .relaxed) > 0)
    }
}
