// The `logstore` executable: its commands live in the LogStoreCommands library, which the tests
// import (`@testable import LogStoreCommands`) — an executable's own module cannot be imported by
// tests on every toolchain and build (a fresh clone's `swift test` failed with "no such module
// 'logstore'").
import LogStoreCommands

LogStoreCommand.main()
