import Foundation

/// A short text file a person names (a key file, a secret): read whole, but only when it is a
/// regular file of at most `limit` bytes holding UTF-8, each refusal saying which.
///
/// `String(contentsOfFile:)` read a 300 MB file whole before refusing it, blocked on a FIFO,
/// and answered a folder or a FIFO with Foundation's words ("You don't have permission" as root,
/// "NSCocoaErrorDomain error 256").
public enum SmallTextFile {
    /// Why a file was not read: a phrase to follow its path ("is a folder, not a file").
    public struct Refusal: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// The text of the file at `path` (symlinks followed: a person named it).
    public static func read(_ path: String, limit: Int = 64 << 10) throws(Refusal) -> String {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            throw Refusal(
                description: code == ENOENT
                    ? "does not exist" : "cannot be opened (\(String(cString: strerror(code))))")
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw Refusal(description: "cannot be read (\(String(cString: strerror(errno))))")
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFDIR: throw Refusal(description: "is a folder, not a file")
        default: throw Refusal(description: "is not a regular file (a FIFO, a socket or a device)")
        }
        guard info.st_size <= limit else {
            throw Refusal(
                description: "is \(info.st_size) bytes, more than a file of this kind holds (\(limit) at most)")
        }
        let data: Data
        do {
            data = try DescriptorIO.read(fd, count: Int(info.st_size), path: path)
        } catch {
            throw Refusal(description: "cannot be read (\(error))")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw Refusal(description: "is not text (not UTF-8)")
        }
        return text
    }
}
