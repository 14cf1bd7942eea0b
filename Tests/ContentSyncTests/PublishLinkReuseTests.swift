import Foundation
import Testing

@testable import ContentPublishing
@testable import FileKit
@testable import StorageFormat

/// A publish links the files the previous version holds unchanged instead of copying them, and
/// judges "unchanged" by the source's identity (status-change time included), never by size and
/// modification time alone; a source whose identity moved is compared byte for byte.
@Suite("publish links what did not change and copies what did", .timeLimit(.minutes(3)))
struct PublishLinkReuseTests {
    static func write(_ text: String, to path: String) throws {
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    }

    static func inode(_ path: String) -> UInt64? {
        var info = stat()
        return lstat(path, &info) == 0 ? UInt64(info.st_ino) : nil
    }

    static func keepsUserAttributes(_ folder: String) -> Bool { ContentSnapshot.keepsUserAttributes(in: folder) }

    @Test func unchangedFilesAreLinkedAndEveryKindOfChangeIsCopied() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            let content = scratch + "/content"
            let names = ["a.txt", "same-size.txt", "replaced.txt", "sub/b.txt", "sub/c.txt", "gone/d.txt"]
            for name in names { try Self.write("first \(name)", to: content + "/" + name) }
            let first = try ContentSnapshot.copy(content, to: scratch + "/v1", settle: -1)
            #expect(first.linkedFiles == 0)
            if Self.keepsUserAttributes(scratch) {
                var info = stat()
                #expect(lstat(content + "/a.txt", &info) == 0)
                #expect(ContentSnapshot.recordedSource(at: scratch + "/v1/a.txt") == ContentSnapshot.sourceKey(info))
            }
            guard Self.keepsUserAttributes(scratch) else {
                // No attributes kept: nothing is recognized by identity, so every file is compared.
                let second = try ContentSnapshot.copy(
                    content, to: scratch + "/v2", previous: scratch + "/v1", settle: -1)
                #expect(second.linkedFiles == names.count)
                return
            }

            // Same size, same modification time, other bytes: only the status-change time tells.
            let sameSize = content + "/same-size.txt"
            var before = stat()
            #expect(lstat(sameSize, &before) == 0)
            try Self.write("FIRST same-size.txt", to: sameSize)
            var times = [before.st_atim, before.st_mtim]
            #expect(utimensat(AT_FDCWD, sameSize, &times, 0) == 0)
            var after = stat()
            #expect(lstat(sameSize, &after) == 0)
            #expect(after.st_size == before.st_size && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec)
            // A new file put in place of the old one under the same name (another inode).
            try Self.write("other replaced.txt", to: content + "/replaced.tmp")
            #expect(rename(content + "/replaced.tmp", content + "/replaced.txt") == 0)
            // The previous version lost a folder, and holds a symlink where a file was.
            try FileManager.default.removeItem(atPath: scratch + "/v1/gone")
            #expect(unlink(scratch + "/v1/sub/c.txt") == 0)
            #expect(symlink(content + "/sub/c.txt", scratch + "/v1/sub/c.txt") == 0)

            let second = try ContentSnapshot.copy(content, to: scratch + "/v2", previous: scratch + "/v1", settle: -1)
            #expect(second.linkedFiles == 2, "a.txt and sub/b.txt")
            for name in ["a.txt", "sub/b.txt"] {
                #expect(Self.inode(scratch + "/v2/" + name) == Self.inode(scratch + "/v1/" + name), "\(name) linked")
            }
            for name in ["same-size.txt", "replaced.txt", "sub/c.txt", "gone/d.txt"] {
                #expect(Self.inode(scratch + "/v2/" + name) != Self.inode(scratch + "/v1/" + name), "\(name) copied")
            }
            for name in names {
                let copied = try String(contentsOfFile: scratch + "/v2/" + name, encoding: .utf8)
                let source = try String(contentsOfFile: content + "/" + name, encoding: .utf8)
                #expect(copied == source, "\(name)")
            }
            var info = stat()
            #expect(lstat(scratch + "/v2/sub/c.txt", &info) == 0 && info.st_mode & S_IFMT == S_IFREG)
        }
    }

    @Test func aCopyOfAFileChangedMomentsAgoIsNotRecordedSoItIsComparedAgain() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            guard Self.keepsUserAttributes(scratch) else { return }
            let content = scratch + "/content"
            try Self.write("fresh", to: content + "/fresh.txt")
            try Self.write("moved", to: content + "/moved.txt")
            _ = try ContentSnapshot.copy(content, to: scratch + "/v1") // the default 2-second settle
            #expect(ContentSnapshot.recordedSource(at: scratch + "/v1/fresh.txt") == nil)
            // Edited within the same second to the same size: no identity can vouch for it.
            try Self.write("MOVED", to: content + "/moved.txt")
            let second = try ContentSnapshot.copy(content, to: scratch + "/v2", previous: scratch + "/v1")
            #expect(second.linkedFiles == 1, "fresh.txt: the same bytes, compared")
            #expect(Self.inode(scratch + "/v2/fresh.txt") == Self.inode(scratch + "/v1/fresh.txt"))
            #expect(Self.inode(scratch + "/v2/moved.txt") != Self.inode(scratch + "/v1/moved.txt"))
            #expect(try String(contentsOfFile: scratch + "/v2/moved.txt", encoding: .utf8) == "MOVED")
        }
    }

    @Test("a source whose every identity moved (cp -al, a fresh copy, chmod) is compared: equal bytes are linked")
    func movedIdentitiesAreComparedByBytes() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            let content = scratch + "/content"
            let names = (0..<12).map { "f\($0 % 3)/file-\($0).bin" }
            for (index, name) in names.enumerated() {
                try Self.write(String(repeating: "\(index)", count: 70_000 + index), to: content + "/" + name)
            }
            _ = try ContentSnapshot.copy(content, to: scratch + "/v1", settle: -1)
            // A hard-linked snapshot moves every source's status-change time; a fresh copy makes
            // new inodes. Three edits keep the size: one in the first 64 KiB block, one in the
            // last, one in the last byte.
            let linked = scratch + "/linked"
            for name in names {
                try FileManager.default.createDirectory(
                    atPath: linked + "/" + (name as NSString).deletingLastPathComponent,
                    withIntermediateDirectories: true)
                #expect(link(content + "/" + name, linked + "/" + name) == 0)
            }
            let copied = scratch + "/copied"
            try FileManager.default.copyItem(atPath: content, toPath: copied)
            for folder in [linked, copied] {
                for (index, offset) in [(1, 10), (4, 69_000), (7, 70_006)] {
                    let path = folder + "/" + names[index]
                    var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
                    bytes[offset] = UInt8(ascii: "x")
                    try? FileManager.default.removeItem(atPath: path) // never the shared inode
                    try bytes.write(to: URL(fileURLWithPath: path))
                }
            }
            for (folder, target) in [(linked, "/v2"), (copied, "/v3")] {
                let snapshot = try ContentSnapshot.copy(folder, to: scratch + target, previous: scratch + "/v1")
                #expect(snapshot.linkedFiles == names.count - 3, "\(folder)")
                for (index, name) in names.enumerated() {
                    let edited = [1, 4, 7].contains(index)
                    #expect(
                        (Self.inode(scratch + target + "/" + name) == Self.inode(scratch + "/v1/" + name)) == !edited,
                        "\(target) \(name)")
                    let stored = try Data(contentsOf: URL(fileURLWithPath: scratch + target + "/" + name))
                    #expect(stored == (try Data(contentsOf: URL(fileURLWithPath: folder + "/" + name))), "\(name)")
                }
            }
        }
    }

    @Test func aPublishLinksTheUnchangedContentOfThePreviousVersion() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            guard Self.keepsUserAttributes(scratch) else { return }
            let content = scratch + "/content"
            for index in 0..<20 { try Self.write("file \(index)\n", to: content + "/f\(index % 3)/file-\(index).txt") }
            // Old enough to be recorded by the first publish's copy.
            Thread.sleep(forTimeInterval: PublishBaseTests.settle)
            let storage = scratch + "/storage"
            let base = URL(string: "https://example.invalid/storage/")!
            var options = PublishOptions(
                storage: storage, content: content, version: try CacheVersion("1.0"), baseURL: base)
            options.initialize = true
            let first = try Publisher.publish(options)
            #expect(first.linkedContentFiles == 0)
            let inodes = (0..<20).map { Self.inode(storage + "/RXCacheContent/f\($0 % 3)/file-\($0).txt") }

            try Self.write("file 7, edited\n", to: content + "/f1/file-7.txt")
            options = PublishOptions(
                storage: storage, content: content, version: try CacheVersion("1.1"), baseURL: base)
            let second = try Publisher.publish(options)
            #expect(second.linkedContentFiles == 19)
            for index in 0..<20 {
                let now = Self.inode(storage + "/RXCacheContent/f\(index % 3)/file-\(index).txt")
                #expect((now == inodes[index]) == (index != 7), "file-\(index)")
            }
            let edited = try String(contentsOfFile: storage + "/RXCacheContent/f1/file-7.txt", encoding: .utf8)
            #expect(edited == "file 7, edited\n")
        }
    }
}
