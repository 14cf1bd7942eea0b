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
