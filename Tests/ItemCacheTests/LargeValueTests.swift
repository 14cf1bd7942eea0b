import FileKit
import Foundation
import Testing

@testable import ItemCache

/// A value larger than the memory tier's item limit moves as a file: the fetched body is the
/// very file the cache keeps, a hit hands over the open file, and neither is held whole.
@Suite("Large values as files through the loader")
struct LargeValueTests {
    static func random(_ count: Int, seed: UInt64) -> Data {
        var generator = seed
        var bytes = [UInt8](repeating: 0, count: count)
        for index in 0..<count {
            if index % 8 == 0 { generator = generator &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407 }
            bytes[index] = UInt8(truncatingIfNeeded: generator >> (8 * UInt64(index % 8)))
        }
        return Data(bytes)
    }

    static func inode(_ descriptor: Int32) -> ino_t {
        var status = stat()
        return fstat(descriptor, &status) == 0 ? status.st_ino : 0
    }

    /// The regular files under the cache's `blobs` folder, by inode.
    static func blobs(_ folder: String) -> [ino_t: String] {
        var found: [ino_t: String] = [:]
        let root = folder + "/blobs"
        for shard in (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [] {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: root + "/" + shard)) ?? [] {
                var status = stat()
                if lstat(root + "/" + shard + "/" + name, &status) == 0 { found[status.st_ino] = shard + "/" + name }
            }
        }
        return found
    }

    @Test("a large body is kept as the file it was downloaded into; hits hand over its open file, never memory")
    func largeValuesMoveAsFiles() async throws {
        let fixture = try await LoaderFixture { $0.memory.itemBytes = 1 << 20 }
        defer { Task { await fixture.close() } }
        let big = Self.random(3 << 20 + 17, seed: 9)
        try big.write(to: fixture.content.appendingPathComponent("big.bin"))
        try fixture.publish("small.txt", String(repeating: "s", count: 100_000))
        let url = fixture.url("big.bin")

        let fetched = try await fixture.loader.value(for: url)
        #expect(fetched.source == .network)
        #expect(fetched.isStored)
        #expect(fetched.size == Int64(big.count))
        let file = try #require(fetched.file, "a 3 MiB value over a 1 MiB item limit should come as a file")
        #expect(try file.data() == big)
        // Linked, not copied: the only blob is the very file the body was downloaded into.
        let blobs = Self.blobs(fixture.folder)
        #expect(blobs.count == 1)
        #expect(blobs[Self.inode(file.descriptor)] != nil)
        #expect(fixture.store.memory.value(for: fetched.key) == nil)

        // A hit: the stored file, opened and checked, not read into memory.
        let hit = try await fixture.loader.value(for: url)
        #expect(hit.source == .disk)
        let stored = try #require(hit.file, "a hit of a large value should come as its file")
        #expect(Self.inode(stored.descriptor) == Self.inode(file.descriptor))
        var chunks = 0
        var collected = Data()
        try hit.forEachChunk(size: 1 << 20) { chunk in
            chunks += 1
            collected.append(contentsOf: chunk)
        }
        #expect(chunks == 4)
        #expect(collected == big)
        #expect(fixture.store.memory.value(for: hit.key) == nil)
        // The Data API still gives the bytes, read from the file.
        let item = try await fixture.loader.item(for: url)
        #expect(item.source == .disk)
        #expect(item.data == big)
        #expect(item.item.file == nil)
        #expect(fixture.server.requestCount(forPath: "/big.bin") == 1)

        // A small value stays Data and memory answers it next.
        let small = try await fixture.loader.value(for: fixture.url("small.txt"))
        #expect(small.file == nil, "a 100 kB value under the item limit should come as bytes")
        #expect(try small.data().count == 100_000)
        #expect(try await fixture.loader.value(for: fixture.url("small.txt")).source == .memory)
    }

    @Test("callers that share one fetch of a large value through item(for:) share one copy of its bytes")
    func sharedFetchSharesOneCopy() async throws {
        let fixture = try await LoaderFixture { $0.memory.itemBytes = 1 << 20 }
        defer { Task { await fixture.close() } }
        let big = Self.random(2 << 20, seed: 8)
        try big.write(to: fixture.content.appendingPathComponent("s.bin"))
        fixture.server.injectFault(.delay(seconds: 0.3), forPath: "/s.bin", times: 1)
        let url = fixture.url("s.bin")
        let loader = fixture.loader
        let addresses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<12 {
                group.addTask {
                    let loaded = try await loader.item(for: url)
                    #expect(loaded.data == big)
                    return loaded.data.withUnsafeBytes { Int(bitPattern: $0.baseAddress) }
                }
            }
            var all: Set<Int> = []
            for try await address in group { all.insert(address) }
            return all
        }
        #expect(fixture.server.requestCount(forPath: "/s.bin") == 1)
        #expect(addresses.count == 1, "12 callers of one fetch hold \(addresses.count) copies of its 2 MiB")
    }

    @Test("a large value revalidates without being read, and a replaced one is fetched whole again")
    func largeValuesRevalidate() async throws {
        let fixture = try await LoaderFixture { $0.memory.itemBytes = 1 << 20 }
        defer { Task { await fixture.close() } }
        let big = Self.random(2 << 20, seed: 3)
        try big.write(to: fixture.content.appendingPathComponent("r.bin"))
        fixture.server.setCacheControl("max-age=0", forPath: "/r.bin")
        let url = fixture.url("r.bin")
        let first = try await fixture.loader.value(for: url)
        #expect(first.source == .network)
        #expect(first.info.etag != nil)

        fixture.server.setCacheControl("max-age=600", forPath: "/r.bin")
        let second = try await fixture.loader.value(for: url)
        #expect(second.source == .revalidated)
        #expect(second.file != nil, "a revalidated large value should stay a file")
        #expect(try second.data() == big)
        let expires = try #require(second.info.expires)
        #expect(expires > Date().addingTimeInterval(500))
        #expect(fixture.server.requests().filter { $0.path == "/r.bin" }.last?.status == 304)
        #expect(try await fixture.loader.value(for: url).source == .disk)

        // Replaced on the server: the new bytes, in a new file; the old blob goes.
        let changed = Self.random(2 << 20, seed: 4)
        try changed.write(to: fixture.content.appendingPathComponent("r.bin"))
        let reloaded = try await fixture.loader.value(for: url, options: LoadOptions(policy: .reload))
        #expect(reloaded.source == .network)
        #expect(try reloaded.data() == changed)
        #expect(Self.blobs(fixture.folder).count == 1)
        #expect(try await fixture.loader.item(for: url).data == changed)
    }

    @Test("a value file changed on disk after its check fails to read, never hands over other bytes")
    func aChangedFileIsAnError() async throws {
        let fixture = try await LoaderFixture { $0.memory.itemBytes = 1 << 20 }
        defer { Task { await fixture.close() } }
        let big = Self.random(2 << 20, seed: 5)
        try big.write(to: fixture.content.appendingPathComponent("d.bin"))
        let url = fixture.url("d.bin")
        _ = try await fixture.loader.value(for: url)
        let hit = try await fixture.loader.value(for: url)
        let file = try #require(hit.file, "a large hit should come as a file")
        // A neighbour writes into the stored file after the check (same size).
        let path = fixture.folder + "/blobs/" + (Self.blobs(fixture.folder)[Self.inode(file.descriptor)] ?? "")
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seek(toOffset: 1_500_000)
        handle.write(Data([0x55, 0xAA]))
        try handle.close()
        #expect(throws: ItemCacheError.self) { try file.data() }
        var delivered = 0
        #expect(throws: ItemCacheError.self) { try hit.forEachChunk { delivered += $0.count } }
        // The next load finds the damage at its check: a miss, fetched again, the right bytes.
        let again = try await fixture.loader.value(for: url)
        #expect(again.source == .network)
        #expect(try again.data() == big)
    }

    @Test(
        "a large value's blob swapped for a symlink, a fifo or a shorter file is a miss, refetched; nothing outside is read"
    )
    func aHostileBlobIsAMiss() async throws {
        let fixture = try await LoaderFixture { $0.memory.itemBytes = 1 << 20 }
        defer { Task { await fixture.close() } }
        let big = Self.random(2 << 20, seed: 11)
        try big.write(to: fixture.content.appendingPathComponent("h.bin"))
        let url = fixture.url("h.bin")
        let outside = fixture.folder + "-outside"
        let outsideBytes = Self.random(2 << 20, seed: 12)
        try outsideBytes.write(to: URL(fileURLWithPath: outside))
        defer { try? FileManager.default.removeItem(atPath: outside) }
        let plants: [(String) -> Void] = [
            { path in _ = symlink(outside, path) },
            { path in _ = mkfifo(path, 0o600) },
            { path in try? Data(count: 1000).write(to: URL(fileURLWithPath: path)) },
        ]
        for (round, plant) in plants.enumerated() {
            _ = try await fixture.loader.value(for: url, options: LoadOptions(policy: .reload))
            let blobs = Self.blobs(fixture.folder)
            #expect(blobs.count == 1)
            let path = fixture.folder + "/blobs/" + (blobs.values.first ?? "")
            #expect(unlink(path) == 0)
            plant(path)
            let again = try await fixture.loader.value(for: url)
            #expect(again.source == .network, "round \(round): the planted file is no hit")
            #expect(try again.data() == big, "round \(round)")
        }
        #expect(fixture.server.requestCount(forPath: "/h.bin") == 6)
        #expect(try Data(contentsOf: URL(fileURLWithPath: outside)) == outsideBytes, "the link's target is untouched")
    }

    @Test(
        "a large file:// item is copied into the cache in chunks; one past the disk limit is checked in place, not kept"
    )
    func largeFileItemsMoveAsFiles() async throws {
        let fixture = try await LoaderFixture {
            $0.memory.itemBytes = 1 << 20
            $0.diskLimit = 12 << 20
        }
        defer { Task { await fixture.close() } }
        let big = Self.random(3 << 20 + 5, seed: 21)
        let source = fixture.content.appendingPathComponent("local.bin")
        try big.write(to: source)
        var sourceStatus = stat()
        #expect(stat(source.path, &sourceStatus) == 0)

        let fetched = try await fixture.loader.value(for: source)
        #expect(fetched.source == .network)
        #expect(fetched.isStored)
        let file = try #require(fetched.file, "a 3 MiB file over a 1 MiB item limit should come as a file")
        #expect(try file.data() == big)
        // The cache keeps its own copy (the source may change), made as one file and linked.
        let blobs = Self.blobs(fixture.folder)
        #expect(blobs.count == 1)
        #expect(blobs[Self.inode(file.descriptor)] != nil)
        #expect(Self.inode(file.descriptor) != sourceStatus.st_ino)
        #expect(fixture.store.memory.value(for: fetched.key) == nil)
        let hit = try await fixture.loader.value(for: source)
        #expect(hit.source == .revalidated || hit.source == .disk)
        #expect(try hit.data() == big)

        // Past what the cache can hold: delivered as the source itself, checked, kept nowhere.
        let huge = Self.random(16 << 20, seed: 22)
        let hugeSource = fixture.content.appendingPathComponent("huge.bin")
        try huge.write(to: hugeSource)
        var hugeStatus = stat()
        #expect(stat(hugeSource.path, &hugeStatus) == 0)
        let delivered = try await fixture.loader.value(for: hugeSource)
        #expect(!delivered.isStored)
        #expect(delivered.storeError?.code == .tooLarge)
        let inPlace = try #require(delivered.file, "a 16 MiB file past a 12 MiB cache should come as a file")
        #expect(Self.inode(inPlace.descriptor) == hugeStatus.st_ino)
        #expect(try inPlace.data() == huge)
        #expect(Self.blobs(fixture.folder).count == 1)

        // Changed after its check: a read fails, never hands over other bytes.
        let handle = try FileHandle(forWritingTo: hugeSource)
        try handle.seek(toOffset: 9_000_000)
        handle.write(Data([0x55, 0xAA]))
        try handle.close()
        // The source changed, not the cache folder: a fetch failure (exit 3), not a storage one.
        let changed = #expect(throws: ItemCacheError.self) { try inPlace.forEachChunk { _ in } }
        #expect(changed?.code == .fetch, "\(String(describing: changed))")
    }

    @Test("a file:// item replaced by another with the same time, or written with its time put back, is read again")
    func fileItemsAreValidatedByMoreThanTheirTime() async throws {
        let fixture = try await LoaderFixture { $0.memory.itemBytes = 1 << 20 }
        defer { Task { await fixture.close() } }
        let path = fixture.content.appendingPathComponent("same-time.bin")
        let first = Self.random(2 << 20, seed: 31)
        try first.write(to: path)
        var status = stat()
        #expect(stat(path.path, &status) == 0)
        let time = [status.st_atim, status.st_mtim]
        let stale = LoadOptions(expiry: .lifetime(.zero))
        // A file changed in the last 2 s gets no validator (FileFetcher.recentSeconds).
        try await Task.sleep(for: .milliseconds(2_100))
        #expect(try await fixture.loader.value(for: path, options: stale).data() == first)
        #expect(try await fixture.loader.value(for: path, options: stale).source == .revalidated)

        // Another file put in its place (`cp -p b a.tmp && mv a.tmp a`): same time, other inode.
        let second = Self.random(3 << 20, seed: 32)
        let temporary = fixture.content.appendingPathComponent("same-time.tmp")
        try second.write(to: temporary)
        #expect(utimensat(AT_FDCWD, temporary.path, time, 0) == 0)
        #expect(rename(temporary.path, path.path) == 0)
        let replaced = try await fixture.loader.value(for: path, options: stale)
        #expect(replaced.source == .network)
        #expect(try replaced.data() == second)

        // Written in place, same size, its time put back (`rsync --inplace -t`): the change
        // time, which no one sets, tells.
        var third = second
        third[100] ^= 0xFF
        let handle = try FileHandle(forWritingTo: path)
        try handle.seek(toOffset: 100)
        handle.write(third[100..<101])
        try handle.close()
        #expect(utimensat(AT_FDCWD, path.path, time, 0) == 0)
        let rewritten = try await fixture.loader.value(for: path, options: stale)
        #expect(rewritten.source == .network)
        #expect(try rewritten.data() == third)
    }

    @Test("a large file:// item loaded with no-store is handed over in place: no copy in the cache folder")
    func aNoStoreFileItemMakesNoCopy() async throws {
        let fixture = try await LoaderFixture { $0.memory.itemBytes = 1 << 20 }
        defer { Task { await fixture.close() } }
        let big = Self.random(3 << 20, seed: 33)
        let path = fixture.content.appendingPathComponent("no-store.bin")
        try big.write(to: path)
        var status = stat()
        #expect(stat(path.path, &status) == 0)
        for options in [LoadOptions(expiry: .dontStore), LoadOptions(headers: ["Cache-Control": "no-store"])] {
            let loaded = try await fixture.loader.value(for: path, options: options)
            #expect(!loaded.isStored)
            let file = try #require(loaded.file)
            #expect(Self.inode(file.descriptor) == status.st_ino, "the source itself, checked")
            #expect(try file.data() == big)
            #expect(Self.blobs(fixture.folder).isEmpty)
        }
    }

    @Test("HTTPFetcher stages a large body in the cache folder only when the loader may keep it")
    func aBodyTheLoaderKeepsNothingOfIsNotStaged() async throws {
        let fixture = try await LoaderFixture()
        defer { Task { await fixture.close() } }
        let big = Self.random(3 << 20, seed: 35)
        try big.write(to: fixture.content.appendingPathComponent("h.bin"))
        let fetcher = HTTPFetcher(transport: fixture.transport)
        var request = FetchRequest(
            key: try CacheKey(url: fixture.url("h.bin")), url: fixture.url("h.bin"), scratchFolder: fixture.folder)
        request.fileThreshold = 1 << 20
        guard case .file(let staged) = try await fetcher.fetch(request).body else {
            Issue.record("a 3 MiB body the loader may keep should be staged as a file")
            return
        }
        #expect(try staged.data() == big)
        request.mayKeep = false
        guard case .fetched(let data) = try await fetcher.fetch(request).body else {
            Issue.record("a body the loader keeps nothing of should not be staged")
            return
        }
        #expect(data == big)
        // Within HTTPFetcher.maxBytes, as a staged body is.
        let small = HTTPFetcher(transport: fixture.transport, maxBytes: 1 << 20)
        let refused = await #expect(throws: ItemCacheError.self) { try await small.fetch(request) }
        #expect(refused?.message.contains("sent more than 1048576 bytes") == true, "\(String(describing: refused))")
        #expect(fixture.server.requestCount(forPath: "/h.bin") == 3)
    }

    @Test("a large value that is no staged file (a file:// item where there is no O_TMPFILE) is copied in chunks, kept")
    func aFileThatIsNoStagedOneIsCopied() async throws {
        let fixture = try await LoaderFixture { $0.memory.itemBytes = 1 << 20 }
        defer { Task { await fixture.close() } }
        let big = Self.random(3 << 20 + 3, seed: 34)
        let path = fixture.content.appendingPathComponent("in-place.bin").path
        try big.write(to: URL(fileURLWithPath: path))
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        #expect(descriptor >= 0)
        let file = ValueFile(
            descriptor: descriptor, size: Int64(big.count), checksum: CRC32C.checksum(big), shownAs: path)
        #expect(!file.isStaged)
        let key = try CacheKey.custom("in-place")
        _ = try await fixture.store.store(file: file, for: key)
        let blobs = Self.blobs(fixture.folder)
        #expect(blobs.count == 1)
        #expect(blobs[Self.inode(descriptor)] == nil, "a copy, not the source")
        #expect(try fixture.store.blockingItem(for: key)?.item.data == big)

        // The source changes before it is copied: its own failure (a fetch's), nothing kept.
        let other = open(path, O_RDONLY | O_CLOEXEC)
        let changing = ValueFile(
            descriptor: other, size: Int64(big.count), checksum: CRC32C.checksum(big), shownAs: path,
            changedCode: .fetch)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seek(toOffset: 2_000_000)
        handle.write(Data([0x55]))
        try handle.close()
        let changed = await #expect(throws: ItemCacheError.self) {
            _ = try await fixture.store.store(file: changing, for: try CacheKey.custom("changing"))
        }
        #expect(changed?.code == .fetch, "\(String(describing: changed))")
        #expect(Self.blobs(fixture.folder).count == 1)
    }

    @Test("a staged file keeps the checksum of its bytes and reads back whole")
    func aStagedFileReadsBack() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let path = folder + "/v.bin"
        let big = Self.random(1 << 20, seed: 6)
        try big.write(to: URL(fileURLWithPath: path))
        guard let unnamed = UnnamedFile(in: folder) else {
            Issue.record("no O_TMPFILE in \(folder)")
            return
        }
        big.withUnsafeBytes { bytes in
            #expect(DescriptorIO.writeAll(unnamed.descriptor, bytes) == nil)
        }
        let checksum = try ValueFile.checksum(of: unnamed.descriptor, size: Int64(big.count), shownAs: "v")
        let file = ValueFile(staged: unnamed, size: Int64(big.count), checksum: checksum, shownAs: "v")
        #expect(file.isStaged)
        #expect(try file.data() == big)
        #expect(checksum == CRC32C.checksum(big))
    }
}

extension LoadedValue {
    /// The value's file, nil for bytes.
    var file: ValueFile? {
        if case .file(let file) = content { file } else { nil }
    }
}
