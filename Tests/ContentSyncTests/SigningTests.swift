import Crypto
import Foundation
import StorageServer
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

@Suite("Signed statuses: trusted, unsigned, altered, expired, rolled back", .timeLimit(.minutes(3)))
struct SigningTests {
    static let key = Curve25519.Signing.PrivateKey()
    static var publicKey: String { key.publicKey.rawRepresentation.base64EncodedString() }

    func publishSigned(
        _ version: String, storage: String, scratch: String, initialize: Bool = false,
        key: Curve25519.Signing.PrivateKey? = SigningTests.key, lifetime: Duration = .seconds(3600)
    ) throws {
        let content = scratch + "/content-\(version)"
        if !FileManager.default.fileExists(atPath: content) {
            try PublishFixture.materializeContent(version, at: content)
        }
        var options = PublishOptions(
            storage: storage, content: content, version: v(version), baseURL: PublishFixture.base)
        options.initialize = initialize
        options.signingKey = key?.rawRepresentation.base64EncodedString()
        options.signatureLifetime = lifetime
        _ = try Publisher.publish(options)
    }

    func trusting(_ harness: SyncHarness, keys: [String] = [SigningTests.publicKey]) throws -> CacheManager {
        var configuration = harness.configuration()
        configuration.trustedSigningKeys = keys
        return try CacheManager(configuration: configuration)
    }

    /// `setting`: the setting at fault, the trusted keys only when they decide the refusal (an
    /// unsigned status or another key's), never for an altered or expired one.
    func expectRefused(
        _ manager: CacheManager, _ text: String, code: SyncError.Code = .signature,
        setting: SyncConfiguration.Setting? = nil
    ) async {
        await #expect {
            try await manager.checkForUpdates()
        } throws: { error in
            (error as! SyncError).code == code && "\(error)".contains(text) && (error as! SyncError).setting == setting
        }
    }

    @Test func aClientTrustingTheKeySyncsSignedVersionsAndAnUntrustingClientStillReadsThem() async throws {
        try await withTemporaryDirectory { scratch in
            let storage = scratch + "/storage"
            try publishSigned("1.0", storage: storage, scratch: scratch, initialize: true)
            try await withSyncHarness(storageRoot: URL(fileURLWithPath: storage)) { harness in
                try await trusting(harness).checkForUpdates()
                try publishSigned("1.1", storage: storage, scratch: scratch)
                let report = try await trusting(harness).checkForUpdates()
                #expect(report.outcome == .replayed)
                try harness.expectTree(is: "1.1")
            }
            // A client that ignores signatures reads the same storage.
            try await withSyncHarness(storageRoot: URL(fileURLWithPath: storage)) { harness in
                try await harness.sync()
                try harness.expectTree(is: "1.1")
            }
        }
    }

    /// The keys a folder was synced with stay its keys, across a reset too: a manager without
    /// them is refused as a downgrade (setting `trustedSigningKeys`) until they are forgotten.
    @Test func aFolderSyncedUnderTrustedKeysIsNotUpdatedWithoutThemUntilTheyAreForgotten() async throws {
        try await withTemporaryDirectory { scratch in
            let storage = scratch + "/storage"
            try publishSigned("1.0", storage: storage, scratch: scratch, initialize: true)
            try await withSyncHarness(storageRoot: URL(fileURLWithPath: storage)) { harness in
                try await trusting(harness).checkForUpdates()
                try publishSigned("1.1", storage: storage, scratch: scratch, key: nil)
                let untrusting = try harness.manager()
                let refused = await #expect(throws: SyncError.self) { try await untrusting.checkForUpdates() }
                #expect(
                    refused?.code == .signature && refused?.setting == .trustedSigningKeys,
                    "\(String(describing: refused))")
                try harness.expectTree(is: "1.0")

                try await untrusting.reset()
                await #expect(throws: SyncError.self, "a reset forgets content, not trust") {
                    try await untrusting.checkForUpdates()
                }

                let forgotten = try await untrusting.forgetTrustedKeys()
                #expect(forgotten == [StatusSignature.keyID(of: SigningTests.key.publicKey)])
                try await untrusting.checkForUpdates()
                try harness.expectTree(is: "1.1")
                #expect(try await untrusting.status().trustedKeyIDs.isEmpty)
            }
        }
    }

    @Test func anUnsignedStatusIsRefused() async throws {
        try await withTemporaryDirectory { scratch in
            let storage = scratch + "/storage"
            try publishSigned("1.0", storage: storage, scratch: scratch, initialize: true, key: nil)
            try await withSyncHarness(storageRoot: URL(fileURLWithPath: storage)) { harness in
                await expectRefused(try trusting(harness), "not signed", setting: .trustedSigningKeys)
                #expect(!FileManager.default.fileExists(atPath: harness.content))
            }
        }
    }

    @Test func anAlteredStatusIsRefused() async throws {
        try await withTemporaryDirectory { scratch in
            let storage = scratch + "/storage"
            try publishSigned("1.0", storage: storage, scratch: scratch, initialize: true)
            try rewrite(storage + "/RXCacheConfig/cacheStatus.json") {
                $0.replacingOccurrences(of: "\"minimalCacheVersion\":\"1.0\"", with: "\"minimalCacheVersion\":\"0.9\"")
            }
            try await withSyncHarness(storageRoot: URL(fileURLWithPath: storage)) { harness in
                await expectRefused(
                    try trusting(harness), "altered after signing (by its host, a proxy or an attacker)")
            }
        }
    }

    @Test func aStatusSignedByAnotherKeyIsRefused() async throws {
        try await withTemporaryDirectory { scratch in
            let storage = scratch + "/storage"
            try publishSigned(
                "1.0", storage: storage, scratch: scratch, initialize: true, key: Curve25519.Signing.PrivateKey())
            try await withSyncHarness(storageRoot: URL(fileURLWithPath: storage)) { harness in
                await expectRefused(try trusting(harness), "does not trust", setting: .trustedSigningKeys)
            }
        }
    }

    @Test func anExpiredStatusIsRefused() async throws {
        try await withTemporaryDirectory { scratch in
            let storage = scratch + "/storage"
            try publishSigned("1.0", storage: storage, scratch: scratch, initialize: true, lifetime: .seconds(-60))
            try await withSyncHarness(storageRoot: URL(fileURLWithPath: storage)) { harness in
                await expectRefused(try trusting(harness), "expired")
            }
        }
    }

    @Test func aRolledBackSignedStatusIsRefused() async throws {
        try await withTemporaryDirectory { scratch in
            let storage = scratch + "/storage"
            try publishSigned("1.0", storage: storage, scratch: scratch, initialize: true)
            let old = scratch + "/snapshot-1.0"
            try FileManager.default.copyItem(atPath: storage, toPath: old)
            try publishSigned("1.1", storage: storage, scratch: scratch)
            try await withSyncHarness(storageRoot: URL(fileURLWithPath: storage)) { harness in
                try await trusting(harness).checkForUpdates()
                harness.server.setRoot(URL(fileURLWithPath: old))
                await expectRefused(try trusting(harness), "rollback")
                try harness.expectTree(is: "1.1")
            }
        }
    }

    @Test func aSwappedChangeListIsRefusedAgainstTheSignedHashes() async throws {
        try await withTemporaryDirectory { scratch in
            let storage = scratch + "/storage"
            try publishSigned("1.0", storage: storage, scratch: scratch, initialize: true)
            let old = scratch + "/snapshot-1.0"
            try FileManager.default.copyItem(atPath: storage, toPath: old)
            try publishSigned("1.1", storage: storage, scratch: scratch)
            try rewrite(storage + "/RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json") { $0 + "\n" }
            try await withSyncHarness(storageRoot: URL(fileURLWithPath: old)) { harness in
                try await trusting(harness).checkForUpdates()
                harness.server.setRoot(URL(fileURLWithPath: storage))
                await expectRefused(try trusting(harness), "changes_1.0_1.1.json", code: .integrity)
                try harness.expectTree(is: "1.0")
            }
        }
    }
}
