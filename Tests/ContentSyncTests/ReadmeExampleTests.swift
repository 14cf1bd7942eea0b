import ContentSync
import Foundation
import Testing
import Transport

/// The README's library example, as a new user would write it: only the public API (no
/// `@testable` in this file), against the scripted transport instead of GitHub.
@Suite("The README's library example compiles and does what it says", .timeLimit(.minutes(1)))
struct ReadmeExampleTests {
    struct Recipe: Decodable {
        var name: String
        var serves: Int
    }

    @Test func theLibraryExampleRuns() async throws {
        try await withTemporaryDirectory { root in
            var configuration = SyncConfiguration(baseURL: ScriptedTransport.baseURL, contentDirectory: root + "/content",
                                                  stateDatabasePath: root + "/state.sqlite")
            configuration.transport = ScriptedTransport(serving: ExampleStorageFixture.snapshot("1.0"))
            let token = "secret"
            configuration.requestAdapter = ClosureRequestAdapter { request in       // optional: auth etc.
                request.headers["Authorization"] = "token \(token)"
            }
            configuration.connectionPolicy = ConnectionPolicy { true }             // optional

            let manager = try CacheManager(configuration: configuration)

            let events = await manager.events()
            let watcher = Task {
                var seen: [String] = []
                for await event in events {
                    switch event {
                    case .stateChanged(let state): seen.append("state \(state)")
                    case .progress: break
                    case .connectionNotAllowed: _ = try? await manager.resume(overridingPolicy: true)
                    case .suspended: seen.append("paused")
                    case .finished(let report): seen.append("now at \(report.toVersion)")
                    case .failed(let error): seen.append("failed (\(error.code)): \(error.message)")
                    }
                    if seen.last == "now at 1.0" { break }
                }
                return seen
            }

            let report = try await manager.checkForUpdates()
            let recipe = try manager.decode(Recipe.self, at: "recipes/bread.json")
            await manager.suspend()
            let resumed = try await manager.resume()
            let toggled = await manager.togglePlayPause()

            #expect(report.outcome == .restored)
            #expect(recipe.name == "Bread" && recipe.serves == 8)
            #expect(resumed.outcome == .upToDate)
            #expect(toggled == .working)
            #expect(await watcher.value == ["state ready", "state working", "state succeeded", "now at 1.0"])
            await manager.suspend()
            let status = try await manager.status()
            #expect(status.lastSuccess?.kind == .check || status.lastSuccess?.kind == .restore)
            #expect(try await manager.history().contains { $0.kind == .restore && $0.outcome == .succeeded })
        }
    }
}
