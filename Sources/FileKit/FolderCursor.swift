import Foundation

/// A position in a folder tree for depth-first work, holding one open folder however deep it is.
///
/// Walking down opens one name at a time relative to the current folder, never following a
/// symlink (`O_NOFOLLOW`); walking up opens `..` and checks that it is the folder we came from
/// (device and inode), so a tree moved or swapped for a symlink mid-walk is an error, not a walk
/// into someone else's folder. Descriptor use is constant in depth (a tree 1,800 levels deep
/// once kept 1,800 open and ran out), and no path longer than one name reaches the kernel, so
/// depth never meets `PATH_MAX` either.
public struct FolderCursor: ~Copyable {
    /// One entry of a folder as `readdir` gave it, with its `lstat`.
    public struct Entry {
        /// The raw name: Linux names are bytes, and not every byte string is UTF-8.
        public var name: [UInt8]
        /// Its `lstat`, taken relative to the open folder.
        public var info: stat

        /// Whether the entry is a folder; a symlink to one is not (its `lstat` is the link's).
        public var isFolder: Bool { info.st_mode & S_IFMT == S_IFDIR }
    }

    /// The open folder the cursor is at.
    public private(set) var descriptor: Int32
    /// Device and inode of every folder from the start down to the current one.
    private var identities: [(UInt64, UInt64)]
    /// The names descended through, for messages: the folder a failure is in.
    private var names: [[UInt8]] = []
    /// The starting folder's path, for messages.
    public let shownAs: String

    /// A cursor at `path` (followed if it is a symlink: the caller chose it). Nil when it does
    /// not exist.
    public init?(at path: String) throws(FileSystemError) {
        guard let opened = try LongPath.openFolder(path, followingLink: true, operation: "cannot read folder") else {
            return nil
        }
        try self.init(adopting: opened, shownAs: path)
    }

    /// A cursor at the open folder `descriptor`, which it takes over (and closes).
    public init(adopting descriptor: Int32, shownAs: String) throws(FileSystemError) {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            let code = errno
            close(descriptor)
            throw FileSystemError("cannot read folder", path: shownAs, syscall: "fstat", errno: code)
        }
        self.descriptor = descriptor
        self.identities = [(UInt64(info.st_dev), UInt64(info.st_ino))]
        self.shownAs = shownAs
    }

    deinit { close(descriptor) }

    /// How many levels below the start the cursor is.
    public var depth: Int { identities.count - 1 }

    /// The current folder's entries, without `.` and `..`. An entry that vanishes between
    /// `readdir` and its `lstat` is left out.
    public func entries() throws(FileSystemError) -> [Entry] {
        try Self.entries(of: descriptor, shownAs: shownAs)
    }

    /// The entries of the open folder `descriptor` (which stays open), without `.` and `..`,
    /// each with its `lstat`; `shownAs` names the folder in errors. An entry that vanishes
    /// between `readdir` and its `lstat` is left out.
    public static func entries(of descriptor: Int32, shownAs: String) throws(FileSystemError) -> [Entry] {
        let copy = dup(descriptor)
        guard copy >= 0, let handle = fdopendir(copy) else {
            let code = errno
            if copy >= 0 { close(copy) }
            throw FileSystemError("cannot read a folder below", path: shownAs, syscall: "fdopendir", errno: code)
        }
        defer { closedir(handle) }
        // The duplicate shares the reading position: start from the top every time.
        rewinddir(handle)
        var result: [Entry] = []
        while let entry = readdir(handle) {
            if DirectoryEntryName.isDotOrDotDot(entry) { continue }
            let name = DirectoryEntryName.pointer(entry)
            var info = stat()
            guard fstatat(descriptor, name, &info, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
            result.append(Entry(name: Array(DirectoryEntryName.bytes(entry)), info: info))
        }
        return result
    }

    /// Moves into the subfolder `name`. Returns false, staying put, when it is gone or is no
    /// longer a folder (a symlink put there is not followed).
    public mutating func descend(into name: [UInt8]) throws(FileSystemError) -> Bool {
        let child = name.withCString { openat(descriptor, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
        guard child >= 0 else {
            let code = errno
            if code == ENOENT || code == ENOTDIR || code == ELOOP { return false }
            throw FileSystemError(
                "cannot read folder '\(EscapedName.text(name))' below", path: shownAs, syscall: "openat", errno: code)
        }
        var info = stat()
        guard fstat(child, &info) == 0 else {
            let code = errno
            close(child)
            throw FileSystemError("cannot read a folder below", path: shownAs, syscall: "fstat", errno: code)
        }
        close(descriptor)
        descriptor = child
        identities.append((UInt64(info.st_dev), UInt64(info.st_ino)))
        names.append(name)
        return true
    }

    /// Moves back to the parent folder, checking it is the one the cursor came down from.
    public mutating func ascend() throws(FileSystemError) {
        precondition(depth > 0, "ascend() above the starting folder")
        let parent = openat(descriptor, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard parent >= 0 else {
            let code = errno
            // A folder that can be read but not searched (mode 644) is entered, and only then
            // fails: it is named, which "a folder below" did not.
            let folder = names.map { EscapedName.text($0) }.joined(separator: "/")
            throw FileSystemError(
                code == EACCES
                    ? "cannot search the folder '\(folder)' (it needs its x permission, chmod +x) below"
                    : "cannot go back up from the folder '\(folder)' below", path: shownAs, syscall: "openat",
                errno: code)
        }
        var info = stat()
        let expected = identities[identities.count - 2]
        guard fstat(parent, &info) == 0, (UInt64(info.st_dev), UInt64(info.st_ino)) == expected else {
            close(parent)
            throw FileSystemError(
                code: .changedUnderneath, operation: "a folder was moved while it was being worked in, below",
                path: shownAs,
                remedy: "make sure nothing else changes the folder meanwhile, and try again")
        }
        close(descriptor)
        descriptor = parent
        identities.removeLast()
        names.removeLast()
    }
}

extension [UInt8] {
    /// Calls `body` with the bytes as a NUL-terminated C string (built on the stack for a name's
    /// length: this runs for every entry of every walk).
    public func withCString<T>(_ body: (UnsafePointer<CChar>) throws -> T) rethrows -> T {
        try withUnsafeTemporaryAllocation(of: CChar.self, capacity: count + 1) { buffer in
            self.withUnsafeBytes { bytes in
                if let base = bytes.baseAddress {
                    UnsafeMutableRawPointer(buffer.baseAddress!).copyMemory(from: base, byteCount: bytes.count)
                }
            }
            buffer[count] = 0
            return try body(buffer.baseAddress!)
        }
    }
}
