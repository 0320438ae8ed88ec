import ArgumentParser
import Foundation
import LogStore
import LogStoreEngine

extension DefaultHistoryToken {
    /// The D6 JSON form, keys in its order: `{"v":1,"store":"<UUID>","offset":"<decimal>","check":<u32>}`.
    var json: String { jsonString }
}

/// `--after`, `--through`, `--until`: a history token in its JSON form, or a bare log offset
/// (DECISIONS.md D6). A bare offset must be where a transaction record starts.
extension HistoryPosition {
    /// Parses the option's text; a usage error (exit code 64) when it is neither form.
    static func parse(_ text: String) throws -> HistoryPosition {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.hasPrefix("{") {
            do {
                return .token(try JSONDecoder().decode(DefaultHistoryToken.self, from: Data(trimmed.utf8)))
            } catch {
                throw ValidationError(
                    "'\(text)' is not a history token: expected "
                        + #"{"v":1,"store":"<UUID>","offset":"<decimal>","check":<u32>} ("# + Self.reason(error) + ").")
            }
        }
        guard let offset = UInt64(trimmed) else {
            throw ValidationError(
                "'\(text)' is not a position: give a history token's JSON form "
                    + #"({"v":1,"store":"<UUID>","offset":"<decimal>","check":<u32>}) or a bare decimal log offset."#)
        }
        return .offset(offset)
    }

    private static func reason(_ error: any Error) -> String {
        switch error as? DecodingError {
        case .keyNotFound(let key, _)?: "no \"\(key.stringValue)\" key"
        case .typeMismatch(_, let context)?, .valueNotFound(_, let context)?, .dataCorrupted(let context)?:
            (context.codingPath.last.map { "\"\($0.stringValue)\": " } ?? "") + context.debugDescription
        default: "\(error)"
        }
    }

    /// What the user typed, for messages.
    var text: String {
        switch self {
        case .token(let token): token.json
        case .offset(let offset): "offset \(offset)"
        }
    }

    /// The token this position names in the store in `directory`, read without the lock. A bare
    /// offset below the low-water mark L throws ``LogStoreError/historyTokenExpired(resumeToken:)``
    /// (L itself resolves to L); one that is not the start of a transaction record throws a
    /// ``CommandFailure`` naming the next transaction.
    func resolve(in directory: String) throws -> DefaultHistoryToken {
        let offset: UInt64
        switch self {
        case .token(let token): return token
        case .offset(let value): offset = value
        }
        let lowWaterMark = try LogStore.historyLowWaterMark(directory: directory)
        if let lowWaterMark {
            if offset == lowWaterMark.offset { return lowWaterMark }
            if offset < lowWaterMark.offset { throw LogStoreError.historyTokenExpired(resumeToken: lowWaterMark) }
        }
        let log: Log
        do { log = try Log.openReadOnly(directory: directory) } catch { throw LogStoreError.log(error) }
        defer { try? log.close() }
        let end = log.visibleEnd
        guard offset < end else {
            throw CommandFailure(
                message: "Offset \(offset) is not in the log of \(directory), which ends at offset \(end).")
        }
        guard offset >= log.startOffset else {
            throw CommandFailure(
                message: "Offset \(offset) lies in deleted history: the log of \(directory) starts at "
                    + "offset \(log.startOffset).")
        }
        var records = try log.records(from: offset)
        var next: UInt64?
        while let record = try records.next() {
            if record.offset == offset && record.type == .transaction {
                return DefaultHistoryToken(storeIdentifier: log.storeID, offset: offset, check: record.payloadCRC)
            }
            if record.type == .transaction && record.offset > offset {
                next = record.offset
                break
            }
        }
        throw CommandFailure(
            message: "Offset \(offset) is not the start of a transaction record in \(directory); "
                + (next.map { "the next transaction starts at offset \($0)" } ?? "no transaction starts after it")
                + " (`logstore history \(directory)` lists each transaction's token).")
    }
}

/// A timestamp in ISO 8601 (UTC) with microseconds: `2026-05-04T09:30:00.123456Z`.
func iso8601Microseconds(_ date: Date) -> String {
    let microseconds = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
    var seconds = microseconds / 1_000_000
    var fraction = microseconds % 1_000_000
    if fraction < 0 {
        seconds -= 1
        fraction += 1_000_000
    }
    let whole = Date(timeIntervalSince1970: Double(seconds)).formatted(.iso8601)  // …T09:30:00Z
    let digits = String(fraction)
    return whole.dropLast() + "." + String(repeating: "0", count: 6 - digits.count) + digits + "Z"
}
