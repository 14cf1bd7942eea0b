import Foundation
import Testing

@testable import FileKit

/// A filesystem's size and free room in bytes, saturating where a network or FUSE filesystem
/// reports counts past any integer.
@Suite("statvfs figures multiply out to bytes without a trap")
struct FilesystemSpaceTests {
    @Test(
        "blocks × block size, saturating at UInt64.max; inodes as reported",
        arguments: [
            (UInt64(1000), UInt64(250), UInt64(4096), UInt64(4_096_000), UInt64(1_024_000)),
            (0, 0, 4096, 0, 0),
            (.max, .max, 4096, .max, .max),
            (UInt64(1) << 52, UInt64(1) << 51, 4096, .max, UInt64(1) << 63),
            (UInt64(1) << 40, 3, .max, .max, .max),
        ])
    func bytes(blocks: UInt64, available: UInt64, blockSize: UInt64, capacity: UInt64, free: UInt64) {
        let space = FilesystemSpace(
            blocks: blocks, availableBlocks: available, blockSize: blockSize, inodes: 7, availableInodes: 3)
        #expect(space.capacity == capacity)
        #expect(space.available == free)
        #expect(space.inodes == 7 && space.availableInodes == 3)
    }

    @Test func aRealFolderHasRoomWithinItsCapacityAndAMissingOneIsNil() throws {
        let space = try #require(FilesystemSpace(holding: NSTemporaryDirectory()))
        #expect(space.capacity > 0)
        #expect(space.available <= space.capacity)
        #expect(FilesystemSpace(holding: "/nonexistent-\(UUID().uuidString)/x") == nil)
    }
}

/// A file's allocated bytes and a sum of them, saturating instead of trapping on block counts a
/// FUSE or network filesystem may report.
@Suite("st_blocks multiply out and add up to bytes without a trap")
struct AllocatedBytesTests {
    @Test(
        "st_blocks × 512, saturating at Int64.max, 0 for a negative count",
        arguments: [
            (Int64(8), Int64(4096)), (0, 0), (-1, 0), (.max, .max), (Int64.max / 512 + 1, .max),
            (Int64.max / 512, Int64.max / 512 * 512),
        ])
    func allocated(blocks: Int64, bytes: Int64) {
        var status = stat()
        status.st_blocks = Int(blocks)
        #expect(FileSystem.allocatedBytes(status) == bytes)
    }

    @Test(
        "sums saturate at Int64.max",
        arguments: [(Int64(1), Int64(2), Int64(3)), (.max, 1, .max), (.max - 1, 1, .max), (.max, .max, .max)])
    func sums(total: Int64, bytes: Int64, expected: Int64) {
        #expect(FileSystem.adding(bytes, to: total) == expected)
    }

    @Test func aRealFileReportsItsBlocks() throws {
        let path = NSTemporaryDirectory() + "allocated-\(UUID().uuidString)"
        defer { unlink(path) }
        try Data(repeating: 7, count: 10_000).write(to: URL(fileURLWithPath: path))
        var status = stat()
        #expect(stat(path, &status) == 0)
        #expect(FileSystem.allocatedBytes(status) >= 10_000 || FileSystem.allocatedBytes(status) == 0)
    }
}

/// Out of descriptors, an error says so and how to raise the limit; nothing suggests deleting.
@Suite("a failure for want of descriptors names the limit to raise")
struct DescriptorShortageTests {
    @Test(
        "EMFILE and ENFILE carry the remedy; other errors keep theirs",
        arguments: [
            (EMFILE, "open-file limit"), (ENFILE, "fs.file-max"), (ENOSPC, "free disk space"),
            (EACCES, "permissions"), (EIO, ""),
        ])
    func remedies(code: Int32, mentions: String) {
        let error = FileSystemError("cannot open", path: "/srv/x", syscall: "openat", errno: code)
        if mentions.isEmpty {
            #expect(error.remedy == nil)
        } else {
            #expect(error.remedy?.contains(mentions) == true, "\(error)")
        }
        #expect((FileSystemError.descriptorRemedy(errno: code) != nil) == (code == EMFILE || code == ENFILE))
    }

    @Test func aProcessWithRoomHasNoShortage() {
        #expect(FileSystemError.descriptorShortage(wanted: 16) == nil)
        #expect(FileSystemError.descriptorShortageReason() == nil)
    }
}
