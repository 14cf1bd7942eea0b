import Foundation
import Testing

@testable import ContentSync
@testable import FileKit

/// A neighbour who may rename entries of the content folder's parent (a shared, group-writable
/// folder) swaps the staging folder for a link to a decoy of its layout while an update runs:
/// the update went on by path, so the switch exchanged the decoy's `next/` with the content
/// folder and retired the previous version into the decoy.
@Suite("An update works only in the staging folder it locked")
struct StagingNeighbourTests {
    @Test func aStagingFolderSwappedForALinkBeforeTheSwitchGetsNothingThroughIt() async throws {
        try await withSyncHarness(serving: "1.2") { harness in
            try await harness.sync()
            harness.serve("1.4")
            let location = StagingArea(contentDirectory: harness.content).location
            let outside = harness.root + "/outside"
            for folder in ["next", "retired"] {
                try FileManager.default.createDirectory(
                    atPath: outside + "/" + folder, withIntermediateDirectories: true)
                try Data("mine".utf8).write(to: URL(fileURLWithPath: outside + "/" + folder + "/decoy.txt"))
            }
            let moved = harness.root + "/moved"
            var configuration = harness.configuration()
            configuration.beforeSwitch = { _ in
                rename(location, moved)
                symlink(outside, location)
            }
            try await CacheManager(configuration: configuration).checkForUpdates()
            try harness.expectTree(is: "1.4")
            let decoy = try TreeSnapshot.read(outside)
            #expect(decoy.files.keys.sorted() == ["next/decoy.txt", "retired/decoy.txt"], "the decoy is untouched")
            #expect(FileManager.default.fileExists(atPath: moved + "/retired"), "the twin stayed in the locked folder")
            // The link stays at the name, and the next update refuses it by name.
            await #expect {
                try await harness.sync()
            } throws: { error in
                (error as? SyncError)?.message.contains(location) == true
            }
            try harness.expectTree(is: "1.4")
        }
    }
}
