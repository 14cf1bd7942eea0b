import ContentSync
import Foundation
import StorageServer
import Testing

// snippet:begin read-errors
/// The recipe at `path`, or nil when it cannot be read (the reason goes to the log).
func recipe(at path: String, in manager: CacheManager) -> Recipe? {
    do throws(SyncError) {
        return try manager.decode(Recipe.self, at: path)
    } catch {
        // error is a SyncError (do throws(SyncError)), and its code says what is wrong:
        // .unsafePath: the path leaves the content folder ("..", an absolute path)
        // .fileSystem: no such file in the synced version, or it cannot be read
        // .decoding:   the file is not JSON of that shape
        print("cannot read \(path):", error)
        return nil
    }
}
// snippet:end read-errors

/// The "Reading files" article (Sources/ContentSync/ContentSync.docc/ReadingFiles.md).
@Suite("The guide's reading examples work", .timeLimit(.minutes(3)))
struct ReadingFilesExamples {
    func syncedManager(_ host: ExampleHost) async throws -> CacheManager {
        let manager = try CacheManager(
            configuration: SyncConfiguration(
                baseURL: host.storageURL, contentDirectory: host.appSupport + "/content",
                stateDatabasePath: host.appSupport + "/state.sqlite"))
        try await manager.checkForUpdates()
        return manager
    }

    @Test func theReadHelpersReturnThePublishedBytes() async throws {
        try await withExampleHost(serving: "1.0") { host in
            let manager = try await syncedManager(host)
            // snippet:begin read-files
            let readme = try manager.string(at: "README.txt") // UTF-8 text
            // JSON; pass a JSONDecoder to configure it
            let dessert = try manager.decode(Recipe.self, at: "recipes/crème.json")
            let logo = try manager.data(at: "images/logo.png") // bytes
            let notes = try manager.fileURL(for: "docs/Guide Notes.md") // a URL for APIs that open files themselves
            // snippet:end read-files
            let published = ExampleStorage.snapshot("1.0").path + "/RXCacheContent/"
            #expect(readme == (try String(contentsOfFile: published + "README.txt", encoding: .utf8)))
            #expect(dessert.name == "Crème brûlée" && dessert.serves == 4)
            #expect(logo == FileManager.default.contents(atPath: published + "images/logo.png"))
            #expect(notes.path == host.appSupport + "/content/docs/Guide Notes.md")
            #expect(
                FileManager.default.contents(atPath: notes.path)
                    == FileManager.default.contents(atPath: published + "docs/Guide Notes.md"))
            await manager.shutdown()
        }
    }

    @Test func theReadHelpersRefusePathsOutsideTheFolderAndSayWhatIsWrong() async throws {
        try await withExampleHost(serving: "1.0") { host in
            let manager = try await syncedManager(host)
            var codes: [SyncError.Code] = []
            for path in ["../state.sqlite", "recipes/pasta.json", "images/logo.png"] {
                #expect(recipe(at: path, in: manager) == nil)
                do throws(SyncError) {
                    _ = try manager.decode(Recipe.self, at: path)
                } catch {
                    codes.append(error.code)
                }
            }
            #expect(recipe(at: "recipes/bread.json", in: manager)?.name == "Bread")
            #expect(codes == [.unsafePath, .fileSystem, .decoding])
            await manager.shutdown()
        }
    }

    @Test func verifyFindsALocalChangeAndRepairRestoresThePublishedFile() async throws {
        try await withExampleHost(serving: "1.0") { host in
            let manager = try await syncedManager(host)
            try Data("edited by hand".utf8).write(to: try manager.fileURL(for: "README.txt"))
            // snippet:begin verify
            let check = try await manager.verify() // compares the folder with the published tree
            if !check.matches {
                print(check.differences.joined(separator: "\n"))
                let repair = try await manager.verify(repair: true) // refetches what differs, swapped in atomically
                print("repaired", repair.repaired, "paths; matches now:", repair.matches)
            }
            // snippet:end verify
            #expect(!check.matches && check.differences.contains { $0.contains("README.txt") })
            ExampleStorage.expectTree(host.appSupport + "/content", is: "1.0")
            #expect(try await manager.verify().matches)
            await manager.shutdown()
        }
    }
}
