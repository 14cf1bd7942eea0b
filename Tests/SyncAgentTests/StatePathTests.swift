import Testing

@testable import SyncAgent

/// Where `status`, `verify` and `reset` look for a folder's state database when `--state` is not
/// given: a cron job or a shell has no `$STATE_DIRECTORY`, yet the unit keeps its databases in
/// `/var/lib/sync-agent`.
@Suite("The state database a command outside the service finds")
struct StatePathTests {
    static let home = "/home/ops/.local/state/content-sync/docs-1f2e.sqlite"
    static let service = "/var/lib/sync-agent/docs-1f2e.sqlite"

    @Test(arguments: [
        // (under the service, files that exist, the path chosen)
        (false, [String](), home), // none yet: the default, where a first sync would put it
        (false, [home], home),
        (false, [service], service), // the unit's: found from cron
        (false, [home, service], home), // a folder synced by hand too: the default wins
        (true, [service], home), // inside the unit, $STATE_DIRECTORY already gave the default
    ])
    func statePath(underService: Bool, existing: [String], chosen: String) {
        let path = FolderOptions.statePath(default: Self.home, underService: underService) { existing.contains($0) }
        #expect(path == chosen)
    }
}
