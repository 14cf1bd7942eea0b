internal import CLinux
import FileKit

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The write(2) loop the extractor uses, as a value so tests can inject failures such as
/// `ENOSPC` that a real disk rarely offers on demand.
struct FileWriting: Sendable {
    /// Writes all of `bytes` to `fd`. Returns nil on success, or the errno of the failed call.
    var writeAll: @Sendable (_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32?

    /// The real system call, retried on `EINTR` and on short writes (FileKit's loop).
    static let system = FileWriting { fd, bytes in DescriptorIO.writeAll(fd, bytes) }
}
