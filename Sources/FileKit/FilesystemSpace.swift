#if canImport(Glibc)
    import Glibc
#endif

/// The size and free room of a filesystem, from `statvfs(2)`, in bytes and inodes.
///
/// The counts are multiplied out saturating: a network or FUSE filesystem may report block
/// counts whose product with the block size is past any integer (a "free" of `UINT64_MAX`
/// blocks), and that must read as "a great deal", never trap.
public struct FilesystemSpace: Equatable, Sendable {
    /// The filesystem's size in bytes.
    public var capacity: UInt64
    /// The bytes an unprivileged user may still write.
    public var available: UInt64
    /// The filesystem's inodes (0 where it does not count them, as on btrfs).
    public var inodes: UInt64
    /// The inodes an unprivileged user may still take.
    public var availableInodes: UInt64

    /// The space from raw `statvfs` figures: block counts in units of `blockSize` bytes.
    public init(blocks: UInt64, availableBlocks: UInt64, blockSize: UInt64, inodes: UInt64, availableInodes: UInt64) {
        func bytes(_ count: UInt64) -> UInt64 {
            let (product, overflow) = count.multipliedReportingOverflow(by: blockSize)
            return overflow ? .max : product
        }
        (capacity, available) = (bytes(blocks), bytes(availableBlocks))
        (self.inodes, self.availableInodes) = (inodes, availableInodes)
    }

    /// The filesystem holding `path`, or nil if it cannot be asked.
    public init?(holding path: String) {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return nil }
        self.init(
            blocks: UInt64(info.f_blocks), availableBlocks: UInt64(info.f_bavail), blockSize: UInt64(info.f_frsize),
            inodes: UInt64(info.f_files), availableInodes: UInt64(info.f_favail))
    }
}

extension FileSystem {
    /// The bytes a file's blocks take on disk (`st_blocks` × 512), saturating at `Int64.max`
    /// and never negative: a FUSE or network filesystem may report any block count.
    public static func allocatedBytes(_ status: stat) -> Int64 {
        let blocks = max(0, Int64(status.st_blocks))
        let (bytes, overflow) = blocks.multipliedReportingOverflow(by: 512)
        return overflow ? .max : bytes
    }

    /// `total + bytes` saturating at `Int64.max`: a sum of footprints that reads as "a great
    /// deal" past any integer, never traps.
    public static func adding(_ bytes: Int64, to total: Int64) -> Int64 {
        let (sum, overflow) = total.addingReportingOverflow(bytes)
        return overflow ? .max : sum
    }
}
