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
            case let other where other.hasPrefix("is not text (not UTF-8"): "save it as UTF-8"
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
        if let wide = wideEncoding(of: data) {
            throw Refusal(description: "is \(wide) text, not UTF-8")
        }
        // Without a mark: UTF-16 or UTF-32 (ASCII in them is valid UTF-8 too, with NULs).
        if let wide = unmarkedWideEncoding(of: data) {
            throw Refusal(description: "is \(wide) text without a byte order mark, not UTF-8")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            // Where, when it is past the first line: a config's problems are found by line.
            let line = firstInvalidLine(data)
            throw Refusal(description: "is not text (not UTF-8\(line > 1 ? " from line \(line)" : ""))")
        }
        return text
    }

    /// The line (from 1) of the first byte of `data` that is not UTF-8.
    static func firstInvalidLine(_ data: Data) -> Int {
        var line = 1
        var iterator = data.makeIterator()
        var decoder = UTF8()
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue(let scalar): if scalar == "\n" { line += 1 }
            case .emptyInput, .error: return line
            }
        }
    }

    /// `UTF-16LE`, `UTF-16BE`, `UTF-32LE` or `UTF-32BE` when `data` has no byte order mark but
    /// reads as text in that encoding and its first 4 KiB have the NULs such text has (which no
    /// UTF-8 text has): UTF-32's top byte is NUL in every character; UTF-16's high byte is NUL
    /// in ASCII characters (the keys and spaces of a config or key file), which must be at least
    /// two and a tenth of them, so that UTF-8 with a stray NUL is not taken for UTF-16. The byte
    /// order is the one with those NULs: `a b` in UTF-16BE also reads as CJK in UTF-16LE.
    static func unmarkedWideEncoding(of data: Data) -> String? {
        guard data.count >= 4, data.contains(0) else { return nil }
        let head = [UInt8](data.prefix(4_096))
        /// How many of `head`'s bytes at `offset` of each `width` are NUL.
        func nuls(_ width: Int, at offset: Int) -> Int {
            stride(from: offset, to: head.count, by: width).count { head[$0] == 0 }
        }
        var candidates: [(String, String.Encoding)] = []
        if data.count % 4 == 0, head.count >= 8 {
            let units = head.count / 4
            if nuls(4, at: 3) == units { candidates.append(("UTF-32LE", .utf32LittleEndian)) }
            if nuls(4, at: 0) == units { candidates.append(("UTF-32BE", .utf32BigEndian)) }
        }
        if data.count % 2 == 0 {
            let (units, low, high) = (head.count / 2, nuls(2, at: 1), nuls(2, at: 0))
            if max(low, high) >= 2, max(low, high) * 10 >= units {
                candidates.append(low >= high ? ("UTF-16LE", .utf16LittleEndian) : ("UTF-16BE", .utf16BigEndian))
            }
        }
        return candidates.first { isText(data, $0.1) }?.0
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

    /// The bytes of the file the program itself wrote at `path` (a journal), read only when it
    /// is a regular file of at most `limit` bytes and not a symlink: nil when nothing is there,
    /// else the refusal. What a neighbour planted there is never followed nor waited on.
    public static func regularFileBytes(_ path: String, limit: Int) -> Result<[UInt8]?, Refusal> {
        let fd: Int32
        let info: stat
        do {
            (fd, info) = try openRegularFile(path, followingLinks: false)
        } catch {
            return error.description == "does not exist" ? .success(nil) : .failure(error)
        }
        defer { close(fd) }
        guard info.st_size <= limit else {
            return .failure(Refusal(description: "is \(info.st_size) bytes, more than one holds (\(limit) at most)"))
        }
        do {
            return .success(Array(try DescriptorIO.read(fd, count: Int(info.st_size), path: path)))
        } catch {
            return .failure(Refusal(description: "cannot be read (\(error))"))
        }
    }

    /// Opens the file at `path` for reading (symlinks followed: a person named it) when it is a
    /// regular file, with its status; the caller closes the descriptor. Never blocks on a FIFO,
    /// and says what the file is when it is not one ("is a folder, not a file").
    public static func openRegularFile(_ path: String, followingLinks: Bool = true) throws(Refusal) -> (
        descriptor: Int32, status: stat
    ) {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | (followingLinks ? 0 : O_NOFOLLOW))
        guard fd >= 0 else {
            let code = errno
            if code == ELOOP, !followingLinks { throw Refusal(description: "is a symlink") }
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
