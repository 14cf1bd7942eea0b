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
#else
let paths = Array(CommandLine.arguments.dropFirst())
if paths.isEmpty {
    print("usage: content-sync-fuzz CORPUS_FOLDER_OR_FILE…  (replays each input through the fuzz checks)")
} else {
    do {
        let count = try FuzzChecks.replay(paths)
        print("replayed \(count) inputs: no crash, every property held")
    } catch {
        print("error: \(error)")
        exit(2)
    }
}
#endif
