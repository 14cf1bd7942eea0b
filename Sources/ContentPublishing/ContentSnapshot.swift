import Archive
import FileKit
import Foundation
import StorageFormat

/// Copies a content folder into the publish's work folder, so that the hashes, the change list,
/// the archive and the published content all come from one reading of it, however `--content`
/// changes meanwhile.
///
/// Both trees are walked together with ``FolderCursor``s: names are copied as raw bytes (the
/// scan of the copy judges them), each open relative to its folder, so any legal depth works
/// with a constant number of descriptors and no path longer than one name. Folders are created
/// 0755 and files 0644 (what static hosting needs; modes are not part of a version). Symlinks and
/// special files are refused before anything is opened, so a fifo cannot block the copy.
enum ContentSnapshot {
    /// Copies `source` to `destination` (which must not exist). Returns bytes copied.
    @discardableResult
    static func copy(_ source: String, to destination: String) throws(PublishError) -> Int64 {
        guard mkdir(destination, 0o755) == 0 else {
            throw PublishError.fileSystem(
                "cannot create the content snapshot folder", path: destination, syscall: "mkdir", errno: errno)
        }
        guard var from = try fileWork({ () throws(FileSystemError) in try FolderCursor(at: source) }) else {
            throw PublishError.fileSystem("cannot read folder", path: source, syscall: "openat", errno: ENOENT)
        }
        guard var to = try fileWork({ () throws(FileSystemError) in try FolderCursor(at: destination) }) else {
            throw PublishError.fileSystem("cannot read folder", path: destination, syscall: "openat", errno: ENOENT)
        }
        var copied: Int64 = 0
        /// A folder being copied: its path (raw, for messages) and its subfolders still to copy.
        struct Frame {
            var path: [UInt8]
            var subfolders: [[UInt8]]
        }
        var frames = [
            Frame(path: [], subfolders: try copyEntries(from, to, at: [], shownFrom: source, copied: &copied))
        ]
        while let top = frames.indices.last {
            guard let name = frames[top].subfolders.popLast() else {
                frames.removeLast()
                if !frames.isEmpty {
                    try fileWork { () throws(FileSystemError) in
                        try from.ascend()
                        try to.ascend()
                    }
                }
                continue
            }
            let path = frames[top].path.isEmpty ? name : frames[top].path + [0x2F] + name
            guard try fileWork({ () throws(FileSystemError) in try from.descend(into: name) }) else {
                throw special(source, path)
            }
            guard try fileWork({ () throws(FileSystemError) in try to.descend(into: name) }) else {
                throw PublishError.fileSystem(
                    "cannot enter the copied folder \(EscapedName.text(path)) in", path: destination, syscall: "openat",
                    errno: ENOENT)
            }
            frames.append(
                Frame(path: path, subfolders: try copyEntries(from, to, at: path, shownFrom: source, copied: &copied)))
        }
        return copied
    }

    /// Copies the files of the folder at `from` into the one at `to`, creates its subfolders
    /// there, and returns their names.
    private static func copyEntries(
        _ from: borrowing FolderCursor, _ to: borrowing FolderCursor, at folder: [UInt8], shownFrom source: String,
        copied: inout Int64
    ) throws(PublishError) -> [[UInt8]] {
        var subfolders: [[UInt8]] = []
        for entry in try fileWork({ () throws(FileSystemError) in try from.entries() }) {
            let path = folder.isEmpty ? entry.name : folder + [0x2F] + entry.name
            switch entry.info.st_mode & S_IFMT {
            case S_IFDIR:
                guard entry.name.withCString({ mkdirat(to.descriptor, $0, 0o755) }) == 0 else {
                    throw PublishError.fileSystem(
                        "cannot create folder \(EscapedName.text(path)) in", path: to.shownAs, syscall: "mkdirat",
                        errno: errno)
                }
                subfolders.append(entry.name)
            case S_IFREG:
                copied += try copyFile(
                    entry.name, from: from.descriptor, to: to.descriptor, shown: source + "/" + EscapedName.text(path))
            default:
                throw special(source, path)
            }
        }
        return subfolders.reversed()
    }

    private static func special(_ source: String, _ path: [UInt8]) -> PublishError {
        PublishError(
            code: .invalidContent,
            message:
                "\(source)/\(EscapedName.text(path)) is a symlink or special file; a storage carries regular files and folders only: replace it with a copy or remove it"
        )
    }

    private static func copyFile(_ name: [UInt8], from sourceFolder: Int32, to targetFolder: Int32, shown: String)
        throws(PublishError) -> Int64
    {
        // O_NOFOLLOW | O_NONBLOCK: a file swapped for a symlink or fifo since the listing is
        // refused or opened without blocking, then refused by the fstat below.
        let input = name.withCString { openat(sourceFolder, $0, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) }
        guard input >= 0 else {
            throw PublishError.fileSystem("cannot open", path: shown, syscall: "openat", errno: errno)
        }
        defer { close(input) }
        var info = stat()
        guard fstat(input, &info) == 0 else {
            throw PublishError.fileSystem("cannot read", path: shown, syscall: "fstat", errno: errno)
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw PublishError(
                code: .invalidContent,
                message:
                    "\(shown) is a symlink or special file; a storage carries regular files and folders only: replace it with a copy or remove it"
            )
        }
        let output = name.withCString { openat(targetFolder, $0, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644) }
        guard output >= 0 else {
            throw PublishError.fileSystem("cannot create the copy of", path: shown, syscall: "openat", errno: errno)
        }
        defer { close(output) }
        return try fileWork { () throws(FileSystemError) in
            try FileCopy.copy(from: input, to: output, shownFrom: shown, shownTo: "its snapshot copy")
        }
    }
}
