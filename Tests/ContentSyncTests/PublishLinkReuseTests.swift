import Foundation
import Testing

@testable import ContentPublishing
@testable import FileKit
@testable import StorageFormat

/// A publish links the files the previous version holds unchanged instead of copying them, and
/// judges "unchanged" by the source's identity (status-change time included), never by size and
/// modification time alone.
@Suite("publish links what did not change and copies what did", .timeLimit(.minutes(2)))
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
                // No attributes kept: nothing can be recognized, so everything is copied again.
                let second = try ContentSnapshot.copy(
                    content, to: scratch + "/v2", previous: scratch + "/v1", settle: -1)
                #expect(second.linkedFiles == 0)
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

    @Test func aCopyOfAFileChangedMomentsAgoIsNotRecordedSoItIsCopiedAgain() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            guard Self.keepsUserAttributes(scratch) else { return }
            let content = scratch + "/content"
            try Self.write("fresh", to: content + "/fresh.txt")
            _ = try ContentSnapshot.copy(content, to: scratch + "/v1") // the default 2-second settle
            #expect(ContentSnapshot.recordedSource(at: scratch + "/v1/fresh.txt") == nil)
            let second = try ContentSnapshot.copy(content, to: scratch + "/v2", previous: scratch + "/v1")
            #expect(second.linkedFiles == 0)
        }
    }

    @Test func aPublishLinksTheUnchangedContentOfThePreviousVersion() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            guard Self.keepsUserAttributes(scratch) else { return }
            let content = scratch + "/content"
            for index in 0..<20 { try Self.write("file \(index)\n", to: content + "/f\(index % 3)/file-\(index).txt") }
            // Old enough to be recorded by the first publish's copy.
            Thread.sleep(forTimeInterval: 2.2)
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
