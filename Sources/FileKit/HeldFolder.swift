import Foundation

/// A folder held open by its descriptor and used by path through the descriptor's own name,
/// `/proc/self/fd/N/…`: code that works by path (libzip, atomic writes, tree copies) then works
/// in the folder that was opened, wherever its name goes afterwards. A neighbour who may rename
/// entries of the parent folder can swap the name for a link, or for a folder of their own,
/// while the work runs; nothing lands or is deleted there.
///
/// The folder is opened without following a link at its own name (the parent is followed: the
/// caller chose it). Where `/proc` is missing, ``path`` is the plain path and nothing is held
/// beyond the checks at opening.
public final class HeldFolder: Sendable {
    /// The open folder (closed when the value goes).
    public let descriptor: Int32
    /// The folder's path as the caller named it, for messages.
    public let shownAs: String
    /// The path work goes through: `/proc/self/fd/N/.` when the kernel gives it, else
    /// ``shownAs``. The trailing `.` makes the path name the folder itself rather than the
    /// descriptor's magic link, so a check that does not follow a last link (`lstat`,
    /// `O_NOFOLLOW`) sees a folder.
    public let path: String
    /// The descriptor's own name, `/proc/self/fd/N`.
    private var descriptorName: String { "/proc/self/fd/\(descriptor)" }
    /// Device and inode of the opened folder.
    public let device: UInt64
    /// Device and inode of the opened folder.
    public let inode: UInt64
    /// The owner of the opened folder.
    public let owner: uid_t

    /// Opens `name` in `parent`, a folder and not a link. Nil when nothing is there; throws
    /// when something other than a folder is (`ELOOP` or `ENOTDIR` for a link or a file).
    public convenience init?(opening name: String, in parent: String) throws(FileSystemError) {
        let shown = parent + "/" + name
        guard let opened = try LongPath.openFolder(shown, followingLink: false, operation: "cannot open the folder")
        else { return nil }
        try self.init(adopting: opened, shownAs: shown)
    }

    /// The folder at `path` (its last name not a link), held: for work below it that must not
    /// follow a link anywhere on the way (``LongPath/at(_:_:)``). Throws when it is missing, a
    /// link, or not a folder.
    public static func content(_ path: String) throws(FileSystemError) -> HeldFolder {
        let name = (path as NSString).lastPathComponent
        let parent = (path as NSString).deletingLastPathComponent
        guard !name.isEmpty, name != "/", let held = try HeldFolder(opening: name, in: parent) else {
            throw FileSystemError("cannot open the folder", path: path, syscall: "openat", errno: ENOENT)
        }
        return held
    }

    /// Holds `descriptor`, a folder the caller opened (and checked) as `shownAs`; it is closed
    /// with the value, or at once when it cannot be read.
    public init(adopting descriptor: Int32, shownAs: String) throws(FileSystemError) {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            let code = errno
            close(descriptor)
            throw FileSystemError("cannot read the folder", path: shownAs, syscall: "fstat", errno: code)
        }
        self.descriptor = descriptor
        self.shownAs = shownAs
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        owner = info.st_uid
        let through = "/proc/self/fd/\(descriptor)/."
        var seen = stat()
        path =
            lstat(through, &seen) == 0 && UInt64(seen.st_dev) == device && UInt64(seen.st_ino) == inode
            ? through : shownAs
    }

    deinit { close(descriptor) }

    /// Whether the name still leads to the opened folder (not moved, not swapped).
    public var isStillInPlace: Bool {
        guard let info = FileSystem.status(of: shownAs) else { return false }
        return info.st_mode & S_IFMT == S_IFDIR && UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode
    }

    /// `text` with ``path`` written as ``shownAs``: messages name the folder as the user knows it.
    public func shown(_ text: String) -> String {
        guard path != shownAs else { return text }
        let text = text.replacingOccurrences(of: path, with: descriptorName)
        var result = ""
        var rest = Substring(text)
        while let found = rest.range(of: descriptorName) {
            result += rest[..<found.lowerBound]
            // `/proc/self/fd/7` is not the start of `/proc/self/fd/70`.
            let digitFollows = rest[found.upperBound...].first.map { $0.isASCII && $0.isNumber } ?? false
            result += digitFollows ? String(rest[found]) : shownAs
            rest = rest[found.upperBound...]
        }
        return result + rest
    }

    /// `error` with ``path`` written as ``shownAs`` in its path and operation.
    public func shown(_ error: FileSystemError) -> FileSystemError {
        var shown = error
        shown.path = self.shown(error.path)
        shown.operation = self.shown(error.operation)
        return shown
    }

    /// `error`'s text with ``path`` written as ``shownAs``; a ``FileSystemError`` keeps its
    /// kind, with its path and operation written so.
    public func shown(_ error: any Error) -> any Error {
        (error as? FileSystemError).map { shown($0) } ?? error
    }

    /// Removes the name, empty folder, when it still leads to the opened folder; false when it
    /// does not (the folder was moved, or something else stands at its name, which is left).
    public func removeName() throws(FileSystemError) -> Bool {
        guard isStillInPlace else { return false }
        let removed = try LongPath.at(shownAs) { folder, rest throws(FileSystemError) -> Int32 in
            unlinkat(folder, rest, AT_REMOVEDIR)
        }
        guard removed == 0 else {
            if errno == ENOENT { return false }
            throw FileSystemError("cannot delete the folder", path: shownAs, syscall: "rmdir", errno: errno)
        }
        return true
    }
}
