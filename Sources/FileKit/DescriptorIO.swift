import CLinux
import Foundation

/// Whole-buffer reads and writes on an open descriptor: the `write(2)` and `pread(2)` loops that
/// retry on `EINTR` and continue after short transfers, written once for every caller.
public enum DescriptorIO {
    /// Writes all of `bytes` to `fd`. Returns nil on success, or the `errno` of the failed call
    /// (`EIO` when the kernel accepts no byte).
    public static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32? {
        var offset = 0
        while offset < bytes.count {
            let written = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 {
                let code = clinux_errno()
                if code == EINTR { continue }
                return code
            }
            if written == 0 { return EIO }
            offset += written
        }
        return nil
    }

    /// Writes all of `data` to `fd`; `path` names the file in the error.
    public static func write(_ data: some DataProtocol, to fd: Int32, path: String) throws(FileSystemError) {
        for region in data.regions {
            if let code = region.withUnsafeBytes({ writeAll(fd, $0) }) {
                throw FileSystemError("cannot write", path: path, syscall: "write", errno: code)
            }
        }
    }

    /// Reads up to `count` bytes of `fd` from offset `start` (`pread`, so the file offset is left
    /// alone); fewer when the file ends sooner. `path` names the file in the error. A negative
    /// `count` or `start` (a size a FUSE or network filesystem reported) is refused, not trapped on.
    public static func read(_ fd: Int32, at start: Int64 = 0, count: Int, path: String) throws(FileSystemError) -> Data
    {
        guard count >= 0, start >= 0 else {
            throw FileSystemError(
                "cannot read \(count) bytes at offset \(start) of", path: path, syscall: "pread", errno: EINVAL)
        }
        var data = Data(count: count)
        var failure: Int32?
        let got = data.withUnsafeMutableBytes { buffer -> Int in
            var offset = 0
            while offset < buffer.count {
                let received = pread(
                    fd, buffer.baseAddress! + offset, buffer.count - offset, off_t(start) + off_t(offset))
                if received < 0 {
                    if clinux_errno() == EINTR { continue }
                    failure = clinux_errno()
                    break
                }
                if received == 0 { break }
                offset += received
            }
            return offset
        }
        if let failure { throw FileSystemError("cannot read", path: path, syscall: "pread", errno: failure) }
        if got < count { data.count = got }
        return data
    }

    /// Reads `fd` from offset 0 in chunks of at most `chunkSize` bytes (`pread`, so the file
    /// offset is left alone), up to `limit` bytes or the end of the file, passing each chunk to
    /// `body`, which returns false to stop; returns how many bytes were read. `path` names the
    /// file in the error.
    @discardableResult
    public static func forEachChunk(
        of fd: Int32, limit: Int64 = .max, chunkSize: Int = 1 << 20, path: String,
        _ body: (UnsafeRawBufferPointer) -> Bool
    ) throws(FileSystemError) -> Int64 {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 16)
        defer { buffer.deallocate() }
        var offset: Int64 = 0
        while offset < limit {
            let wanted = Int(min(Int64(chunkSize), limit - offset))
            let got = pread(fd, buffer.baseAddress, wanted, off_t(offset))
            if got < 0 {
                if clinux_errno() == EINTR { continue }
                throw FileSystemError("cannot read", path: path, syscall: "pread", errno: clinux_errno())
            }
            if got == 0 { break }
            offset += Int64(got)
            if !body(UnsafeRawBufferPointer(rebasing: buffer[0..<got])) { break }
        }
        return offset
    }
}
