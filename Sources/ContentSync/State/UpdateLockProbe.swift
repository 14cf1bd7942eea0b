import Foundation

/// Tells whether some process holds a folder's update lock (``UpdateLock``) without taking it.
///
/// Taking the lock to test it, even shared and for a moment, would make an update that starts
/// in that moment fail as "another update is running". Linux lists every `flock` in
/// `/proc/locks` with the holder's PID and the file's device and inode, so the probe only reads.
enum UpdateLockProbe {
    /// The PID of a process holding the update lock of the folder whose state database is
    /// `statePath` (or its staging folder's lock), or nil when nobody holds either.
    static func holder(statePath: String, stagingRoot: String) -> Int32? {
        let files = [statePath + ".lock", stagingRoot].compactMap(identity)
        guard !files.isEmpty, let table = readProcFile("/proc/locks") else { return nil }
        for line in table.split(separator: "\n") {
            // "1: FLOCK  ADVISORY  WRITE 4242 fe:00:1163503 0 EOF". A blocked waiter's line has
            // "->" after the number: it holds nothing.
            let fields = line.split(separator: " ")
            guard fields.count >= 6, fields[1] == "FLOCK", let pid = Int32(fields[4]) else { continue }
            let place = fields[5].split(separator: ":")
            guard place.count == 3, let major = UInt64(place[0], radix: 16), let minor = UInt64(place[1], radix: 16),
                  let inode = UInt64(place[2]) else { continue }
            if files.contains(where: { $0.major == major && $0.minor == minor && $0.inode == inode }) { return pid }
        }
        return nil
    }

    /// The whole of a `/proc` file. Its size reads as 0, so it is read until the end rather than
    /// by size (Foundation's `String(contentsOfFile:)` stops after the first page).
    private static func readProcFile(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return count == 0 ? String(decoding: bytes, as: UTF8.self) : nil }
            bytes.append(contentsOf: chunk[..<count])
        }
    }

    private struct Identity {
        var major: UInt64
        var minor: UInt64
        var inode: UInt64
    }

    private static func identity(_ path: String) -> Identity? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        let device = UInt64(info.st_dev)
        // glibc's gnu_dev_major/minor encoding of dev_t.
        let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~UInt64(0xfff))
        let minor = (device & 0xff) | ((device >> 12) & ~UInt64(0xff))
        return Identity(major: major, minor: minor, inode: UInt64(info.st_ino))
    }
}
