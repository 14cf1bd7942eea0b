import CLinux
import Foundation

/// Publishing a file so that readers see the old bytes or the new ones, never a torn mix.
///
/// Two ways, for two needs:
/// - ``write(_:to:durability:)`` replaces whatever is at the path: the bytes go to a new file beside
///   it (`O_EXCL`, a name no one else uses), then `rename(2)` puts it in place.
/// - ``UnnamedFile`` adds a file only where none is: an `O_TMPFILE` file in the target folder,
///   named by `linkat(2)` once complete, so a crash leaves nothing behind.
public enum AtomicFile {
    /// What a write makes survive a power loss (a crash of the process alone loses nothing once
    /// the rename is done).
    public enum Durability: Sendable {
        /// Nothing is flushed: after a power loss the name may hold the old bytes, the new ones
        /// or, on some filesystems, an empty file. For data a later `syncfs` covers.
        case none
        /// The file is flushed before the rename: the name holds the old bytes or the new ones,
        /// never an empty or partial file; the rename itself may be lost.
        case contents
        /// The file before the rename and the folder after it: the new bytes are there.
        case full
    }

    /// Writes `data` to `path` atomically, replacing any file there, flushed as `durability` says.
    public static func write(_ data: some DataProtocol, to path: String, durability: Durability = .none)
        throws(FileSystemError)
    {
        do {
            try write(to: path, durability: durability) { write in
                for region in data.regions { try region.withUnsafeBytes { try write($0) } }
            }
        } catch let error as FileSystemError {
            throw error
        } catch {
            // Only the writes throw here, and they throw FileSystemError.
            throw FileSystemError("cannot write", path: path, syscall: "write", errno: EIO)
        }
    }

    /// ``write(_:to:durability:)`` for bytes that come in pieces: `produce` passes each to the
    /// `write` it is given, in order. When `produce` throws (a source that turned out damaged),
    /// nothing is put in place and its error is thrown. With `keeping`, the status of the file
    /// it replaces, the new file gets that file's mode, and its owner where this user may give
    /// it (root), before it takes the name: a private file stays private throughout.
    public static func write(
        to path: String, durability: Durability = .none, keeping replaced: stat? = nil,
        _ produce: (_ write: (UnsafeRawBufferPointer) throws -> Void) throws -> Void
    ) throws {
        let temporary = path + ".tmp-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        let folder = (path as NSString).deletingLastPathComponent
        // The bytes, flushed as `durability` says, into the open file `fd`.
        func fill(_ fd: Int32) throws {
            try produce { bytes in
                if let code = DescriptorIO.writeAll(fd, bytes) {
                    throw FileSystemError("cannot write", path: path, syscall: "write", errno: code)
                }
            }
            if let replaced {
                _ = fchown(fd, replaced.st_uid, replaced.st_gid) // only root may; the mode holds regardless
                if fchmod(fd, replaced.st_mode & 0o777) != 0 { // never set-user-ID from a download
                    throw FileSystemError("cannot keep the mode of", path: path, syscall: "fchmod", errno: errno)
                }
            }
            if durability != .none && fsync(fd) != 0 {
                throw FileSystemError("cannot write", path: path, syscall: "fsync", errno: errno)
            }
        }
        // Unnamed while it is written (O_TMPFILE), named only for the rename: a process killed
        // mid-write (SIGTERM, SIGKILL) leaves no partial file beside the target. Where there is
        // no O_TMPFILE, a new file beside the target, named from the start.
        if let unnamed = UnnamedFile(in: folder.isEmpty ? "." : folder) {
            try fill(unnamed.descriptor)
            try unnamed.link(as: temporary)
        } else {
            let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
            guard fd >= 0 else {
                throw FileSystemError("cannot create a file beside", path: path, syscall: "open", errno: errno)
            }
            defer { close(fd) }
            do {
                try fill(fd)
            } catch {
                unlink(temporary)
                throw error
            }
        }
        guard rename(temporary, path) == 0 else {
            let code = errno
            unlink(temporary)
            throw FileSystemError("cannot put the new file in place at", path: path, syscall: "rename", errno: code)
        }
        if durability == .full { try DiskFlush.folder(folder.isEmpty ? "." : folder) }
    }
}

/// A file with no name yet (`O_TMPFILE`), in the folder where it will be named: written in full,
/// then given its name with ``link(as:)``. Until then no reader can see it, and if the process
/// dies the kernel frees it. Closing it without linking discards it.
public struct UnnamedFile: ~Copyable, Sendable {
    /// The open descriptor, for writing.
    public let descriptor: Int32

    /// Opens an unnamed file in `folder`, or nil where the filesystem or kernel has no `O_TMPFILE`
    /// (the caller then writes a named temporary file instead).
    public init?(in folder: String) {
        guard
            let descriptor = try? LongPath.at(
                folder, { parent, rest throws(FileSystemError) in clinux_openat_tmpfile(parent, rest, 0o644) }),
            descriptor >= 0
        else { return nil }
        self.descriptor = descriptor
    }

    /// Opens an unnamed file with `mode` in the open folder `folder` (a descriptor: no path is
    /// resolved, so no symlink on the way is followed), or nil where there is no `O_TMPFILE`.
    public init?(inFolder folder: Int32, mode: mode_t) {
        let descriptor = clinux_openat_tmpfile(folder, ".", Int32(mode))
        guard descriptor >= 0 else { return nil }
        self.descriptor = descriptor
    }

    /// Gives the file the name `name` in the open folder `folder`. Fails with
    /// ``FileSystemError/Code/alreadyExists`` when something has that name; `shownAs` is the
    /// path errors show.
    public func link(in folder: Int32, as name: String, shownAs: String) throws(FileSystemError) {
        if clinux_linkat_fd(descriptor, folder, name) != 0 {
            throw FileSystemError("cannot name the new file", path: shownAs, syscall: "linkat", errno: clinux_errno())
        }
    }

    /// Gives the file the name `path` (in the folder it was opened in). Fails with
    /// ``FileSystemError/Code/alreadyExists`` when something has that name.
    public func link(as path: String) throws(FileSystemError) {
        try LongPath.at(path) { folder, rest throws(FileSystemError) in
            if clinux_linkat_fd(descriptor, folder, rest) != 0 {
                throw FileSystemError("cannot name the new file", path: path, syscall: "linkat", errno: clinux_errno())
            }
        }
    }

    deinit { close(descriptor) }
}
