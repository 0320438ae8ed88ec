import Foundation
import LogStore
import Testing

@testable import LogStoreCommands

/// `logstore demo`: twice in the same directory, with the history part each time, leaving the
/// round's last transactions in history.
@Suite struct DemoCommandTests {
    @Test func theDemoRunsTwiceInTheSameDirectoryAndLeavesHistoryToLookAt() throws {
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
            // What `logstore history` shows on the demo store: the round's update (the widget)
            // and delete (the app, with its cascade), after L.
            let history = try HistoryCommand.fetch(directory: store.directory, after: nil, author: nil, limit: nil)
            #expect(history.map(\.author) == ["widget", "app"])
            #expect(history.allSatisfy { $0.token > mark })
            #expect(history[0].changes.count == 1)
            #expect(history[1].changes.count == 4)  // the trip, its two items, its accommodation
            #expect(throws: CommandFailure.self) {
                try HistoryCommand.fetch(directory: store.directory, after: .token(token), author: nil, limit: nil)
            }
            // The upsert's destination survived the booking of a stay on the same trip.
            let state = try LogStore.replay(directory: store.directory)
            let reykjavik = try #require(
                state.entity(named: "Trip")?.rows.first { $0.values["name"] == .string("Reykjavík #\(round)") })
            #expect(reykjavik.values["destination"] == .string("Iceland (Ring Road)"))
        }
    }
}
