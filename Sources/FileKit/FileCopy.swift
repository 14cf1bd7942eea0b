import Foundation

/// Copies bytes between two open files: `sendfile` inside the kernel, falling back to
/// `read`/`write` on filesystems that cannot. For the staged tree on filesystems without hard
/// links, and the publisher's snapshot of `--content`.
public enum FileCopy {
    /// Copies all of `input` (from its current offset) to `output`; returns the bytes copied.
    /// `shownFrom` and `shownTo` name the two files in messages.
    @discardableResult
    public static func copy(from input: Int32, to output: Int32, shownFrom: String, shownTo: String)
        throws(FileSystemError) -> Int64
    {
        var total: Int64 = 0
        while true {
            let count = sendfile(output, input, nil, 1 << 30)
            if count < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                if total == 0 && (errno == EINVAL || errno == ENOSYS) { break }
                throw FileSystemError("cannot copy \(shownFrom) to", path: shownTo, syscall: "sendfile", errno: errno)
            }
            if count == 0 { return total }
            total += Int64(count)
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let count = read(input, buffer.baseAddress, buffer.count)
            if count < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw FileSystemError("cannot read", path: shownFrom, syscall: "read", errno: errno)
            }
            if count == 0 { return total }
            if let code = DescriptorIO.writeAll(output, UnsafeRawBufferPointer(rebasing: buffer[..<count])) {
                throw FileSystemError("cannot copy \(shownFrom) to", path: shownTo, syscall: "write", errno: code)
            }
            total += Int64(count)
        }
    }
}
