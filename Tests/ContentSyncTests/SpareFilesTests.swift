import CLinux
import Foundation
import Testing

@testable import ContentSync
@testable import FileKit

/// A catch-up keeps the twin's stale files as spares and writes its small downloads over them:
/// only a plain file of ours with one link is kept, never one another name shares, and the tree
/// each version ends with is exact.
@Suite("a catch-up writes its downloads over the twin's stale files", .timeLimit(.minutes(3)))
struct SpareFilesTests {
    /// `body` with a scratch folder holding `partial/` and `tree/`.
    func withScratch(_ body: (_ partial: String, _ tree: String) throws -> Void) async throws {
        try await withTemporaryDirectory { root in
            let (partial, tree) = (root + "/partial", root + "/tree")
            for folder in [partial, tree] {
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            }
            try body(partial, tree)
        }
    }

    func write(_ text: String, to path: String, mode: Int = 0o644) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        chmod(path, mode_t(mode))
    }

    func inode(_ path: String) -> UInt64? { FileSystem.status(of: path).map { UInt64($0.st_ino) } }

    @Test("a plain file with one link becomes a spare (same inode), handed out once; the limit bounds them")
    func keepsUpToTheLimit() async throws {
        try await withScratch { partial, tree in
            for name in ["a", "b", "c"] { try write(name, to: tree + "/" + name) }
            let inodes = Set(["a", "b"].compactMap { inode(tree + "/" + $0) })
            let spares = SpareFiles(in: partial, limit: 2)
            for name in ["a", "b", "c"] { try spares.remove(tree + "/" + name) }
            #expect(allPaths(under: tree).isEmpty, "every path is out of the tree")
            let taken = [spares.take(), spares.take()].compactMap { $0 }
            #expect(taken.count == 2 && spares.take() == nil)
            #expect(Set(taken.compactMap(inode)) == inodes, "the spares are the first two files themselves")
            #expect(taken.allSatisfy { $0.hasPrefix(partial + "/spare.") })
            #expect(allPaths(under: partial).count == 2, "the file past the limit was removed, not kept")
        }
    }

    @Test(
        "a file another name shares, an executable, a symlink or a folder is removed, and what it shares is untouched")
    func keepsOnlyRecyclableFiles() async throws {
        try await withScratch { partial, tree in
            try write("shared", to: tree + "/shared")
            let outside = (tree as NSString).deletingLastPathComponent + "/neighbour"
            #expect(link(tree + "/shared", outside) == 0)
            try write("#!/bin/sh", to: tree + "/tool", mode: 0o755)
            try write("secret", to: outside + "-target")
            try FileManager.default.createSymbolicLink(atPath: tree + "/link", withDestinationPath: outside + "-target")
            try FileManager.default.createDirectory(atPath: tree + "/folder", withIntermediateDirectories: true)
            try write("inner", to: tree + "/folder/inner")
            let spares = SpareFiles(in: partial, limit: 10)
            for name in ["shared", "tool", "link", "folder"] { try spares.remove(tree + "/" + name) }
            #expect(allPaths(under: tree).isEmpty)
            #expect(spares.take() == nil, "none of them is a spare")
            #expect(allPaths(under: partial).isEmpty)
            #expect(try String(contentsOfFile: outside, encoding: .utf8) == "shared")
            #expect(try String(contentsOfFile: outside + "-target", encoding: .utf8) == "secret")
            #expect(SpareFiles.canRecycle(try #require(FileSystem.status(of: outside))))
        }
    }

    @Test("a spare name a killed run left is skipped, never replaced")
    func leftoverNamesAreSkipped() async throws {
        try await withScratch { partial, tree in
            try write("left over", to: partial + "/spare.1")
            try write("stale", to: tree + "/stale")
            let spares = SpareFiles(in: partial, limit: 5)
            try spares.remove(tree + "/stale")
            #expect(spares.take() == partial + "/spare.2")
            #expect(try String(contentsOfFile: partial + "/spare.1", encoding: .utf8) == "left over")
        }
    }

    @Test("a spare with two links, open elsewhere or mapped is not opened for writing")
    func openRecycledChecksTheOpenedFile() async throws {
        try await withScratch { partial, tree in
            try write("spare", to: partial + "/spare.1")
            #expect(link(partial + "/spare.1", tree + "/shared") == 0)
            #expect(DownloadDestination.openRecycled(partial + "/spare.1", for: tree + "/x") == nil)
            unlink(tree + "/shared")
            // A reader's descriptor, then a mapping whose descriptor was closed: each keeps it.
            let reader = open(partial + "/spare.1", O_RDONLY | O_CLOEXEC)
            #expect(reader >= 0)
            #expect(DownloadDestination.openRecycled(partial + "/spare.1", for: tree + "/x") == nil)
            let mapping = mmap(nil, 5, PROT_READ, MAP_SHARED, reader, 0)
            close(reader)
            #expect(mapping != MAP_FAILED)
            #expect(DownloadDestination.openRecycled(partial + "/spare.1", for: tree + "/x") == nil)
            munmap(mapping, 5)
            // The check's lease: another open while it is held breaks it with SIGURG (ignored),
            // not SIGIO (which would end this process); given back, it holds none.
            do {
                let probe = open(partial + "/spare.1", O_RDWR | O_CLOEXEC)
                defer { close(probe) }
                #expect(clinux_take_write_lease(probe) == 1)
                var signal: Int32 = -1
                #expect(clinux_lease_state(probe, &signal) == F_WRLCK && signal == SIGURG)
                let intruder = open(partial + "/spare.1", O_RDONLY | O_NONBLOCK | O_CLOEXEC)
                #expect(intruder < 0 && errno == EWOULDBLOCK, "the open waits for the lease, and signals its holder")
                if intruder >= 0 { close(intruder) }
                #expect(clinux_give_back_lease(probe) == 0)
                #expect(clinux_lease_state(probe, &signal) == F_UNLCK)
                #expect(clinux_sole_opener(probe) == 1)
            }
            let destination = try #require(DownloadDestination.openRecycled(partial + "/spare.1", for: tree + "/x"))
            defer { destination.close() }
            try destination.link()
            #expect(try String(contentsOfFile: tree + "/x", encoding: .utf8) == "spare")
            #expect(FileSystem.status(of: partial + "/spare.1") == nil)
        }
    }

    /// Files of `folder` with one link, by inode, with their bytes.
    static func singlyLinked(under folder: String) -> [UInt64: (path: String, bytes: Data)] {
        var found: [UInt64: (path: String, bytes: Data)] = [:]
        for path in allPaths(under: folder) {
            let full = folder + "/" + path
            guard let info = FileSystem.status(of: full), info.st_mode & S_IFMT == S_IFREG, info.st_nlink == 1,
                let bytes = FileManager.default.contents(atPath: full)
            else { continue }
            found[UInt64(info.st_ino)] = (full, bytes)
        }
        return found
    }

    @Test(
        "a reader holding files of 1.2 open through 1.3 and 1.4 reads 1.2's bytes to the end; nothing it holds is reused"
    )
    func readersKeepTheirBytes() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await TwinTreeTests.syncThrough(harness, "1.1", "1.2")
            // Every file of 1.2 that 1.3 changes or drops: in 1.4's catch-up its inode is a stale file of the twin.
            let (old, new) = (ExampleStorageFixture.manifest("1.2"), ExampleStorageFixture.manifest("1.3"))
            var held: [(path: String, descriptor: Int32, bytes: Data)] = []
            defer { for file in held { close(file.descriptor) } }
            for (path, hash) in old.files where new.files[path] != hash {
                let full = harness.content + "/" + path
                guard let bytes = FileManager.default.contents(atPath: full) else { continue }
                let descriptor = open(full, O_RDONLY | O_CLOEXEC)
                if descriptor >= 0 { held.append((full, descriptor, bytes)) }
            }
            #expect(!held.isEmpty, "1.3 changes files of 1.2")
            for version in ["1.3", "1.4"] {
                harness.serve(version)
                let report = try await harness.sync()
                #expect(report.outcome == .replayed)
                try harness.expectTree(is: version)
            }
            for file in held {
                var buffer = [UInt8](repeating: 0, count: file.bytes.count + 1)
                let count = pread(file.descriptor, &buffer, buffer.count, 0)
                #expect(count >= 0 && Data(buffer[0..<max(0, count)]) == file.bytes, "\(file.path)")
            }
        }
    }

    @Test(
        "1.2 → 1.3 through the twin: downloads land in the twin's stale inodes, cut to their size; a shared one is left alone"
    )
    func catchUpRecyclesStaleFiles() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await TwinTreeTests.syncThrough(harness, "1.1", "1.2")
            let staging = TwinTreeTests.staging(harness)
            let stale = Self.singlyLinked(under: staging.retired)
            #expect(!stale.isEmpty, "the twin holds files the current version replaced")
            // A neighbour's hard link to one stale file: that file is shared now, never a spare.
            let (sharedInode, shared) = try #require(stale.first)
            let neighbour = harness.root + "/neighbour-link"
            #expect(link(shared.path, neighbour) == 0)
            harness.serve("1.3")
            let report = try await harness.sync()
            #expect(report.outcome == .replayed && report.checkedIncrementally)
            #expect(report.filesDownloaded > 0)
            try harness.expectTree(is: "1.3")
            #expect(FileManager.default.contents(atPath: neighbour) == shared.bytes, "the shared file is untouched")
            // Downloaded files that are stale inodes reused (at most one per download).
            var recycled = 0
            for path in allPaths(under: harness.content) {
                guard let number = inode(harness.content + "/" + path), number != sharedInode,
                    stale[number] != nil
                else { continue }
                recycled += 1
            }
            #expect(recycled > 0 && recycled <= report.filesDownloaded, "\(recycled) of \(report.filesDownloaded)")
            #expect(FileSystem.status(of: staging.partial) == nil, "no spare is left over after the switch")
            // And on, through the next versions, each exact.
            harness.serve("1.4")
            try await harness.sync()
            try harness.expectTree(is: "1.4")
        }
    }
}
