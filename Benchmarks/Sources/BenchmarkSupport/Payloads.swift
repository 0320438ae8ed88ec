/// Deterministic benchmark payloads: every suite and every peer writes the same bytes.
public struct Payloads: Sendable {
    public let records: [[UInt8]]

    /// 1,024 records of 200 pseudo-random bytes (incompressible: LZ4 finds nothing).
    public static let standard = Payloads(count: 1_024, byteCount: 200, seed: 0x4C6F_6753_746F_7265)

    /// 1,024 text records of about 200 bytes (JSON-like lines over a small vocabulary), for what
    /// LZ4 does with compressible data.
    public static let text: Payloads = {
        var generator = SplitMix64(seed: 0x5465_7874)
        let words = [
            "order", "customer", "shipped", "pending", "total", "item", "quantity", "price", "warehouse",
            "north", "south", "express", "standard", "invoice", "paid", "refund", "note", "gift",
        ]
        let records = (0..<1_024).map { index -> [UInt8] in
            var line = "{\"id\":\(100_000 + index),\"status\":\"\(words[Int(generator.next() % 18)])\",\"lines\":["
            while line.utf8.count < 170 {
                line +=
                    "{\"sku\":\(generator.next() % 10_000),\"\(words[Int(generator.next() % 18)])\":\(generator.next() % 100)},"
            }
            line += "\"note\":\"\(words[Int(generator.next() % 18)])\"]}"
            return Array(line.utf8.prefix(200))
        }
        return Payloads(records: records)
    }()

    public init(records: [[UInt8]]) {
        self.records = records
    }

    public init(count: Int, byteCount: Int, seed: UInt64) {
        var generator = SplitMix64(seed: seed)
        records = (0..<count).map { _ in (0..<byteCount).map { _ in UInt8(truncatingIfNeeded: generator.next()) } }
    }

    /// The payload for operation `index` (cycling).
    @inline(__always)
    public subscript(index: Int) -> [UInt8] { records[index % records.count] }

    /// `count` blocks of `byteCount` bytes cut from the concatenated records.
    public func blocks(count: Int, byteCount: Int) -> [[UInt8]] {
        let stream = records.flatMap { $0 }
        return (0..<count).map { block in
            (0..<byteCount).map { stream[(block * byteCount + $0) % stream.count] }
        }
    }
}

/// SplitMix64: a tiny seeded generator, so payloads are the same in every run.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
