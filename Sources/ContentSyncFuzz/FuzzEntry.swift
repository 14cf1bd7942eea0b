// The fuzz target. Built by `make fuzz` with `-sanitize=fuzzer -D FUZZING`, libFuzzer calls
// `LLVMFuzzerTestOneInput`. Built normally, it replays a corpus: `content-sync-fuzz Fuzz/corpus`.
import ContentSyncFuzzing
import Foundation

#if FUZZING
    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
        FuzzChecks.run(Array(UnsafeBufferPointer(start: data, count: size)))
        return 0
    }

    /// libFuzzer's entry when something else owns `main`.
    @_silgen_name("LLVMFuzzerRunDriver")
    func runFuzzerDriver(
        _ argc: UnsafeMutablePointer<CInt>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt
    ) -> CInt

    /// SwiftPM links executables with `main` pointing at `<module>_main`: hand over to libFuzzer.
    @_cdecl("ContentSyncFuzz_main")
    public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
        var count = argc
        var arguments = argv
        return runFuzzerDriver(&count, &arguments) { data, size in fuzzOneInput(data, size) }
    }
#else
    @main
    struct FuzzEntry {
        static func main() {
            let paths = Array(CommandLine.arguments.dropFirst())
            guard !paths.isEmpty else {
                print("usage: content-sync-fuzz CORPUS_FOLDER_OR_FILE…  (replays each input through the fuzz checks)")
                return
            }
            do {
                let count = try FuzzChecks.replay(paths)
                print("replayed \(count) inputs: no crash, every property held")
            } catch {
                print("error: \(error)")
                exit(2)
            }
        }
    }
#endif
