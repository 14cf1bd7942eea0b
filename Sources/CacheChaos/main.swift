// cache-chaos: test support for the item cache's crash tests (CacheCrashTests) and its kill loop
// (scripts/chaos/cache_kill_loop.py). Writers and readers share one folder and are killed with
// SIGKILL at any moment; `verify` then checks what a crash may and may not leave behind.
//
//   cache-chaos writer --cache DIR [options]   stores self-verifying values until killed
//   cache-chaos reader --cache DIR [options]   reads and checks values until killed
//   cache-chaos verify --cache DIR [options]   opens (reconciles) and checks the folder; JSON out
import Foundation
import ItemCache
import ToolSupport

let usage = """
    usage: cache-chaos MODE --cache DIR [--name value ...]
      writer  --id 0 --seed 1 --epoch 0 --keys 300 --tasks 1 --sizes mixed|small|large
              --group-items 0 (0: no group writes) --group-seconds 1 --remove-percent 5
              --update-percent 5 --count 0 (0: until killed) --limit BYTES (the folder's disk limit)
              --die-at-step 0 (N: SIGKILL itself once step N's call returned, before its line)
          stdout, a step's lines, written before the next step starts:
            committed KEY GEN   the store returned: durable (no group writes; or an update)
            pending KEY GEN     the store returned into the pending group
            flushing N          the next store fills the group and writes it
            flushed             every pending line above is durable
            removing KEY GEN    the next remove starts: KEY may be gone from now on
            removed KEY GEN     the remove returned: durable
      reader  --seed 1 --writers 1 --keys 300 --count 0
          stdout: "reads N hits H" every 250 reads; "TORN KEY why" and exit 2 on a bad value
      verify  --limit BYTES --expect FILE[,FILE...] --evictions allowed|none
          stdout: a JSON summary; exit 1 on any violation
    """

let arguments = CommandLine.arguments
guard arguments.count >= 2, !["-h", "--help"].contains(arguments[1]) else {
    print(usage)
    exit(arguments.count >= 2 ? 0 : 64)
}

do {
    let options = try ToolOptions(arguments.dropFirst(2), tool: "cache-chaos")
    switch arguments[1] {
    case "writer": try await runWriter(options)
    case "reader": try await runReader(options)
    case "verify": exit(try runVerify(options))
    default: throw ToolFailure("unknown mode '\(arguments[1])'\n\(usage)")
    }
} catch {
    FileHandle.standardError.write(Data("cache-chaos \(arguments[1]): \(error)\n".utf8))
    exit(1)
}
