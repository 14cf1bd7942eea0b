import Foundation
import StorageServer
import Testing

@testable import ContentSync
@testable import StorageFormat

/// The storage's JSON files whose sizes the integrity data declares are cut off past them: an
/// endless update list or change list cost the client the transport's whole 64 MiB limit, in
/// memory and traffic, before its hash refused it.
@Suite("Storage files are read only up to their declared sizes", .timeLimit(.minutes(3)))
struct DeclaredSizeTests {
    /// A manager of `harness`'s folder fetching ExampleStorage 1.2 from an origin that sends
    /// each file as `rewrite` makes it (its path below the storage, its bytes); a 404 for a file
    /// 1.2 does not have.
    static func withRewritingOrigin(
        _ harness: SyncHarness, verifyIntegrity: Bool = true, rewrite: @escaping @Sendable (String, Data) -> Data,
        _ body: (CacheManager, ScriptedOrigin) async throws -> Void
    ) async throws {
        let root = ExampleStorageFixture.snapshot("1.2").path
        let origin = try ScriptedOrigin { request in
            let path = String(request.path.dropFirst()).removingPercentEncoding ?? ""
            guard let data = FileManager.default.contents(atPath: root + "/" + path) else {
                return ScriptedOrigin.Answer(status: 404)
            }
            return ScriptedOrigin.Answer(body: rewrite(path, data))
        }
        defer { origin.stop() }
        var configuration = harness.configuration(concurrency: 1)
        configuration.baseURL = origin.url("/")
        configuration.verifyIntegrity = verifyIntegrity
        try await body(try CacheManager(configuration: configuration), origin)
    }

    @Test(arguments: ["RXCacheConfig/listOfURLsToUpdatesByVersion.json", "changes_1.0_1.1.json"])
    func aFileLongerThanItsDeclaredSizeIsCutOffThere(padded suffix: String) async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await harness.sync()
            // 8 MiB of trailing spaces: still JSON, but not the bytes the status declares.
            let padding = Data(repeating: UInt8(ascii: " "), count: 8 << 20)
            try await Self.withRewritingOrigin(harness, rewrite: { $0.hasSuffix(suffix) ? $1 + padding : $1 }) {
                manager, _ in
                await #expect {
                    try await manager.checkForUpdates()
                } throws: { error in
                    guard let error = error as? SyncError else { return false }
                    // The origin declares the padded length: refused on its head, naming it.
                    return error.code == .integrity && error.message.contains("(its Content-Length), more than the ")
                }
            }
            try harness.expectTree(is: "1.0")
        }
    }

    /// A storage without integrity data declares no file's size, but its status declares the
    /// whole content's: an endless content file (or a gzip bomb) is cut off there, and the
    /// update refused, instead of filling the disk and being installed.
    @Test func aContentFileLargerThanTheWholeDeclaredContentIsRefused() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await harness.sync()
            // 4 MiB more than any file: the status declares 0.065 MB of content.
            let padding = Data(repeating: UInt8(ascii: "x"), count: 4 << 20)
            try await Self.withRewritingOrigin(
                harness, verifyIntegrity: false, rewrite: { $0.hasPrefix("RXCacheContent/") ? $1 + padding : $1 }
            ) { manager, _ in
                await #expect {
                    try await manager.checkForUpdates()
                } throws: { error in
                    guard let error = error as? SyncError else { return false }
                    return error.code == .integrity
                        && error.message.contains("larger than what is left of the content size")
                        && error.message.contains("status declares")
                }
            }
            try harness.expectTree(is: "1.0")
            // Nothing that large is left in the staging area.
            let staging = StagingArea(contentDirectory: harness.content).root
            let sizes = (FileManager.default.enumerator(atPath: staging)?.allObjects as? [String] ?? []).compactMap {
                (try? FileManager.default.attributesOfItem(atPath: staging + "/" + $0)[.size] as? Int) ?? nil
            }
            #expect(sizes.allSatisfy { $0 < 2 << 20 }, "\(sizes)")
            #expect(sizes.reduce(0, +) < 2 << 20, "the refused files' bytes stay behind: \(sizes)")
        }
    }

    /// Downloads of unknown size running at once share what is left of the budget, byte by
    /// byte as their files grow: the first to take it leaves the others nothing, a size a file
    /// already had (an attempt starting over) is not taken twice, and what a refused download
    /// took comes back.
    @Test func downloadsOfUnknownSizeShareTheBudget() {
        let budget = ContentBudget(limit: 1_000)
        let first = BudgetShare(of: budget)
        let second = BudgetShare(of: budget)
        #expect(first.admit(size: 600) && second.admit(size: 300))
        #expect(!second.admit(size: 500), "each used to be allowed all that was left")
        #expect(first.admit(size: 100) && first.admit(size: 600), "starting over takes nothing again")
        #expect(first.total == 600 && budget.remaining == 100)
        budget.release(second.total)
        #expect(budget.remaining == 400 && first.admit(size: 1_000) && budget.remaining == 0)
    }

    /// The archive's integrity size must agree with the status's own `zippedArchiveSizeInMB`:
    /// a restore trusted the larger one and streamed gigabytes before the hash refused them.
    @Test func anArchiveSizeTheStatusContradictsIsRefusedBeforeItIsFetched() async throws {
        try await withSyncHarness(serving: "1.2") { harness in
            let inflated: @Sendable (String, Data) -> Data = { path, data in
                guard path.hasSuffix("cacheStatus.json") else { return data }
                return Data(
                    String(decoding: data, as: UTF8.self).replacingOccurrences(
                        of: "\"size\" : 71776", with: "\"size\" : 5000000000"
                    ).utf8)
            }
            try await Self.withRewritingOrigin(harness, rewrite: inflated) { manager, origin in
                await #expect {
                    try await manager.checkForUpdates()
                } throws: { error in
                    guard let error = error as? SyncError else { return false }
                    return error.code == .invalidStatus && error.message.contains("5000000000 bytes")
                        && error.message.contains("contradicts itself")
                }
                #expect(origin.requestCount(forPath: "/RXCacheConfig/cacheStatus.json") > 0)
                #expect(!origin.requests.contains { $0.path.hasSuffix(".zip") })
            }
            #expect(!FileManager.default.fileExists(atPath: harness.content))
        }
    }
}
