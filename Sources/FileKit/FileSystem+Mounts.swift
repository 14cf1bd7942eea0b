import CLinux
import Foundation

extension FileSystem {
    /// Whether the folder at `path` is the root of a mount (a volume, a bind mount, a tmpfs):
    /// statx's `STATX_ATTR_MOUNT_ROOT` where the kernel reports it (5.8+), else a device other
    /// than its parent's. Such a folder cannot be renamed (EBUSY).
    public static func isMountPoint(_ path: String) -> Bool {
        switch clinux_is_mount_root(path) {
        case 1: return true
        case 0: return false
        default: break
        }
        let parent = (path as NSString).deletingLastPathComponent
        guard let own = status(of: path), let above = status(of: parent.isEmpty ? "." : parent) else { return false }
        return own.st_dev != above.st_dev
    }
}
