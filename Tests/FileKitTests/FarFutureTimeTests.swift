import FileKit
import Foundation
import Testing

/// Anyone who can write a file can set its times far ahead (`touch -d 2400-01-01`): ext4 keeps
/// them to 2446, tmpfs to 2⁶³ seconds. Nanoseconds since the epoch do not fit an `Int64` past
/// 2262, and reading such a file's identity must not stop the process.
@Suite("A file's times far in the future")
struct FarFutureTimeTests {
    /// Sets `path`'s access and modification times to `seconds` since the epoch; false when the
    /// filesystem refuses (the test then checks what it kept).
    static func setTimes(_ path: String, seconds: Int) -> Bool {
        var times = [timespec(tv_sec: seconds, tv_nsec: 5), timespec(tv_sec: seconds, tv_nsec: 5)]
        return utimensat(AT_FDCWD, path, &times, 0) == 0
    }

    @Test(arguments: [
        // 2400-01-01 (ext4 and tmpfs keep it), and 2⁶³ − 1 seconds less a little (tmpfs keeps it,
        // ext4 clamps it to 2446).
        13_569_465_600, 9_000_000_000_000_000_000,
    ])
    func anIdentityOfAFileFarInTheFutureIsReadWithoutATrap(seconds: Int) async throws {
        for root in [NSTemporaryDirectory(), "/dev/shm/"] where FileManager.default.fileExists(atPath: root) {
            let path = root + "content-sync-far-future-\(getpid())-\(seconds)"
            #expect(FileManager.default.createFile(atPath: path, contents: Data("x".utf8)))
            defer { unlink(path) }
            let before = try #require(FileIdentity(path: path))
            _ = Self.setTimes(path, seconds: seconds)
            let after = try #require(FileIdentity(path: path), "\(root)")
            #expect(after != before, "\(root): the new time is a new identity")
            #expect(FileIdentity(path: path) == after, "\(root): read again, the same")
            var info = stat()
            #expect(stat(path, &info) == 0)
            #expect(FileStamp(info).identity == after)
        }
    }
}
