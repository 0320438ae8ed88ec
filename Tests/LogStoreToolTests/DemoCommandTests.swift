import Foundation
import LogStore
import Testing

@testable import logstore

/// `logstore demo`: twice in the same directory, with the history part each time.
@Suite struct DemoCommandTests {
    @Test func theDemoRunsTwiceInTheSameDirectory() throws {
        let store = TemporaryStore()
        for round in 1...2 {
            var lines: [String] = []
            try TripsTour(directory: store.directory).run { lines.append($0) }
            #expect(lines.first?.hasPrefix("LogStore tour, round \(round):") == true)
            let saved = try #require(lines.first { $0.hasPrefix("history the app saves its token: ") })
            let tokenJSON = String(saved.dropFirst("history the app saves its token: ".count))
            let token = try JSONDecoder().decode(DefaultHistoryToken.self, from: Data(tokenJSON.utf8))
            #expect(
                lines.contains(#"fetchHistory #Predicate { $0.token > saved && $0.author == "widget" }: 1 transaction"#)
            )
            let change = try #require(
                lines.firstIndex { $0.hasPrefix("fetchHistory #Predicate") }.map { lines[$0 + 1] })
            #expect(change.contains(" update LivingAccommodation/") && change.hasSuffix("isConfirmed = true"))
            let deletion = try #require(lines.first { $0.hasPrefix("deleteHistory #Predicate") })
            let mark = try #require(try LogStore.historyLowWaterMark(directory: store.directory))
            #expect(mark > token)
            #expect(deletion.contains("→ token@\(mark.offset), 0 segment files deleted"))
            #expect(
                lines.contains {
                    $0.hasPrefix("fetchHistory after the saved token → historyTokenExpired: ")
                        && $0.contains("retained after \(mark.jsonString)")
                })
            #expect(lines.last == "Run the demo again to add round \(round + 1).")
            // The widget's transaction is L: the history left after it is empty, and the token expired.
            #expect(try HistoryCommand.fetch(directory: store.directory, after: nil, author: nil, limit: nil).isEmpty)
            #expect(throws: CommandFailure.self) {
                try HistoryCommand.fetch(directory: store.directory, after: .token(token), author: nil, limit: nil)
            }
        }
    }
}
