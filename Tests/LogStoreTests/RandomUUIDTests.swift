import Foundation
import LogStoreTestSupport
import Testing

@testable import LogStore

/// Primary keys come from `RandomUUID` (D5: random UUIDs, never a counter), drawn in blocks from
/// the kernel's CSPRNG.
@Suite struct RandomUUIDTests {
    @Test func keysAreVersion4WithTheRFC4122Variant() {
        for _ in 0..<1_000 {
            let uuid = RandomUUID.make().uuid
            #expect(uuid.6 >> 4 == 4)
            #expect(uuid.8 >> 6 == 0b10)
        }
    }

    /// Several pool refills from several threads: no key handed out twice, and the random bits
    /// are not constant (a stuck or unfilled pool would give zeros).
    @Test func keysAreDistinctAcrossRefillsAndThreads() async {
        let perTask = RandomUUID.poolByteCount / 16 * 3 + 7
        let keys = await withTaskGroup(of: [UUID].self) { group in
            for _ in 0..<4 { group.addTask { (0..<perTask).map { _ in RandomUUID.make() } } }
            var all: [UUID] = []
            for await keys in group { all += keys }
            return all
        }
        #expect(Set(keys).count == keys.count)
        let zeroBytes = keys.reduce(0) { count, key in
            count + withUnsafeBytes(of: key.uuid) { $0.filter { $0 == 0 }.count }
        }
        // 14 fully random bytes per key: about 1 in 256 is zero.
        #expect(Double(zeroBytes) < Double(keys.count * 14) / 256 * 2 + 20)
    }

    @Test func savesMintDistinctPermanentKeys() throws {
        let schema = Schema([Schema.Entity("Item", attributes: [.init("n", .int)])])
        let temporary = TemporaryDirectory("random-uuid")
        let directory = temporary.path
        defer { temporary.remove() }
        let store = try LogStore(LogStoreConfiguration(schema: schema, directory: directory, durability: .none))
        defer { try? store.close() }
        var request = DataStoreSaveChangesRequest<DefaultSnapshot>()
        for n in 0..<600 {
            request.inserted.append(
                DefaultSnapshot(persistentIdentifier: .temporary(entityName: "Item"), values: ["n": .int(Int64(n))]))
        }
        let result = try store.save(request)
        let permanent = Set(result.remappedIdentifiers.values.map(\.primaryKey))
        #expect(permanent.count == 600)
        #expect(Set(request.inserted.map(\.persistentIdentifier.primaryKey)).isDisjoint(with: permanent))
    }
}
