import Foundation
import LogStoreEngine
import Testing

@testable import LogStore

/// `LogStoreError` is matched by code and by family, carries where it applies as fields, and
/// reports corruption one way whether the log or a payload decoder found it.
@Suite struct LogStoreErrorTests {
    static let identifier = try! PersistentIdentifier.identifier(
        for: UUID().uuidString, entityName: "Trip", primaryKey: UUID())

    @Test func aCatchClauseMatchesByCode() {
        func refuse() throws { throw LogStoreError.modelNotFound(Self.identifier) }
        var matched = false
        do { try refuse() } catch LogStoreError.modelNotFound { matched = true } catch { Issue.record("\(error)") }
        #expect(matched)
    }

    @Test func aTypedThrowMatchesByCodeToo() {
        func refuse() throws(LogStoreError) { throw .unknownConsumer("sync") }
        var matched = false
        do { try refuse() } catch LogStoreError.unknownConsumer { matched = true } catch { Issue.record("\(error)") }
        #expect(matched)
    }

    @Test func aCatchClauseMatchesByFamily() {
        let errors: [(LogStoreError, LogStoreError.Family)] = [
            (.schemaMismatch(entity: "Trip", attribute: "name", reason: "retyped"), .schema),
            (.modelNotFound(Self.identifier), .invalidSave),
            (
                .uniqueConstraintViolation(entity: "Trip", constraint: ["name"], values: [.string("Lisbon")]),
                .invalidSave
            ),
            (.historyPositionPastEnd(offset: 9, end: 8), .history),
            (.corruptRecord(offset: 42, reason: "bad varint"), .corruption),
            (.log(LogError(.corruption, "bad CRC", file: "/s/00000000000000000000.log", offset: 42)), .corruption),
            (.log(LogError(.locked, "held by 12@host")), .storage),
            (.unsupportedFeature("no"), .unsupported),
        ]
        for (error, family) in errors {
            #expect(error.family == family, "\(error.code)")
            var matched = false
            do { throw error } catch family { matched = true } catch { Issue.record("\(error)") }
            #expect(matched, "\(error.code) as \(family)")
        }
    }

    @Test func corruptionIsOneCodeWhicheverLayerFoundIt() {
        let decoded = LogStoreError.corruptRecord(offset: 42, reason: "bad varint")
        let logged = LogStoreError.log(
            LogError(.corruption, "bad CRC", file: "/s/00000000000000000000.log", offset: 42))
        #expect(decoded.code == .corruption)
        #expect(logged.code == .corruption)
        #expect(decoded.offset == 42 && logged.offset == 42)
        #expect(logged.file == "/s/00000000000000000000.log")
        #expect(logged.underlying?.code == .corruption)
    }

    @Test func theFieldsSayWhereTheErrorApplies() {
        let expired = LogStoreError.historyTokenExpired(
            resumeToken: DefaultHistoryToken(storeIdentifier: UUID(), offset: 7, check: 1))
        #expect(expired.resumeToken?.offset == 7)
        #expect(expired.message.contains("token > resumeToken"))
        let denied = LogStoreError.deleteDenied(Self.identifier, relationship: "trips", related: Self.identifier)
        #expect(denied.entity == "Trip")
        #expect(denied.attribute == "trips")
        #expect(denied.identifier == Self.identifier)
        let beyond = LogStoreError.historyTokenBeyondEnd(
            DefaultHistoryToken(storeIdentifier: UUID(), offset: 90, check: 1), end: 80)
        #expect(beyond.code == .historyPositionPastEnd)
        #expect(beyond.token?.offset == 90)
    }

    @Test func aCodeNewToTheCallerStillMatchesItsFamilyAndPrints() {
        let future = LogStoreError(LogStoreError.Code(rawValue: "somethingNew"), "Something new happened.")
        #expect(future.family == .storage)
        #expect(future.description == "Something new happened.")
        #expect(future.code.description == "somethingNew")
    }
}
