import Foundation
import Testing

@testable import FileKit

/// How a small change's writes are flushed: one `syncfs` while the system holds little dirty
/// data, else an fsync per path; and the dirty figures read from `/proc/meminfo`.
@Suite("the flush of a small change picks syncfs only on a quiet system")
struct DiskFlushWayTests {
    @Test(
        "meminfo's Dirty plus Writeback, in bytes; nil for a missing line, a bad number or an overflow",
        arguments: [
            ("MemTotal:  24000000 kB\nDirty:        228 kB\nWriteback:      4 kB\n", Int64(232 * 1024)),
            ("Writeback: 0 kB\nDirty: 0 kB", 0),
            ("Dirty:        228 kB\n", nil),
            ("Writeback:      4 kB\n", nil),
            ("Dirty: many kB\nWriteback: 0 kB\n", nil),
            ("Dirty: -5 kB\nWriteback: 0 kB\n", nil),
            ("Dirty: 5 MB\nWriteback: 0 kB\n", nil),
            ("Dirty: 9223372036854775807 kB\nWriteback: 0 kB\n", nil),
            ("Dirty: 9007199254740992 kB\nWriteback: 9007199254740992 kB\n", nil),
            ("", nil),
        ] as [(String, Int64?)])
    func meminfo(text: String, bytes: Int64?) {
        #expect(SystemMemory.dirtyBytes(inMeminfo: text) == bytes)
    }

    @Test("this machine's meminfo reads as a dirty figure")
    func readsTheRealMeminfo() throws {
        let bytes = try #require(SystemMemory.dirtyBytes())
        #expect(bytes >= 0)
    }

    @Test(
        "syncfs for more than one path on a system at most quietDirtyLimit dirty; else one fsync per path",
        arguments: [
            (100, Int64(0), DiskFlush.Operation.syncfs),
            (2, DiskFlush.quietDirtyLimit, .syncfs),
            (100, DiskFlush.quietDirtyLimit + 1, .fsync),
            (100, nil, .fsync),
            (1, 0, .fsync),
            (0, 0, .fsync),
        ] as [(Int, Int64?, DiskFlush.Operation)])
    func way(count: Int, dirty: Int64?, expected: DiskFlush.Operation) {
        #expect(DiskFlush.way(toFlush: count, dirtyBytes: dirty) == expected)
    }

    @Test("written(_:holding:) takes the way the dirty figure picks, and a refusal of that way is thrown")
    func writtenFollowsTheDirtyFigure() throws {
        let folder = NSTemporaryDirectory() + "flush-way-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer {
            DiskFlush.faults.clear(under: folder)
            try? FileManager.default.removeItem(atPath: folder)
        }
        let files = (0..<3).map { folder + "/f\($0)" }
        for file in files { FileManager.default.createFile(atPath: file, contents: Data("x".utf8)) }
        let paths = files + [folder]

        DiskFlush.faults.pretendDirty(0, at: folder)
        #expect(try DiskFlush.written(paths, holding: folder) == .syncfs)
        DiskFlush.faults.inject(.syncfs, at: folder, errno: EIO)
        #expect(throws: FileSystemError.self) { try DiskFlush.written(paths, holding: folder) }

        // Busy: each path on its own, so the syncfs fault is not reached, and an fsync fault is.
        DiskFlush.faults.pretendDirty(DiskFlush.quietDirtyLimit + 1, at: folder)
        #expect(try DiskFlush.written(paths, holding: folder) == .fsync)
        DiskFlush.faults.inject(.fsync, at: files[1], below: false, errno: EIO)
        #expect {
            try DiskFlush.written(paths, holding: folder)
        } throws: { error in
            "\(error)".contains(files[1]) && "\(error)".contains("fsync")
        }
    }

    /// Paths longer than `PATH_MAX` (a deep mirror below a deep folder) are flushed one by one
    /// like any other, each opened below its folders; a missing one is fine, as before.
    @Test func pathsLongerThanPATHMAXAreFlushedOneByOne() throws {
        let root = NSTemporaryDirectory() + "flush-long-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        // FileManager cannot delete a tree this deep (its paths pass PATH_MAX).
        defer { try? TreeRemoval.remove(root) }
        var folder = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        var path = root
        for level in 0..<45 {
            let name = String(format: "%02d", level) + String(repeating: "d", count: 98)
            #expect(mkdirat(folder, name, 0o755) == 0)
            let next = openat(folder, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            close(folder)
            folder = next
            path += "/" + name
        }
        let file = openat(folder, "leaf", O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        #expect(file >= 0)
        close(file)
        close(folder)
        try #require(path.utf8.count > Int(PATH_MAX))
        try DiskFlush.entries([path + "/leaf", path, path + "/missing"])
        #expect(throws: FileSystemError.self) { try DiskFlush.entries([path + "/leaf/not-a-folder"]) }
    }
}
