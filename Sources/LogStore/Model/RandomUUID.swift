import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Random (version 4) UUIDs for primary keys and temporary identifiers (DECISIONS.md D5), without
/// a system call per UUID.
///
/// Foundation's `UUID()` on Linux opens, reads and closes `/dev/urandom` for every UUID (measured
/// here: ~12 µs, two per insert), and `SystemRandomNumberGenerator` makes one `getrandom` call
/// per 8 bytes (~1.5 µs each). This takes the bytes from the same kernel CSPRNG
/// (`arc4random_buf`, which glibc ≥ 2.36 serves with `getrandom`) in blocks of
/// `poolByteCount`, so one system call covers `poolByteCount / 16` UUIDs. Every byte is used once,
/// and a forked child never reuses its parent's pool (a fork handler bumps a generation).
enum RandomUUID {
    /// Bytes fetched per system call (256 UUIDs).
    static let poolByteCount = 4_096

    private struct Pool: ~Copyable {
        let bytes: UnsafeMutableRawBufferPointer
        var next: Int
        var generation: UInt64 = 0

        init() {
            bytes = .allocate(byteCount: RandomUUID.poolByteCount, alignment: 16)
            next = RandomUUID.poolByteCount
        }

        deinit { bytes.deallocate() }

        mutating func take(generation current: UInt64) -> uuid_t {
            if next == RandomUUID.poolByteCount || generation != current {
                RandomUUID.fill(bytes)
                next = 0
                generation = current
            }
            var value: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            withUnsafeMutableBytes(of: &value) {
                $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[next..<next + 16]))
            }
            // Zero the bytes handed out, so no copy of a key stays in the pool.
            UnsafeMutableRawBufferPointer(rebasing: bytes[next..<next + 16]).initializeMemory(
                as: UInt8.self, repeating: 0)
            next += 16
            return value
        }
    }

    // The critical section is a 16-byte copy (plus one system call per 256 UUIDs).
    private static let pool = Mutex(Pool())

    /// Bumped in a child process after `fork`, so that it draws fresh bytes instead of the
    /// parent's remaining ones.
    private static let forkGeneration = Atomic<UInt64>(0)
    private static let forkHandlerInstalled: Bool = {
        #if canImport(Glibc) || canImport(Darwin)
            return pthread_atfork(nil, nil, { RandomUUID.forkGeneration.add(1, ordering: .relaxed) }) == 0
        #else
            return false
        #endif
    }()

    /// A new random UUID: 122 random bits, version 4, RFC 4122 variant.
    static func make() -> UUID {
        _ = forkHandlerInstalled
        let generation = forkGeneration.load(ordering: .relaxed)
        var value = pool.withLock { $0.take(generation: generation) }
        value.6 = (value.6 & 0x0F) | 0x40
        value.8 = (value.8 & 0x3F) | 0x80
        return UUID(uuid: value)
    }

    private static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        #if canImport(Glibc) || canImport(Darwin)
            arc4random_buf(buffer.baseAddress!, buffer.count)
        #else
            var generator = SystemRandomNumberGenerator()
            for index in stride(from: 0, to: buffer.count, by: 8) {
                buffer.storeBytes(of: generator.next() as UInt64, toByteOffset: index, as: UInt64.self)
            }
        #endif
    }
}
