// swift-tools-version: 6.1
import CompilerPluginSupport
import PackageDescription

let package = Package(
    name: "LogStore",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "LogStore", targets: ["LogStore", "LogStoreEngine"]),
        .executable(name: "logstore", targets: ["logstore"]),
        // The WWDC24 SampleTrips models, for examples and the benchmarks package.
        .library(name: "SampleTrips", targets: ["SampleTrips"]),
        // Ships a store's state and history into PostgreSQL, exactly once (issue 16).
        .library(name: "LogStorePostgres", targets: ["LogStorePostgres"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swiftlang/swift-syntax", from: "603.0.1"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // `swift package generate-documentation` (Tools/build-docs); a command plugin only, never linked.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // liblz4 from the system (Debian: liblz4-dev).
        .systemLibrary(
            name: "CLZ4",
            pkgConfig: "liblz4",
            providers: [.apt(["liblz4-dev"])]
        ),
        // CRC32C: SSE4.2 through a function attribute (checked at run time), slicing-by-8 elsewhere.
        .target(name: "CCRC32C"),
        // The futex system call and atomics on a word of a shared mapping (a store shared by
        // several writing processes wakes a waiter for TURN or SYNC through it; FORMAT.md §10.2).
        .target(name: "CFutex"),
        // Under ThreadSanitizer only: tells TSan about the standard library's `Mutex` slow paths
        // (Tools/sanitize/CTSanMutex/ctsanmutex.c); an empty object in every other build. Linked
        // into the test binary and the executables the tests start, never into the libraries.
        .target(name: "CTSanMutex", path: "Tools/sanitize/CTSanMutex"),
        // Layers System, Format and Log: bytes only, knows nothing of models.
        .target(
            name: "LogStoreEngine",
            dependencies: ["CLZ4", "CCRC32C", "CFutex"]
        ),
        // @Model, @Attribute, @Relationship, @Transient, #Unique, #Index (swift-syntax).
        .macro(
            name: "LogStoreMacros",
            dependencies: [
                .product(name: "SwiftSyntaxMacros", package: "swift-syntax"),
                .product(name: "SwiftCompilerPlugin", package: "swift-syntax"),
            ]
        ),
        // Layers Model, DataStore, Records, State, Checkpoints, History, Store, Context, Archive.
        .target(
            name: "LogStore",
            dependencies: ["LogStoreEngine", "LogStoreMacros", .product(name: "Logging", package: "swift-log")]
        ),
        // Mirrors a store's entities and history into PostgreSQL (postgres-nio).
        .target(
            name: "LogStorePostgres",
            dependencies: [
                "LogStore", "LogStoreEngine",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The WWDC24 SampleTrips model, shared by the tool's demo and the tests.
        .target(
            name: "SampleTrips",
            dependencies: ["LogStore"]
        ),
        // The `logstore` tool's commands, a library so that the tests can import them (an
        // executable's own module cannot be imported everywhere); the executable only runs them.
        .target(
            name: "LogStoreCommands",
            dependencies: [
                "LogStore",
                "SampleTrips",
                "LogStoreEngine",
                "LogStorePostgres",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Tools/LogStoreCommands"
        ),
        .executableTarget(
            name: "logstore",
            dependencies: ["LogStoreCommands", "CTSanMutex"],
            path: "Tools/logstore"
        ),
        // The libFuzzer targets (issue 14): a plain build replays inputs; Tools/fuzz/run.sh builds
        // the fuzzing one (coverage, AddressSanitizer, libFuzzer without its main).
        .executableTarget(
            name: "logstore-fuzz",
            dependencies: ["LogStore"],
            path: "Tools/fuzz/Sources"
        ),
        // The store-side halves of Tools/ship-figures/run.sh (issue 16's figures): a store of N
        // transactions, and a writer saving at a steady rate while `logstore ship --follow` runs.
        .executableTarget(
            name: "logstore-ship-figures",
            dependencies: ["LogStore"],
            path: "Tools/ship-figures/Sources"
        ),
        // A second process for the tests of several processes on one store (LogStoreTests spawns it).
        .executableTarget(
            name: "LogStoreProcessHelper",
            dependencies: ["LogStore", "SampleTrips", "CTSanMutex"],
            path: "Tests/ProcessHelper"
        ),
        // The simulated file system and fault helpers shared by every test target.
        .target(
            name: "LogStoreTestSupport",
            dependencies: ["LogStoreEngine", "CTSanMutex"],
            path: "Tests/LogStoreTestSupport"
        ),
        .testTarget(
            name: "LogStoreEngineTests",
            dependencies: ["LogStoreEngine", "LogStoreTestSupport"],
            // Stores of format version 1 that the tests read through #filePath, not as resources.
            exclude: ["Fixtures"]
        ),
        .testTarget(
            name: "LogStoreTests",
            dependencies: [
                "LogStore", "LogStoreEngine", "LogStoreTestSupport", "SampleTrips", "LogStoreCommands", "LogStoreProcessHelper",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            exclude: ["Fixtures"]
        ),
        // Real crashes (issue 14): the child process the kill test starts and kills with SIGKILL.
        // Built with the tests (`swift build --build-tests`); the test finds it beside its own binary.
        .executableTarget(
            name: "LogStoreCrashChild",
            dependencies: ["LogStore", "LogStoreEngine", "CTSanMutex"],
            path: "Tests/LogStoreCrashChild"
        ),
        .testTarget(
            name: "LogStoreCrashTests",
            dependencies: ["LogStore", "LogStoreEngine", "LogStoreTestSupport"]
        ),
        // The macros' expansions and diagnostics.
        .testTarget(
            name: "LogStoreMacrosTests",
            dependencies: [
                "LogStoreMacros",
                .product(name: "SwiftSyntaxMacrosTestSupport", package: "swift-syntax"),
            ]
        ),
        // SwiftData code, in SwiftData's spelling, on LogStore.
        .testTarget(
            name: "SwiftDataSpellingTests",
            dependencies: ["LogStore", "LogStoreTestSupport"]
        ),
        // Shipping into a real PostgreSQL server the tests start themselves (initdb, pg_ctl).
        .testTarget(
            name: "LogStorePostgresTests",
            dependencies: [
                "LogStorePostgres", "LogStore", "LogStoreEngine", "SampleTrips",
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ]
        ),
        // The `logstore` tool's commands, called as functions (`@testable import LogStoreCommands`),
        // and the executable, run as a process.
        .testTarget(
            name: "LogStoreToolTests",
            dependencies: [
                "LogStoreCommands", "logstore", "LogStore", "LogStoreEngine", "LogStoreTestSupport", "SampleTrips",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            // Golden outputs, read through #filePath (LOGSTORE_UPDATE_GOLDEN=1 rewrites them).
            exclude: ["Golden"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
