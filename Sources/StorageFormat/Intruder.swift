import CLinux
import FileKit
import Foundation

/// Something in a local folder that no published version can hold: a symlink, fifo, socket or
/// device, an entry whose name breaks the path rules, or one whose name is not UTF-8.
///
/// Content-sync never creates these, so in a mirror they are local drift: `verify` reports them
/// and `--repair` removes them, and an update leaves them out of the next version. The name is
/// kept as raw bytes, because a `String` of a name that is not UTF-8 names a file that does not
/// exist.
package struct Intruder: Sendable, Equatable, CustomStringConvertible {
    package enum Kind: String, Sendable, Equatable {
        case symlink, fifo, socket, device
        case unsafeName = "entry with a name the path rules refuse"
        case undecodableName = "entry whose name is not UTF-8"
        case normalizationTwin = "entry whose name equals a sibling's up to Unicode normalization"
        /// A file the client may not read (mode 000, say): drift whose bytes nobody can check,
        /// replaced by a repair like any other (``ContentTree/scanLocal(_:cache:ledger:readingEvery:unreadableIsDrift:)``).
        case unreadable = "unreadable file"
    }

    /// The folder holding it.
    package var folder: SafeRelativePath
    /// Its name, as the filesystem has it.
    package var name: [UInt8]
    package var kind: Kind
    /// Why the path rules refuse the name, for ``Kind/unsafeName``.
    package var detail: String?

    package init(folder: SafeRelativePath, name: [UInt8], kind: Kind, detail: String? = nil) {
        self.folder = folder
        self.name = name
        self.kind = kind
        self.detail = detail
    }

    /// Its path with unreadable bytes escaped (`caf\xE9.txt`).
    package var shownPath: String {
        (folder.isRoot ? "" : folder.string + "/") + EscapedName.text(name)
    }

    package var description: String {
        "\(kind.rawValue) \(shownPath)" + (kind == .unreadable ? " (\(detail ?? "cannot be read"))" : "")
    }

    /// The kind of a special file from its `st_mode`.
    package static func kind(ofMode mode: mode_t) -> Kind {
        switch mode & S_IFMT {
        case S_IFLNK: return .symlink
        case S_IFIFO: return .fifo
        case S_IFSOCK: return .socket
        default: return .device
        }
    }

    /// Deletes it (a whole tree, for a folder) from the tree rooted at `root`.
    package func remove(under root: String) throws(FileSystemError) {
        let folderPath = folder.absolute(in: root)
        try LongPath.at(folderPath) { parent, rest throws(FileSystemError) in
            let opened = openat(parent, rest, clinux_o_path() | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard opened >= 0 else {
                if errno == ENOENT { return }
                throw FileSystemError("cannot open folder", path: folderPath, syscall: "openat", errno: errno)
            }
            defer { close(opened) }
            try TreeRemoval.remove(name, in: opened, shownAs: root + "/" + shownPath)
        }
    }
}
