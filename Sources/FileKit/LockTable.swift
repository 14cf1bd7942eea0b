import Foundation
import ThreadKit

/// Who holds a `flock` on a file, from the kernel's own record (`/proc/locks`), without taking
/// the lock: testing a lock by taking it, even for a moment, makes a real locker that starts in
/// that moment fail. The table cannot be stale: a killed holder's locks vanish with it.
public enum LockTable {
    /// The PID of a process holding an exclusive `flock` on any of `paths` (files or folders),
    /// or nil when none is held or the table cannot be read.
    public static func exclusiveHolder(of paths: [String]) -> Int32? {
        let files = paths.compactMap(FileKey.init(path:))
        guard !files.isEmpty else { return nil }
        return holder(of: files)
    }

    /// The PID of a process holding an exclusive `flock` on the file the open descriptor `fd` names.
    public static func exclusiveHolder(ofDescriptor fd: Int32) -> Int32? {
        var info = stat()
        guard fstat(fd, &info) == 0 else { return nil }
        return holder(of: [FileKey(info)])
    }

    /// How many times `/proc/locks` is read before a file counts as held by nobody.
    ///
    /// The kernel hands that table out a page at a time and finds where to go on by counting
    /// entries; when another process drops a lock listed before one already sent, the next page
    /// starts one entry late and a line is never read. With two threads locking and unlocking 200
    /// files beside the reader, 3.5% of reads missed a lock held all along (and a read of 4 MiB at
    /// once did no better); a lock held through the reads shows up in one of them.
    static let reads = 4

    /// The holder of one of `files`, from up to ``reads`` reads of `/proc/locks`.
    private static func holder(of files: [FileKey]) -> Int32? {
        for _ in 0..<reads {
            guard let table = ProcFile.text("/proc/locks", limit: .max) else { return nil }
            if let pid = holder(in: table, of: files) { return pid }
        }
        return nil
    }

    /// A file as `/proc/locks` names it: major and minor device numbers and inode.
    package struct FileKey: Equatable {
        package var major: UInt64
        package var minor: UInt64
        package var inode: UInt64

        package init(major: UInt64, minor: UInt64, inode: UInt64) {
            self.major = major
            self.minor = minor
            self.inode = inode
        }

        init?(path: String) {
            var info = stat()
            guard stat(path, &info) == 0 else { return nil }
            self.init(info)
        }

        init(_ info: stat) {
            let device = UInt64(info.st_dev)
            // glibc's gnu_dev_major/minor encoding of dev_t.
            self.init(
                major: ((device >> 8) & 0xfff) | ((device >> 32) & ~UInt64(0xfff)),
                minor: (device & 0xff) | ((device >> 12) & ~UInt64(0xff)), inode: UInt64(info.st_ino))
        }
    }

    /// The PID on the first `FLOCK … WRITE` line for one of `files` in a `/proc/locks` text, e.g.
    /// `1: FLOCK  ADVISORY  WRITE 4242 fe:00:1163503 0 EOF`. A blocked waiter's line has `->`
    /// after the number and holds nothing, so it never matches.
    package static func holder(in table: String, of files: [FileKey]) -> Int32? {
        for line in table.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 6, fields[1] == "FLOCK", fields[3] == "WRITE", let pid = Int32(fields[4]), pid > 0
            else { continue }
            let place = fields[5].split(separator: ":")
            guard place.count == 3, let major = UInt64(place[0], radix: 16), let minor = UInt64(place[1], radix: 16),
                let inode = UInt64(place[2])
            else { continue }
            if files.contains(FileKey(major: major, minor: minor, inode: inode)) { return pid }
        }
        return nil
    }
}
