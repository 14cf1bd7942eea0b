#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
internal import CLinux

/// The write(2) loop the extractor uses, as a value so tests can inject failures such as
/// `ENOSPC` that a real disk rarely offers on demand.
struct FileWriting: Sendable {
    /// Writes all of `bytes` to `fd`. Returns nil on success, or the errno of the failed call.
    var writeAll: @Sendable (_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32?

    /// The real system call, retried on `EINTR` and on short writes.
    static let system = FileWriting { fd, bytes in
        var offset = 0
        while offset < bytes.count {
            let written = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
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
}
