import ContentSync
import Foundation
import StorageServer
import Testing

// snippet:begin remedy
/// What the app does about a failed update or read.
enum Remedy: Equatable {
    case retryLater, waitForTheOtherUpdate, askTheUser, freeSpace, reportToThePublisher, fixTheApp, nothing
}

func remedy(for error: SyncError) -> Remedy {
    switch error.code {
    case .network:
        .retryLater // offline, host down, timeouts, HTTP errors
    case .busy:
        .waitForTheOtherUpdate // another update, verify or reset of this folder runs, here or in another process
    case .connectionNotAllowed:
        .askTheUser // the connection policy said no: resume(overridingPolicy: true) if the user agrees
    case .cancelled:
        .nothing // suspended, reset or shut down: resume() continues
    case .insufficientSpace:
        .freeSpace // the storage declares more than the disk holds
    case .integrity, .signature, .archive, .unsafePath, .invalidStatus, .invalidUpdateList, .invalidChangeList:
        .reportToThePublisher // the storage is broken or was tampered with: retrying fetches the same bytes
    case .configuration, .decoding:
        .fixTheApp // a setting is wrong (error.setting names it), or a file is not what the app expects
    default:
        .retryLater // .fileSystem, .stateStore: the message names the path and the system's error
    }
}
// snippet:end remedy

/// The "Handling errors" article (Sources/ContentSync/ContentSync.docc/HandlingErrors.md): each
/// remedy, reached through a real failure.
@Suite("The guide's error handling examples work", .timeLimit(.minutes(3)))
struct HandlingErrorsExamples {
    func configuration(_ host: ExampleHost, _ name: String = "content") -> SyncConfiguration {
        SyncConfiguration(
            baseURL: host.storageURL, contentDirectory: host.appSupport + "/" + name,
            stateDatabasePath: host.appSupport + "/" + name + ".sqlite")
    }

    /// What the documented handler records for one check.
    func check(_ manager: CacheManager) async -> (remedy: Remedy?, error: SyncError?) {
        var advice: Remedy?
        var lastFailure: SyncError?
        // snippet:begin handle-failure
        do throws(SyncError) {
            try await manager.checkForUpdates()
        } catch {
            print(error) // "network: …": the code, what went wrong and what to do, the cause
            advice = remedy(for: error) // branch on the code, never on error.message: it is for people
            lastFailure = error // e.g. for a diagnostics screen
        }
        // snippet:end handle-failure
        return (advice, lastFailure)
    }

    @Test func aHostThatAnswers404IsANetworkErrorAndTheFolderKeepsItsVersion() async throws {
        try await withExampleHost(serving: "1.0") { host in
            let manager = try CacheManager(configuration: configuration(host))
            try await manager.checkForUpdates()
            host.publish("1.1")
            host.server.injectFault(.status(404), forPath: "/RXCacheConfig/cacheStatus.json")
            let (advice, error) = await check(manager)
            #expect(advice == .retryLater && error?.code == .network)
            #expect(error?.message.contains("cacheStatus.json") == true, "\(String(describing: error))")
            #expect("\(error.map { "\($0)" } ?? "")".hasPrefix("network: "))
            ExampleStorage.expectTree(host.appSupport + "/content", is: "1.0")
            #expect(await manager.state == .failed)
            await manager.shutdown()
        }
    }

    @Test func anArchiveThatDoesNotMatchItsPublishedHashIsReportedToThePublisher() async throws {
        let scratch = NSTemporaryDirectory() + "docs-examples-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let storage = try copyOfSnapshot("1.0", in: scratch)
        // One byte of the zip's stored content changes; its size and the status stay as published.
        let zip = storage.appendingPathComponent("RXCacheContent.zip")
        var bytes = try Data(contentsOf: zip)
        bytes[bytes.count / 2] ^= 0xFF
        try bytes.write(to: zip)
        try await withExampleHost(root: storage) { host in
            let manager = try CacheManager(configuration: configuration(host))
            let (advice, error) = await check(manager)
            #expect(advice == .reportToThePublisher && error?.code == .integrity, "\(String(describing: error))")
            #expect(!FileManager.default.fileExists(atPath: host.appSupport + "/content/README.txt"))
            await manager.shutdown()
        }
    }

    @Test func aSecondUpdaterOfTheSameFolderWaitsForTheFirst() async throws {
        try await withExampleHost(serving: "1.2") { host in
            let first = try CacheManager(configuration: configuration(host))
            try await first.checkForUpdates()
            publishVersionThatStalls(host)
            let log = await EventLog.recording(first)
            let update = Task { try await first.checkForUpdates() }
            try await log.waitForDownloadedFiles(3)
            let second = try CacheManager(configuration: configuration(host)) // as another process would
            let (advice, error) = await check(second)
            #expect(advice == .waitForTheOtherUpdate && error?.code == .busy, "\(String(describing: error))")
            await first.suspend()
            _ = try? await update.value
            let (afterwards, _) = await check(second)
            #expect(afterwards == nil)
            ExampleStorage.expectTree(host.appSupport + "/content", is: "1.4")
            await first.shutdown()
            await second.shutdown()
        }
    }

    @Test func aPolicyThatForbidsTransfersAsksTheUser() async throws {
        try await withExampleHost(serving: "1.0") { host in
            var configuration = configuration(host)
            configuration.connectionPolicy = ConnectionPolicy { false }
            let manager = try CacheManager(configuration: configuration)
            let (advice, error) = await check(manager)
            #expect(advice == .askTheUser && error?.code == .connectionNotAllowed)
            #expect(await manager.state == .suspended)
            let report = try await manager.resume(overridingPolicy: true)
            #expect(report.outcome == .restored)
            ExampleStorage.expectTree(host.appSupport + "/content", is: "1.0")
            await manager.shutdown()
        }
    }

    @Test func aFolderThatIsNotTheManagersIsLeftAloneAndTheSettingIsNamed() async throws {
        try await withExampleHost(serving: "1.0") { host in
            try FileManager.default.createDirectory(
                atPath: host.appSupport + "/content", withIntermediateDirectories: true)
            try Data("mine".utf8).write(to: URL(fileURLWithPath: host.appSupport + "/content/notes.txt"))
            let manager = try CacheManager(configuration: configuration(host))
            let (advice, error) = await check(manager)
            #expect(
                advice == .fixTheApp && error?.code == .configuration && error?.setting == .allowReplacingUnknownContent
            )
            #expect(FileManager.default.contents(atPath: host.appSupport + "/content/notes.txt") == Data("mine".utf8))
            #expect(remedy(for: SyncError(code: .decoding, message: "'a.json' does not decode")) == .fixTheApp)
            await manager.shutdown()
        }
    }
}
