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

        /// What usually helps, to follow the refusal in a message ("check the path").
        public var remedy: String {
            switch description {
            case "does not exist": "check the path"
            case "is a folder, not a file": "give a file's path"
            case "is not text (not UTF-8)": "save it as UTF-8"
            case let other where other.hasPrefix("is UTF-"):
                "save it as UTF-8 (iconv -f \(other.dropFirst(3).prefix { $0 != " " }) -t UTF-8)"
            case let other where other.hasPrefix("cannot"): "check its permissions"
            case let other where other.hasSuffix("at most)"): "check that it is the right file"
            default: "give a regular file's path"
            }
        }
    }

    /// The text of the file at `path` (symlinks followed: a person named it).
    public static func read(_ path: String, limit: Int = 64 << 10) throws(Refusal) -> String {
        let (fd, info) = try openRegularFile(path)
        defer { close(fd) }
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
            throw Refusal(
                description: wideEncoding(of: data).map { "is \($0) text, not UTF-8" } ?? "is not text (not UTF-8)")
        }
        // ASCII in UTF-16 without a mark is valid UTF-8 too, a NUL every other byte.
        if let wide = unmarkedUTF16(data) {
            throw Refusal(description: "is \(wide) text without a byte order mark, not UTF-8")
        }
        return text
    }

    /// `UTF-16LE` or `UTF-16BE` when `data` has no byte order mark but reads as text in that
    /// encoding, with a NUL in every other byte of its first 64 (the high half of ASCII text).
    static func unmarkedUTF16(_ data: Data) -> String? {
        let head = [UInt8](data.prefix(64))
        guard head.count >= 4, head.count % 2 == 0 else { return nil }
        let evens = stride(from: 0, to: head.count, by: 2).map { head[$0] }
        let odds = stride(from: 1, to: head.count, by: 2).map { head[$0] }
        let (name, encoding): (String, String.Encoding)
        if odds.allSatisfy({ $0 == 0 }), !evens.contains(0) {
            (name, encoding) = ("UTF-16LE", .utf16LittleEndian)
        } else if evens.allSatisfy({ $0 == 0 }), !odds.contains(0) {
            (name, encoding) = ("UTF-16BE", .utf16BigEndian)
        } else {
            return nil
        }
        return isText(data, encoding) ? name : nil
    }

    /// Whether `data` reads as `encoding` holding no control characters but tabs and line ends.
    private static func isText(_ data: Data, _ encoding: String.Encoding) -> Bool {
        guard let text = String(data: data, encoding: encoding) else { return false }
        return text.unicodeScalars.allSatisfy { $0.value >= 0x20 || [0x09, 0x0A, 0x0D].contains($0.value) }
    }

    /// `UTF-16` or `UTF-32` when `data` starts with that encoding's byte order mark (as Windows
    /// editors save "Unicode" text) and reads as text in it (no control characters but tabs and
    /// line ends), else nil: a binary file that happens to start so is no text.
    static func wideEncoding(of data: Data) -> String? {
        let head = [UInt8](data.prefix(4))
        // FF FE 00 00 starts UTF-32LE, or UTF-16LE whose first character is U+0000: the one
        // that reads as text.
        var candidates: [(String, String.Encoding)] = []
        if head.starts(with: [0xFF, 0xFE, 0, 0]) || head.starts(with: [0, 0, 0xFE, 0xFF]) {
            candidates.append(("UTF-32", .utf32))
        }
        if head.starts(with: [0xFF, 0xFE]) || head.starts(with: [0xFE, 0xFF]) {
            candidates.append(("UTF-16", .utf16))
        }
        return candidates.first { isText(data, $0.1) }?.0
    }

    /// Opens the file at `path` for reading (symlinks followed: a person named it) when it is a
    /// regular file, with its status; the caller closes the descriptor. Never blocks on a FIFO,
    /// and says what the file is when it is not one ("is a folder, not a file").
    public static func openRegularFile(_ path: String) throws(Refusal) -> (descriptor: Int32, status: stat) {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            // A socket cannot be opened at all (ENXIO): say what it is.
            var info = stat()
            if code == ENXIO, stat(path, &info) == 0, info.st_mode & S_IFMT != S_IFREG {
                throw Refusal(description: "is not a regular file (a FIFO, a socket or a device)")
            }
            throw Refusal(
                description: code == ENOENT
                    ? "does not exist" : "cannot be opened (\(String(cString: strerror(code))))")
        }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let code = errno
            close(fd)
            throw Refusal(description: "cannot be read (\(String(cString: strerror(code))))")
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG: return (fd, info)
        case S_IFDIR:
            close(fd)
            throw Refusal(description: "is a folder, not a file")
        default:
            close(fd)
            throw Refusal(description: "is not a regular file (a FIFO, a socket or a device)")
        }
    }
}
