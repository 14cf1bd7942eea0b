import Foundation
import Testing
import Transport

@testable import ContentSync

/// Each kind of refusal has its own code, so an app branches on codes, never on messages.
@Suite("The manager's refusals carry their own codes", .timeLimit(.minutes(3)))
struct CacheManagerErrorTests {
    /// Another process (here: a second manager) updates the folder: a check and a reset are
    /// refused as `busy`, and the reset deletes nothing.
    @Test func anotherUpdateRunningIsBusyAndAResetThenDeletesNothing() async throws {
        try await withScriptedManager(serving: "1.0") { fixture in
            let manager = fixture.manager
            try await manager.checkForUpdates()
            fixture.serve("1.2")
            let other = try fixture.secondManager()
            let otherUpdate = try await fixture.startHeldUpdate(other)

            let check = await #expect(throws: SyncError.self) { try await manager.checkForUpdates() }
            #expect(check?.code == .busy, "\(String(describing: check))")
            #expect(check?.message.contains("another update of") == true)
            let reset = await #expect(throws: SyncError.self) { try await manager.reset() }
            #expect(reset?.code == .busy, "\(String(describing: reset))")
            #expect(await manager.state == .ready)
            try fixture.expectTree(is: "1.0")
            let verify = await #expect(throws: SyncError.self) { try await manager.verify() }
            #expect(verify?.code == .busy)

            fixture.transport.release()
            #expect(try await otherUpdate.value.toVersion.text == "1.2")
            try fixture.expectTree(is: "1.2")
        }
    }

    @Test func theReadingHelpersRefuseWhatDoesNotDecodeAsDecoding() async throws {
        try await withScriptedManager(serving: "1.0") { fixture in
            let manager = fixture.manager
            try await manager.checkForUpdates()
            struct Recipe: Decodable {
                var title: String
                var minutes: Int
            }
            let decoding = #expect(throws: SyncError.self) { try manager.decode(Recipe.self, at: "README.txt") }
            #expect(decoding?.code == .decoding)
            #expect(decoding?.message.contains("README.txt") == true)
            try Data([0xFF, 0xFE, 0x00, 0xC3]).write(to: URL(fileURLWithPath: fixture.content + "/binary.bin"))
            let text = #expect(throws: SyncError.self) { try manager.string(at: "binary.bin") }
            #expect(text?.code == .decoding)
            let missing = #expect(throws: SyncError.self) { try manager.data(at: "nowhere.txt") }
            #expect(missing?.code == .fileSystem)
        }
    }

    /// A neighbour plants links in the synced folder: `data(at:)` reads nothing through them
    /// (at the end or on the way), nor waits on a FIFO; it still reads the real files.
    @Test func readingRefusesPlantedLinksFIFOsAndFolders() async throws {
        try await withScriptedManager(serving: "1.0") { fixture in
            let manager = fixture.manager
            try await manager.checkForUpdates()
            let outside = fixture.content + "-outside"
            try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: outside) }
            try Data("SECRET-OUTSIDE".utf8).write(to: URL(fileURLWithPath: outside + "/secret.txt"))
            try FileManager.default.createSymbolicLink(
                atPath: fixture.content + "/leak.txt", withDestinationPath: outside + "/secret.txt")
            try FileManager.default.createSymbolicLink(atPath: fixture.content + "/away", withDestinationPath: outside)
            try FileManager.default.createDirectory(
                atPath: fixture.content + "/real/sub", withIntermediateDirectories: true)
            try Data("inside".utf8).write(to: URL(fileURLWithPath: fixture.content + "/real/sub/file.txt"))
            #expect(mkfifo(fixture.content + "/pipe", 0o600) == 0)
            for (path, words) in [
                ("leak.txt", "through a symlink"), ("away/secret.txt", "through a symlink"),
                ("pipe", "not a regular file"), ("real/sub", "a folder, not a file"),
            ] {
                let error = #expect(throws: SyncError.self, "\(path)") { try manager.data(at: path) }
                #expect(error?.code == .fileSystem, "\(path)")
                #expect(error?.message.contains(words) == true, "\(path): \(String(describing: error?.message))")
                #expect(error?.message.contains("SECRET-OUTSIDE") == false)
            }
            #expect(try manager.data(at: "real/sub/file.txt") == Data("inside".utf8))
        }
    }

    @Test func codesRoundTripThroughTheirNames() throws {
        for code: SyncError.Code in [.busy, .decoding, .integrity, .signature, .configuration, .cancelled] {
            #expect(SyncError.Code(name: code.description) == code)
            let json = try JSONEncoder().encode([code])
            #expect(String(decoding: json, as: UTF8.self) == "[\"\(code)\"]")
            #expect(try JSONDecoder().decode([SyncError.Code].self, from: json) == [code])
        }
        #expect(SyncError.Code.busy != .configuration)
    }
}

/// The transport's owner ends it: a manager ends only the transport it built itself.
@Suite("CacheManager shuts down what it owns")
struct CacheManagerShutdownTests {
    @Test func aShutDownManagerRefusesUpdatesAndLeavesAGivenTransportRunning() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            let shared = try CurlTransport()
            var configuration = SyncConfiguration(
                baseURL: harness.server.baseURL!, contentDirectory: harness.content,
                stateDatabasePath: harness.root + "/client/state.sqlite")
            configuration.transport = shared
            let first = try CacheManager(configuration: configuration)
            try await first.checkForUpdates()
            await first.shutdown()
            let refused = await #expect(throws: SyncError.self) { try await first.checkForUpdates() }
            #expect(refused?.code == .cancelled && refused?.message.contains("shut down") == true)
            // The play button starts nothing either, though the transport it would use still runs.
            let asked = harness.server.requests().count
            let state = await first.togglePlayPause()
            #expect(state == .suspended)
            try await Task.sleep(for: .milliseconds(300))
            #expect(harness.server.requests().count == asked)
            #expect(await first.state == .suspended)

            // The shared transport still serves a second manager of the same folder.
            harness.serve("1.2")
            let second = try CacheManager(configuration: configuration)
            let report = try await second.checkForUpdates()
            #expect(report.toVersion.text == "1.2")
            try harness.expectTree(is: "1.2")
            await second.shutdown()
            await shared.shutdown()
        }
    }

    @Test func aManagerEndsTheTransportItBuilt() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            let manager = try harness.manager()
            try await manager.checkForUpdates()
            await manager.shutdown()
            await manager.shutdown() // twice is fine
            let refused = await #expect(throws: SyncError.self) { try await manager.resume() }
            #expect(refused?.code == .cancelled)
        }
    }
}
