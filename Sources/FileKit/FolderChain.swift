import Foundation

/// A folder chain that could not be opened: the path reached, and `openat`'s errno (`ELOOP` or
/// `ENOTDIR` where a symlink or a file stood in for a folder).
public struct FolderChainFailure: Error, Sendable {
    /// The path whose open failed.
    public let path: String
    /// `openat`'s errno.
    public let errno: Int32
}

extension FileSystem {
    /// The folder `components` names beneath `folder`, opened one name at a time relative to
    /// the one before without following a symlink (`O_NOFOLLOW`): a folder on the way swapped for
    /// a link, even after a check, is refused, never gone through. `folder` itself is followed
    /// (the caller chose it). The caller closes the descriptor.
    public static func openFolderChain(_ components: some Sequence<String>, beneath folder: String)
        throws(FolderChainFailure) -> Int32
    {
        var current = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard current >= 0 else { throw FolderChainFailure(path: folder, errno: errno) }
        var reached = folder
        for component in components {
            reached += "/" + component
            let next = openat(current, component, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            let code = errno
            close(current)
            guard next >= 0 else { throw FolderChainFailure(path: reached, errno: code) }
            current = next
        }
        return current
    }
}
