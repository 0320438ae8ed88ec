import Foundation
import LogStore

/// `logstore-fuzz`: the libFuzzer targets of issue 14, item 4, one per decoder
/// (``_DecoderFuzzing/Target``), in one executable.
///
/// ```
/// logstore-fuzz <target> [libFuzzer arguments…]   fuzz (only in a build made by Tools/fuzz/run.sh)
/// logstore-fuzz <target> --replay <file or directory>…   run inputs once (any build)
/// logstore-fuzz --make-seeds <store directory> <corpus root>   write seed inputs per target
/// ```
///
/// Tools/fuzz/run.sh builds it with coverage instrumentation and AddressSanitizer, defines
/// `LOGSTORE_FUZZ` and links libFuzzer without its `main`; this `main` then hands the chosen target
/// to `LLVMFuzzerRunDriver`. A plain build (the package's) only replays.
@main
struct LogStoreFuzz {
    static func main() {
        var arguments = CommandLine.arguments
        guard arguments.count >= 2 else { usage() }
        if arguments[1] == "--make-seeds" {
            guard arguments.count == 4 else { usage() }
            makeSeeds(store: arguments[2], corpusRoot: arguments[3])
            return
        }
        #if LOGSTORE_FUZZ
            // libFuzzer's -merge=1 (and -fork) runs this program again with the arguments it was
            // given, which no longer name the target: the environment carries the target to it.
            if _DecoderFuzzing.Target(rawValue: arguments[1]) == nil,
                let name = ProcessInfo.processInfo.environment[targetVariable],
                let target = _DecoderFuzzing.Target(rawValue: name)
            {
                FuzzState.target = target
                exit(runLibFuzzer(arguments))
            }
        #endif
        guard let target = _DecoderFuzzing.Target(rawValue: arguments[1]) else { usage() }
        if arguments.count >= 3 && arguments[2] == "--replay" {
            var count = 0
            for path in arguments[3...] {
                for file in inputFiles(path) {
                    _DecoderFuzzing.run(target, Array(FileManager.default.contents(atPath: file) ?? Data()))
                    count += 1
                }
            }
            print("replayed \(count) inputs through \(target.rawValue)")
            return
        }
        #if LOGSTORE_FUZZ
            arguments.remove(at: 1)
            FuzzState.target = target
            setenv(targetVariable, target.rawValue, 1)
            exit(runLibFuzzer(arguments))
        #else
            FileHandle.standardError.write(
                Data("This build replays only; Tools/fuzz/run.sh builds the fuzzing one.\n".utf8))
            exit(2)
        #endif
    }

    /// Names the target for the child processes libFuzzer starts (`-merge=1`, `-fork`).
    static let targetVariable = "LOGSTORE_FUZZ_TARGET"

    static func usage() -> Never {
        let targets = _DecoderFuzzing.Target.allCases.map(\.rawValue).joined(separator: "|")
        FileHandle.standardError.write(
            Data(
                """
                usage: logstore-fuzz <\(targets)> [libFuzzer arguments…]
                       logstore-fuzz <target> --replay <file or directory>…
                       logstore-fuzz --make-seeds <store directory> <corpus root>

                """.utf8))
        exit(2)
    }

    static func inputFiles(_ path: String) -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return [] }
        guard isDirectory.boolValue else { return [path] }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        return names.sorted().map { path + "/" + $0 }
    }

    static func makeSeeds(store: String, corpusRoot: String) {
        do {
            var counts: [String: Int] = [:]
            for (target, bytes) in try _DecoderFuzzing.seeds(fromStore: store) {
                let folder = corpusRoot + "/" + target.rawValue
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                counts[target.rawValue, default: 0] += 1
                let name = "seed-\(counts[target.rawValue]!)"
                try Data(bytes).write(to: URL(fileURLWithPath: folder + "/" + name))
            }
            print(counts.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", "))
        } catch {
            FileHandle.standardError.write(Data("Making seeds from \(store) failed: \(error)\n".utf8))
            exit(1)
        }
    }
}

#if LOGSTORE_FUZZ
    enum FuzzState {
        nonisolated(unsafe) static var target: _DecoderFuzzing.Target = .record
    }

    @_silgen_name("LLVMFuzzerRunDriver")
    func LLVMFuzzerRunDriver(
        _ argc: UnsafeMutablePointer<Int32>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
    ) -> Int32

    /// Runs libFuzzer with `arguments` (the program name first) on ``FuzzState/target``.
    func runLibFuzzer(_ arguments: [String]) -> Int32 {
        var argc = Int32(arguments.count)
        let strings = arguments.map { strdup($0) } + [nil]
        let argv = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: strings.count)
        argv.initialize(from: strings, count: strings.count)
        var argvPointer: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = argv
        return LLVMFuzzerRunDriver(&argc, &argvPointer) { data, count in
            let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? []
            _DecoderFuzzing.run(FuzzState.target, bytes)
            return 0
        }
    }
#endif
