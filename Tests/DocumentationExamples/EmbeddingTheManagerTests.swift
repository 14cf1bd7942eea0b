import ContentSync
import Foundation
import StorageServer
import Testing

/// The "Embedding the manager" article (Sources/ContentSync/ContentSync.docc/EmbeddingTheManager.md).
@Suite("The guide's embedding examples work", .timeLimit(.minutes(3)))
struct EmbeddingTheManagerExamples {
    @Test func aConfiguredManagerRestoresReplaysAndSignsEveryRequest() async throws {
        try await withExampleHost(serving: "1.0") { host in
            let manager = try makeContentManager(storage: host.storageURL, appSupport: host.appSupport, token: "s3cret")
            var outcomes: [SyncReport.Outcome] = []
            for version in ["1.0", "1.2", "1.2"] {
                host.publish(version)
                // snippet:begin check-for-updates
                let report = try await manager.checkForUpdates()
                switch report.outcome {
                case .restored:
                    print("restored \(report.toVersion) from the archive")
                case .replayed:
                    print(
                        "replayed \(report.changeListsApplied) change lists:",
                        report.filesDownloaded, "files downloaded,", report.filesReused, "kept")
                case .upToDate:
                    print("already at \(report.toVersion)")
                }
                for warning in report.warnings { print("the storage has a mistake the update tolerated:", warning) }
                // snippet:end check-for-updates
                outcomes.append(report.outcome)
                ExampleStorage.expectTree(host.appSupport + "/content", is: version)
            }
            #expect(outcomes == [.restored, .replayed, .upToDate])
            let requests = host.server.requests()
            #expect(!requests.isEmpty && requests.allSatisfy { $0.header("Authorization") == "token s3cret" })
            #expect(FileManager.default.fileExists(atPath: host.appSupport + "/sync-state.sqlite"))

            // snippet:begin shutdown
            await manager.shutdown() // stops a running update and ends the transport the manager made
            // snippet:end shutdown
            let error = await #expect(throws: SyncError.self) { try await manager.checkForUpdates() }
            #expect(error?.code == .cancelled)
        }
    }

    @Test func aStateDatabaseInsideTheContentFolderIsRefusedBeforeAnythingIsCreated() async throws {
        try await withExampleHost { host in
            let error = #expect(throws: SyncError.self) {
                try CacheManager(
                    configuration: SyncConfiguration(
                        baseURL: host.storageURL, contentDirectory: host.appSupport + "/content",
                        stateDatabasePath: host.appSupport + "/content/state.sqlite"))
            }
            #expect(error?.code == .configuration && error?.setting == .stateDatabasePath)
            #expect(!FileManager.default.fileExists(atPath: host.appSupport + "/content"))
        }
    }
}
