// fleet-sim: N in-process agents, each with its own content folder, state database and seeded
// schedule, polling one storage as `sync-agent watch` does, on one shared transport. For
// bench/fleet/fleet_sim.py (`make bench-fleet`), which serves the storage with nginx and reads
// the server's side from its access log; this tool reports the agents' side.
//
//   fleet-sim --base-url URL --scratch DIR [--agents 1000 --interval 20 --jitter 0.1 ...]
//
// Exit 0 when every agent converged, 2 when one did not, 1 when the run could not start.
import Foundation
import ToolSupport

let arguments = CommandLine.arguments
if arguments.count < 2 || arguments.dropFirst().contains(where: { ["-h", "--help"].contains($0) }) {
    print(FleetSettings.usage)
    exit(arguments.count < 2 ? 64 : 0)
}

do {
    let settings = try FleetSettings(ToolOptions(arguments.dropFirst(), tool: "fleet-sim"))
    exit(try await FleetRun(settings: settings).run())
} catch {
    FileHandle.standardError.write(Data("fleet-sim: \(error)\n".utf8))
    exit(1)
}
