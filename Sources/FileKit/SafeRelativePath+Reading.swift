import CLinux
import Foundation

extension SafeRelativePath {
    /// Opens the regular file this path names beneath `folder` for reading, with its status; the
    /// caller closes the descriptor. `folder` itself is followed (the caller chose it), nothing
    /// below it is: each folder on the way and the file are opened by name relative to the one
    /// before, without following a symlink, and the file without waiting on a FIFO. So a symlink
    /// planted in the tree, a FIFO, a device or a folder is refused, and nothing outside `folder`
    /// is read.
    public func openRegularFile(beneath folder: String) throws(FileSystemError) -> (descriptor: Int32, status: stat) {
        let current: Int32
        do {
            current = try FileSystem.openFolderChain(components.dropLast(), beneath: folder)
        } catch {
            guard error.path != folder else {
                throw FileSystemError("cannot open", path: folder, syscall: "open", errno: error.errno)
            }
            throw Self.refusal(error.path, error.errno, folder: true)
        }
        defer { close(current) }
        var reached = folder + components.dropLast().map { "/" + $0 }.joined()
        guard let name = components.last else {
            throw FileSystemError("cannot read (a folder, not a file)", path: folder, syscall: "open", errno: EISDIR)
        }
        reached += "/" + name
        let fd = openat(current, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw Self.refusal(reached, errno, folder: false) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let code = errno
            close(fd)
            throw FileSystemError("cannot read", path: reached, syscall: "fstat", errno: code)
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            let what = info.st_mode & S_IFMT == S_IFDIR ? "a folder, not a file" : "not a regular file"
            throw FileSystemError("cannot read (\(what))", path: reached, syscall: "fstat", errno: EINVAL)
        }
        return (fd, info)
    }

    /// An open of `path` that failed: a symlink (`ELOOP`, or `ENOTDIR` for one where a folder
    /// was asked) is named as one, since a path never goes through one.
    private static func refusal(_ path: String, _ code: Int32, folder: Bool) -> FileSystemError {
        var isLink = code == ELOOP
        if folder, code == ENOTDIR {
            var info = stat()
            isLink = lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFLNK
        }
        return isLink
            ? FileSystemError(
                "cannot read through a symlink (never followed inside the folder)", path: path, syscall: "openat",
                errno: code)
            : FileSystemError("cannot open", path: path, syscall: "openat", errno: code)
    }
}
