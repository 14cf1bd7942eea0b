import Foundation

/// What identifies a file's bytes without reading them, as rsync's quick check does: the inode
/// (hard links share it), the size and the modification time in nanoseconds.
public struct FileIdentity: Hashable, Sendable {
    /// The device of the file system holding the file (`st_dev`).
    public var device: UInt64
    /// The inode number (`st_ino`); hard links to one file share it.
    public var inode: UInt64
    /// The size in bytes (`st_size`).
    public var size: Int64
    /// The last modification time (`st_mtim`) in nanoseconds since the Unix epoch.
    public var modifiedNanoseconds: Int64

    /// The identity of the regular file at `path`, or nil when it cannot be read.
    public init?(path: String) {
        guard let info = FileSystem.status(of: path), info.st_mode & S_IFMT == S_IFREG else { return nil }
        self.init(info)
    }

    /// The identity in a `stat` result (its time in wrapping nanoseconds, `timespec.nanoseconds`).
    public init(_ info: stat) {
        self.init(
            device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: Int64(info.st_size),
            modifiedNanoseconds: info.st_mtim.nanoseconds)
    }

    /// An identity from its parts, e.g. ones stored earlier.
    public init(device: UInt64, inode: UInt64, size: Int64, modifiedNanoseconds: Int64) {
        self.device = device
        self.inode = inode
        self.size = size
        self.modifiedNanoseconds = modifiedNanoseconds
    }
}

/// A ``FileIdentity`` with the status-change time (`st_ctim`): what a record of a file's bytes
/// kept between runs is checked against. Every write moves the status-change time, even one that
/// keeps the size and sets the modification time back, and no tool can set it back; a change of
/// the link count, mode or attributes moves it too, which only makes a record stale.
public struct FileStamp: Hashable, Sendable {
    /// Device, inode, size and modification time.
    public var identity: FileIdentity
    /// The last status change (`st_ctim`) in nanoseconds since the Unix epoch.
    public var changedNanoseconds: Int64

    /// A stamp from its parts, e.g. ones stored earlier.
    public init(identity: FileIdentity, changedNanoseconds: Int64) {
        self.identity = identity
        self.changedNanoseconds = changedNanoseconds
    }

    /// The stamp in a `stat` result.
    public init(_ info: stat) {
        self.init(identity: FileIdentity(info), changedNanoseconds: FileSystem.changeTime(info))
    }
}
