import Foundation
import LogStore
import LogStoreTestSupport
import Testing

// Models as SwiftData code for CloudKit writes them: every property has a default or is optional,
// and to-many relationships are optional arrays.

@Model
final class Album {
    var title: String = ""
    @Relationship(deleteRule: .cascade, inverse: \Song.album) var songs: [Song]? = []
    @Relationship(inverse: \Genre.albums) var genres: [Genre]?

    init(title: String) {
        self.title = title
    }
}

@Model
final class Song {
    var title: String = ""
    var album: Album?

    init(title: String) {
        self.title = title
    }
}

@Model
final class Genre {
    var name: String = ""
    var albums: [Album]? = []

    init(name: String) {
        self.name = name
    }
}

/// Optional to-many relationships (`[Song]?`): inverses in step, saved, fetched and cascaded.
@Suite struct OptionalRelationshipTests {
    @Test func optionalListsKeepTheirInversesInStep() {
        let album = Album(title: "Blue"), other = Album(title: "Red")
        let first = Song(title: "One"), second = Song(title: "Two")
        album.songs = [first, second]
        #expect(first.album === album && second.album === album)
        second.album = other
        #expect(album.songs?.map(\.title) == ["One"])
        #expect(other.songs?.map(\.title) == ["Two"])
        album.songs = nil
        #expect(first.album == nil)

        let jazz = Genre(name: "Jazz")
        jazz.albums?.append(album)
        #expect(album.genres?.map(\.name) == ["Jazz"])
        album.genres = []
        #expect(jazz.albums?.isEmpty == true)
    }

    @Test func optionalListsAreSavedFetchedAndCascaded() throws {
        let directory = TemporaryDirectory("macros-optional-lists")
        let container = try ModelContainer(for: Album.self,
                                           configurations: LogStoreConfiguration(directory: directory.path))
        #expect(Set(container.schema.entities.map(\.name)) == ["Album", "Song", "Genre"])
        let context = ModelContext(container)
        let album = Album(title: "Blue")
        album.songs = [Song(title: "One"), Song(title: "Two")]
        album.genres = [Genre(name: "Jazz")]
        context.insert(album)
        try context.save()
        try container.dataStore(as: LogStore.self)?.close()

        let reopened = try ModelContainer(for: Album.self,
                                          configurations: LogStoreConfiguration(directory: directory.path))
        let fresh = ModelContext(reopened)
        let fetched = try #require(try fresh.fetch(FetchDescriptor<Album>()).first)
        #expect(fetched.songs?.map(\.title).sorted() == ["One", "Two"])
        #expect(fetched.songs?.allSatisfy { $0.album === fetched } == true)
        #expect(fetched.genres?.first?.albums?.first === fetched)
        fresh.delete(fetched)
        try fresh.save()
        #expect(try fresh.fetchCount(FetchDescriptor<Song>()) == 0)
        #expect(try fresh.fetchCount(FetchDescriptor<Genre>()) == 1)
    }
}
