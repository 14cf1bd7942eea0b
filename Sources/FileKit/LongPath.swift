import CLinux
import Foundation

/// Runs a `*at` system call on a path of any length.
///
/// Linux refuses a path of `PATH_MAX` (4096) bytes or more with `ENAMETOOLONG`, but a content
/// path alone may be 4,095 bytes (protocol.md §3.3), so its absolute form below the content or
/// staging folder can be longer than the kernel takes in one piece. Such a path is opened a
/// piece at a time: each piece shorter than the limit is opened relative to the one before
/// (`O_PATH`, one descriptor held at a time), and the call gets the last folder and the rest.
/// Short paths, nearly all of them, go to the call as they are, relative to `AT_FDCWD`.
public enum LongPath {
    /// The longest path handed to the kernel in one piece.
    public static let pieceLimit = 4000

    /// Calls `body` with a folder descriptor and a path relative to it that together name `path`.
    ///
    /// Below a held folder (`/proc/self/fd/N/…`, ``HeldFolder/path``) nothing on the way is
    /// followed: the folders between the held one and the last name are opened with no symlink
    /// allowed (``belowHeldFolder(_:)``), so a link a neighbour plants mid-run in place of a
    /// folder of the tree fails the call (`ELOOP`) instead of leading out of it.
    public static func at<T>(_ path: String, _ body: (Int32, String) throws(FileSystemError) -> T)
        throws(FileSystemError) -> T
    {
        if let (held, rest) = belowHeldFolder(path) {
            let slash = rest.utf8.lastIndex(of: UInt8(ascii: "/"))
            guard let slash else { return try body(held, rest) }
            let parent = String(Substring(rest.utf8[..<slash]))
            let name = String(Substring(rest.utf8[rest.utf8.index(after: slash)...]))
            let folder = clinux_open_beneath(held, parent, clinux_o_path() | O_DIRECTORY | O_CLOEXEC)
            guard folder >= 0 else {
                throw FileSystemError("cannot open a folder of", path: path, syscall: "openat2", errno: errno)
            }
            defer { close(folder) }
            return try body(folder, name.isEmpty ? "." : name)
        }
        guard path.utf8.count >= pieceLimit else { return try body(AT_FDCWD, path) }
        var folder = AT_FDCWD
        defer { if folder != AT_FDCWD { close(folder) } }
        var rest = Substring(path)
        while rest.utf8.count >= pieceLimit {
            guard let cut = lastSlash(in: rest.utf8.prefix(pieceLimit)), cut != rest.utf8.startIndex else {
                throw FileSystemError("cannot open a folder of", path: path, syscall: "openat", errno: ENAMETOOLONG)
            }
            let head = String(Substring(rest.utf8[..<cut]))
            let next = openat(folder, head, clinux_o_path() | O_DIRECTORY | O_CLOEXEC)
            guard next >= 0 else {
                throw FileSystemError("cannot open a folder of", path: path, syscall: "openat", errno: errno)
            }
            if folder != AT_FDCWD { close(folder) }
            folder = next
            rest = Substring(rest.utf8[rest.utf8.index(after: cut)...])
        }
        return try body(folder, String(rest))
    }

    /// `/proc/self/fd/N/rest` as the descriptor `N` and `rest` (no trailing slash); nil for any
    /// other path, and for a descriptor's own name (`/proc/self/fd/N`).
    public static func belowHeldFolder(_ path: String) -> (descriptor: Int32, rest: String)? {
        let prefix = "/proc/self/fd/"
        guard path.hasPrefix(prefix) else { return nil }
        let tail = path.utf8.dropFirst(prefix.utf8.count)
        guard let slash = tail.firstIndex(of: UInt8(ascii: "/")) else { return nil }
        let digits = tail[..<slash]
        guard !digits.isEmpty, digits.count <= 9,
            digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            let descriptor = Int32(String(Substring(digits)))
        else { return nil }
        var rest = tail[tail.index(after: slash)...]
        while rest.last == UInt8(ascii: "/") { rest = rest.dropLast() }
        guard !rest.isEmpty else { return nil }
        return (descriptor, String(Substring(rest)))
    }

    /// Opens the folder at `path` for reading, following a link at its last name only when
    /// `followingLink`: its descriptor (the caller closes it), or nil when nothing is there.
    /// `operation` says what the open was for, in the error.
    public static func openFolder(_ path: String, followingLink: Bool, operation: String) throws(FileSystemError)
        -> Int32?
    {
        let opened = try at(path) { folder, rest throws(FileSystemError) -> Int32 in
            openat(folder, rest, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (followingLink ? 0 : O_NOFOLLOW))
        }
        guard opened >= 0 else {
            if errno == ENOENT { return nil }
            throw FileSystemError(operation, path: path, syscall: "openat", errno: errno)
        }
        return opened
    }

    private static func lastSlash(in bytes: Substring.UTF8View.SubSequence) -> Substring.UTF8View.Index? {
        bytes.lastIndex(of: UInt8(ascii: "/"))
    }
}
