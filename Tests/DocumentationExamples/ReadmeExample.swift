// The README's library example, exactly as shown ("Using the library"): this file imports only
// what the example does, so it compiles as written in an app. ReadmeExampleTests runs it.

// snippet:begin readme-library
import ContentSync
import Foundation

// snippet:begin recipe
/// A file the app reads from the synced folder.
struct Recipe: Decodable {
    var name: String
    var serves: Int
}
// snippet:end recipe

/// Brings `folder` to the latest version published at `storage`, then reads a recipe from it.
func updateRecipes(from storage: URL, into folder: String, stateFile: String) async throws -> Recipe {
    // stateFile is optional: by default the state database lives under $XDG_STATE_HOME.
    let configuration = SyncConfiguration(baseURL: storage, contentDirectory: folder, stateDatabasePath: stateFile)
    let manager = try CacheManager(configuration: configuration)

    // The stream starts with the current state, so subscribing before the check misses nothing.
    let events = await manager.events()
    let observer = Task {
        for await event in events {
            switch event {
            case .stateChanged(let state): print("state:", state)
            case .progress(let progress): print(progress.phase, progress.bytesDone, "bytes")
            case .finished(let report):
                print("now at", report.toVersion)
                return
            case .failed(let error):
                print("failed:", error)
                return
            case .suspended, .connectionNotAllowed:
                print("paused; finished downloads are kept")
                return
            }
        }
    }

    let report = try await manager.checkForUpdates() // restore, replay, or nothing to do
    print(report.outcome, report.filesDownloaded, "files downloaded,", report.filesReused, "reused")
    await observer.value
    let recipe = try manager.decode(Recipe.self, at: "recipes/bread.json")
    await manager.shutdown() // ends the transport the manager made
    return recipe
}
// snippet:end readme-library
