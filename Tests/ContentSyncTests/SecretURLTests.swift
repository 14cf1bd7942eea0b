import Foundation
import GRDB
import StorageServer
import Testing
import Transport

@testable import ContentSync

/// A base URL may carry a password or a token (`https://alice:S3cret@host/`, `https://TOKEN@host/`):
/// the client fetches with it, and no message, status or state database row shows it.
@Suite("A base URL's password or token is used, never shown or stored", .timeLimit(.minutes(3)))
struct SecretURLTests {
    static let password = "S3cretPW-71"

    /// `server`'s base URL with `alice:<password>` as its user info.
    static func withPassword(_ server: URL) throws -> URL {
        var parts = try #require(URLComponents(url: server, resolvingAgainstBaseURL: false))
        parts.user = "alice"
        parts.password = password
        return try #require(parts.url)
    }

    /// The bytes of the state database and its WAL, as text: whatever SQLite wrote.
    static func stateBytes(_ statePath: String) -> String {
        ["", "-wal", "-shm"].compactMap { FileManager.default.contents(atPath: statePath + $0) }
            .map { String(decoding: $0, as: UTF8.self) }.joined()
    }

    @Test func errorsStatusAndStateDatabaseShowTheUserNameButNeverThePassword() async throws {
        try await withTemporaryDirectory { root in
            try await withStorageServer(root: ExampleStorageFixture.snapshot("1.2")) { server in
                let base = try Self.withPassword(server.baseURL!)
                let state = root + "/state.sqlite"
                let configuration = SyncConfiguration(
                    baseURL: base, contentDirectory: root + "/content", stateDatabasePath: state)
                #expect(try await CacheManager(configuration: configuration).checkForUpdates().toVersion.text == "1.2")

                // The storage went back: the engine's own refusal quotes the status URL.
                server.setRoot(ExampleStorageFixture.snapshot("1.0"))
                let rollback = await #expect(throws: SyncError.self) {
                    try await CacheManager(configuration: configuration).checkForUpdates()
                }
                #expect(rollback?.message.contains("alice:***@") == true, "\(String(describing: rollback))")
                // A document error quotes the URL it came from (StorageFormat knows no redaction).
                let broken = try copySnapshot("1.2", to: root + "/broken")
                try "{\"actualCacheVersion\": [] }".write(
                    toFile: broken.path + "/RXCacheConfig/cacheStatus.json", atomically: true, encoding: .utf8)
                server.setRoot(broken)
                let invalid = await #expect(throws: SyncError.self) {
                    try await CacheManager(configuration: configuration).checkForUpdates()
                }
                #expect(invalid?.code == .invalidStatus)
                #expect(invalid?.message.contains("alice:***@127.0.0.1") == true, "\(String(describing: invalid))")
                for error in [rollback, invalid].compactMap({ $0 }) {
                    #expect(
                        !error.message.contains(Self.password) && !error.description.contains(Self.password), "\(error)"
                    )
                }

                let status = try await SyncStatus.read(
                    statePath: state, contentDirectory: root + "/content", historyLimit: 10)
                #expect(status.baseURL == Redaction.url(base) && status.baseURL?.hasPrefix("http://alice:***@") == true)
                let shown = String(decoding: try JSONEncoder().encode(status), as: UTF8.self)
                #expect(shown.contains("alice:***@") && !shown.contains(Self.password), "\(shown)")
                #expect(!Self.stateBytes(state).contains(Self.password), "the state database keeps no password")
                #expect(
                    server.requests().contains { $0.headers["authorization"]?.hasPrefix("Basic ") == true },
                    "the password was sent")
            }
        }
    }

    @Test func migrationRedactsWhatOlderVersionsStored() async throws {
        try await withTemporaryDirectory { root in
            let path = root + "/state.sqlite"
            let secret = "https://alice:\(Self.password)@host/s/"
            let token = "https://TOKEN-\(Self.password)@host/s/"
            do {
                let store = try StateStore(path: path)
                try await store.pool.write { db in
                    // What a state database written before "v8" held.
                    try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'v8: no secrets in URLs'")
                    try db.execute(
                        sql: """
                            INSERT INTO syncState (id, localVersion, state, lastError, contentDirectory, baseURL) VALUES (1, '1.0', 'failed', ?, ?, ?);
                            INSERT INTO cachedResource (url, etag, body, fetchedAt) VALUES (?, '"e"', x'7B7D', '2026-01-01 00:00:00');
                            INSERT INTO cachedResource (url, etag, body, fetchedAt) VALUES ('https://host/s/kept.json', '"e"', x'7B7D', '2026-01-01 00:00:00');
                            INSERT INTO pendingPlan (id, identity, kind, toVersion, phase, createdAt) VALUES (1, ?, 'restore', '1.1', 'staging', '2026-01-01 00:00:00');
                            INSERT INTO completedDownload (planIdentity, path, bytes) VALUES (?, 'a.txt', 1);
                            INSERT INTO updateHistory (startedAt, finishedAt, kind, outcome, error, bytesDownloaded, filesDownloaded)
                                VALUES ('2026-01-01 00:00:00', '2026-01-01 00:00:00', 'check', 'failed', ?, 0, 0);
                            """,
                        arguments: [
                            "GET \(secret)RXCacheConfig/cacheStatus.json failed", root + "/content", secret,
                            token + "RXCacheConfig/cacheStatus.json", "restore:1.1:\(secret)a.zip",
                            "restore:1.1:\(secret)a.zip",
                            "GET \(token) failed",
                        ])
                }
            }
            let store = try StateStore(path: path)
            let status = try await SyncStatus.read(
                store, contentDirectory: root + "/content", running: nil, historyLimit: 5)
            #expect(status.baseURL == "https://alice:***@host/s/")
            #expect(status.lastError == "GET https://alice:***@host/s/RXCacheConfig/cacheStatus.json failed")
            #expect(status.history.first?.message == "GET https://***@host/s/ failed")
            let plan = try await store.pendingPlan()
            #expect(plan?.identity == "restore:1.1:https://alice:***@host/s/a.zip")
            #expect(
                try await store.completedDownloads(planIdentity: "restore:1.1:https://alice:***@host/s/a.zip") == [
                    "a.txt"
                ],
                "the plan keeps its downloads")
            let keys = try await store.pool.read { db in try String.fetchAll(db, sql: "SELECT url FROM cachedResource")
            }
            #expect(
                keys == ["https://host/s/kept.json"], "a stored file keyed by a secret URL is dropped; the others stay")
            _ = try await store.pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
            #expect(!Self.stateBytes(path).contains(Self.password))
        }
    }

    /// v17: a `?token=` query kept by a version before it (in an error, the history and a cached
    /// file's key) is redacted the same way.
    @Test func migrationRedactsSecretQueriesOlderVersionsStored() async throws {
        try await withTemporaryDirectory { root in
            let path = root + "/state.sqlite"
            let list = "https://raw.example/o/r/main/RXCacheConfig/changes_1_2.json?token=Q-\(Self.password)"
            do {
                let store = try StateStore(path: path)
                try await store.pool.write { db in
                    try db.execute(
                        sql: "DELETE FROM grdb_migrations WHERE identifier = 'v17: no secrets in URL queries'")
                    try db.execute(
                        sql: """
                            INSERT INTO syncState (id, localVersion, state, lastError, contentDirectory, baseURL) VALUES (1, '1.0', 'failed', ?, ?, 'https://raw.example/o/r/main/');
                            INSERT INTO cachedResource (url, etag, body, fetchedAt) VALUES (?, '"e"', x'7B7D', '2026-01-01 00:00:00');
                            INSERT INTO updateHistory (startedAt, finishedAt, kind, outcome, error, bytesDownloaded, filesDownloaded)
                                VALUES ('2026-01-01 00:00:00', '2026-01-01 00:00:00', 'check', 'failed', ?, 0, 0);
                            """,
                        arguments: ["GET \(list) answered HTTP 404", root + "/content", list, "GET \(list) failed"])
                }
            }
            let store = try StateStore(path: path)
            let status = try await SyncStatus.read(
                store, contentDirectory: root + "/content", running: nil, historyLimit: 5)
            let shown = "https://raw.example/o/r/main/RXCacheConfig/changes_1_2.json?token=***"
            #expect(status.lastError == "GET \(shown) answered HTTP 404")
            #expect(status.history.first?.message == "GET \(shown) failed")
            let keys = try await store.pool.read { db in try String.fetchAll(db, sql: "SELECT url FROM cachedResource")
            }
            #expect(keys.isEmpty, "a stored file keyed by a URL with a secret query is dropped")
            _ = try await store.pool.writeWithoutTransaction { db in try db.checkpoint(.truncate) }
            #expect(!Self.stateBytes(path).contains(Self.password))
        }
    }
}
