import Foundation
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

@Suite("The tree check hashes only new or changed files; verify hashes everything", .timeLimit(.minutes(3)))
struct FingerprintCacheTests {
    /// The identities of every file under `folder`.
    func identities(under folder: String) throws -> Set<FileIdentity> {
        var result = Set<FileIdentity>()
        for path in try FileManager.default.subpathsOfDirectory(atPath: folder) {
            if let identity = FileIdentity(path: folder + "/" + path) { result.insert(identity) }
        }
        return result
    }

    /// The stager loads the stored rows while files arrive: a row naming the inode number of a
    /// file since deleted must not replace what this process hashed for the new file that got
    /// the number, whichever comes first.
    @Test(arguments: [true, false])
    func aFileHashedByThisProcessOutranksAStoredRowForItsInode(loadFirst: Bool) {
        let identity = FileIdentity(device: 1, inode: 42, size: 10, modifiedNanoseconds: 7)
        let stale = FileFingerprint(size: 10, sha256: String(repeating: "a", count: 64))
        let fresh = FileFingerprint(size: 10, sha256: String(repeating: "b", count: 64))
        let other = FileIdentity(device: 1, inode: 43, size: 10, modifiedNanoseconds: 7)
        let cache = FingerprintCache()
        if loadFirst { cache.load([identity: stale, other: stale]) }
        cache.insert(fresh, for: identity)
        if !loadFirst { cache.load([identity: stale, other: stale]) }
        #expect(cache.lookup(identity) == fresh)
        #expect(cache.lookup(other) == stale)
    }

    @Test func eachVersionRemembersItsFilesAndAReplayReusesTheKeptOnes() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await harness.sync()
            let store = try StateStore(path: harness.state)
            let first = try await store.fileFingerprints()
            #expect(Set(first.keys) == (try identities(under: harness.content)))
            #expect(first.count == ExampleStorageFixture.manifest("1.0").files.count)

            harness.serve("1.1")
            let report = try await harness.sync()
            #expect(report.outcome == .replayed)
            let second = try await store.fileFingerprints()
            // Checked from the index, the replay adds its downloads' rows and keeps the others:
            // every file of 1.1 is known, and the only other rows are 1.0's.
            let current = try identities(under: harness.content)
            #expect(Set(second.keys).isSuperset(of: current))
            #expect(Set(second.keys).subtracting(current).isSubset(of: Set(first.keys)))
            // Kept files are hard links: the same identity, so the check took them from the cache.
            #expect(Set(first.keys).intersection(second.keys).count >= report.filesReused)
            for (identity, fingerprint) in second where first[identity] != nil {
                #expect(first[identity] == fingerprint)
            }
        }
    }

    @Test func cacheHitsSkipReadingAndChangedIdentitiesAreHashedAgain() async throws {
        try await withTemporaryDirectory { folder in
            let path = folder + "/a.txt"
            let name = try SafeRelativePath(validating: "a.txt")
            try "first".write(toFile: path, atomically: false, encoding: .utf8)
            let cache = FingerprintCache()
            let hashed = try #require(try ContentTree.scanLocal(folder, cache: cache).tree.files[name])
            #expect(hashed == (try ContentTree.fingerprint(of: path)))
            let identity = try #require(FileIdentity(path: path))
            #expect(cache.lookup(identity) == hashed, "the scan remembers what it hashed")
            // A planted entry proves a hit does not read the file.
            let planted = FileFingerprint(size: hashed.size, sha256: String(repeating: "0", count: 64))
            cache.insert(planted, for: identity)
            #expect(try ContentTree.scanLocal(folder, cache: cache).tree.files[name] == planted)
            // Rewritten (new size and time): hashed again.
            try "second version".write(toFile: path, atomically: false, encoding: .utf8)
            #expect(
                try ContentTree.scanLocal(folder, cache: cache).tree.files[name]
                    == (try ContentTree.fingerprint(of: path)))
        }
    }

    /// Overwrites the first bytes of `path` in place and puts its times back, as bit rot would:
    /// same inode, size and modification time. Returns its status from before.
    func rot(_ path: String) throws -> stat {
        var info = stat()
        #expect(lstat(path, &info) == 0)
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: path))
        try handle.write(contentsOf: Data("XXXX".utf8))
        try handle.close()
        var times = [info.st_atim, info.st_mtim]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        return info
    }

    @Test func verifyFindsBitRotThatKeepsSizeAndTime() async throws {
        try await withSyncHarness(serving: "1.4") { harness in
            try await harness.sync()
            // Flip bytes in place and put the modification time back: the quick check cannot see it.
            let path = harness.content + "/README.txt"
            let info = try rot(path)
            #expect(
                FileIdentity(path: path)?.modifiedNanoseconds == Int64(info.st_mtim.tv_sec) * 1_000_000_000
                    + Int64(info.st_mtim.tv_nsec))

            let report = try await harness.manager().verify(repair: true)
            #expect(report.differences.contains { $0.contains("README.txt") })
            #expect(report.repaired >= 1)
            try harness.expectTree(is: "1.4")
        }
    }

    /// A repair trusts what the scan before it read (the staged tree is hard links to the same
    /// files) instead of reading every byte again, fetches the manifest once, and records every
    /// file's fingerprint and the tree index: the next update reads nothing again either. Before,
    /// the repair hashed the whole tree twice more and recorded only the files it downloaded.
    @Test(arguments: [false, true])
    func aRepairReadsTheTreeOnceAndRecordsItWhole(periodic: Bool) async throws {
        try await withSyncHarness(serving: "1.4") { harness in
            try await harness.sync()
            let store = try StateStore(path: harness.state)
            // Bit rot that kept the size and time: only reading the bytes finds it, so a periodic
            // check (which trusts the recorded identities) is given a deletion instead.
            let readme = harness.content + "/README.txt"
            if periodic {
                try FileManager.default.removeItem(atPath: readme)
            } else {
                _ = try rot(readme)
            }
            try "x".write(toFile: harness.content + "/extra.txt", atomically: true, encoding: .utf8)
            harness.server.resetLog()

            if periodic {
                let report = try await harness.sync(fullCheckInterval: .zero)
                #expect(report.repairedFiles >= 2)
            } else {
                let report = try await harness.manager().verify(repair: true)
                #expect(report.repaired >= 2)
                #expect(report.differences.contains { $0.contains("README.txt") })
            }
            try harness.expectTree(is: "1.4")
            let manifestFetches = harness.server.requests().filter { $0.path.hasSuffix("/contentManifest.json") }
            #expect(manifestFetches.count == 1, "\(manifestFetches.map(\.path))")
            let stored = try await store.fileFingerprints()
            #expect(Set(stored.keys) == (try identities(under: harness.content)))
            #expect(stored.count == ExampleStorageFixture.manifest("1.4").files.count)
            #expect(try await store.treeIndex()?.version == "1.4")
            // The next update finds nothing to read or fetch.
            harness.server.resetLog()
            #expect(try await harness.sync().outcome == .upToDate)
            #expect(harness.contentDownloads().isEmpty)
        }
    }
}
