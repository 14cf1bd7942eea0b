import Foundation
import GRDB
import Testing
import Transport

@testable import ItemCache

/// A secret in a URL (a token parameter, a token as the user name, a nested URL's password, a
/// secret path parameter) never enters a key, the index or its files, while keys with different
/// secrets stay apart.
@Suite("Cache keys hold no secret")
struct SecretFreeKeyTests {
    static let hostile: [(url: String, secret: String)] = [
        ("https://a.example/x?access_token=S3CRETa1&w=200", "S3CRETa1"),
        ("https://a.example/x?X-Amz-Signature=S3CRETb2&X-Amz-Expires=60", "S3CRETb2"),
        ("https://a.example/x?%74oken=S3CRETc3", "S3CRETc3"),
        ("https://ghp_S3CRETd4abcdef:x-oauth-basic@a.example/x", "S3CRETd4"),
        ("https://S3CRETe5S3CRETe5S3CRETe5S3CRETe5:@a.example/x", "S3CRETe5"),
        ("https://a.example/x?next=https://bob:S3CRETf6@b.example/", "S3CRETf6"),
        ("https://a.example/x?next=https%3A%2F%2Fbob%3AS3CRETg7%40b.example%2F", "S3CRETg7"),
        ("https://a.example/app;jsessionid=S3CRETh8/page", "S3CRETh8"),
        ("https://a.example/x?sig=S3CRETi9&sig=S3CRETi9b", "S3CRETi9"),
    ]

    @Test(arguments: hostile)
    func theKeyHoldsNoSecret(url: String, secret: String) throws {
        let key = try CacheKey(url: URL(string: url)!)
        #expect(!key.rawValue.contains(secret), "\(key.rawValue)")
        #expect(key.rawValue.contains(CacheKey.digestMark))
        // Another secret is another key; the same secret spelled alike is the same key.
        let other = try CacheKey(url: URL(string: url.replacingOccurrences(of: secret, with: "OTHERxyz"))!)
        #expect(other != key)
        #expect(try CacheKey(url: URL(string: url)!) == key)
    }

    @Test(arguments: [
        // What names no secret stays readable.
        ("https://a.example/x?w=200&side=left", "https://a.example/x?side=left&w=200"),
        ("https://alice:pw@a.example/x", "https://alice:***@a.example/x"),
        ("https://a.example/app;v=2/page", "https://a.example/app;v=2/page"),
        ("https://a.example/x?next=https://b.example/y", "https://a.example/x?next=https://b.example/y"),
    ])
    func whatIsNoSecretStaysReadable(url: String, expected: String) throws {
        #expect(try CacheKey(url: URL(string: url)!).rawValue == expected)
    }

    @Test func aParameterNamedAsASecretJoinsAsItsDigest() throws {
        let key = try CacheKey(
            url: URL(string: "https://a.example/x")!, parameters: RequestParameters(["api_key": "S3CRETj0"]))
        #expect(key.rawValue == "https://a.example/x?api_key=" + CacheKey.digest("S3CRETj0"))
    }

    /// The index file and its log never hold the secret of a key stored through the store.
    @Test func theIndexFilesNeverHoldTheSecret() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        do {
            let store = try ItemStoreTests.open(folder, limit: 1 << 30, inline: 16)
            for (index, (url, _)) in Self.hostile.enumerated() {
                try await store.store(
                    ItemStoreTests.bytes(index % 2 == 0 ? 8 : 64), for: CacheKey(url: URL(string: url)!))
            }
        }
        // Opened again (its migrations done): every value is found under its key.
        let store = try ItemStoreTests.open(folder, limit: 1 << 30, inline: 16)
        for (index, (url, _)) in Self.hostile.enumerated() {
            #expect(
                try await store.item(for: CacheKey(url: URL(string: url)!))?.item.data
                    == ItemStoreTests.bytes(index % 2 == 0 ? 8 : 64))
        }
        try Self.expectNoSecret(in: folder)
    }

    /// An index written before keys were secret-free loses the rows that keep a secret when it
    /// opens, their files with them; the other rows and their values stay.
    @Test func anOlderIndexLosesTheRowsKeepingASecret() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        chmod(folder, 0o700)
        let kept = try CacheKey(url: URL(string: "https://a.example/keep?w=1")!)
        do {
            // The older version's store writes a value the plain way, then its rows are given the
            // keys it made before (a secret in the clear), as that version's index held them.
            let store = try ItemStoreTests.open(folder, limit: 1 << 30, inline: 16)
            try await store.store(ItemStoreTests.bytes(100, 3), for: kept)
            for (index, (url, _)) in Self.hostile.enumerated() {
                try await store.store(
                    ItemStoreTests.bytes(index % 2 == 0 ? 8 : 64), for: ItemStoreTests.key("\(index)"))
            }
            try await store.disk.pool.write { db in
                for (index, (url, _)) in Self.hostile.enumerated() {
                    try db.execute(
                        sql: "UPDATE item SET key = ?, url = ? WHERE key = ?",
                        arguments: [url, url, ItemStoreTests.key("\(index)").rawValue])
                    try db.execute(
                        sql: "INSERT INTO fetchFailure (key, at, code, message) VALUES (?, 0, 'http', 'x')",
                        arguments: [url + "#\(index)"])
                }
                try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'v11-secret-free-keys'")
            }
        }
        let filesBefore = try Self.blobFiles(in: folder)
        #expect(filesBefore.count >= 2, "some values were files")
        do {
            let store = try ItemStoreTests.open(folder, limit: 1 << 30, inline: 16)
            let (rows, failures) = try await store.disk.pool.read { db in
                (
                    try String.fetchAll(db, sql: "SELECT key FROM item"),
                    try Int.fetchOne(db, sql: "SELECT count(*) FROM fetchFailure")
                )
            }
            #expect(rows == [kept.rawValue])
            #expect(failures == 0)
            #expect(try await store.item(for: kept)?.item.data == ItemStoreTests.bytes(100, 3))
            #expect(try Self.blobFiles(in: folder).count == 1, "the rows' files went with the reconciliation")
            #expect(store.openingRepairs.orphanFiles == filesBefore.count - 1)
        }
        // Closed: the log is copied back. The rows were erased in place, not only unlinked.
        try Self.expectNoSecret(in: folder)
    }

    static func blobFiles(in folder: String) throws -> [String] {
        let enumerator = FileManager.default.enumerator(atPath: folder)
        var files: [String] = []
        while let path = enumerator?.nextObject() as? String {
            if path.split(separator: "/").count == 2, !path.hasPrefix(".") { files.append(path) }
        }
        return files
    }

    /// No file of the folder (index, log, values) holds any of the hostile secrets.
    static func expectNoSecret(in folder: String) throws {
        let enumerator = FileManager.default.enumerator(atPath: folder)
        while let path = enumerator?.nextObject() as? String {
            guard let data = FileManager.default.contents(atPath: folder + "/" + path) else { continue }
            for (_, secret) in hostile {
                #expect(data.range(of: Data(secret.utf8)) == nil, "\(path) holds \(secret)")
            }
        }
    }
}
