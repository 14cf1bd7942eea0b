#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A kernel-made text file (`/proc`, `/sys`) read whole. Such files report a size of 0, so they
/// are read until the end rather than by size (Foundation's `String(contentsOfFile:)` stops after
/// the first page, which once hid a lock holder in `/proc/locks`).
package enum ProcFile {
    /// The text of `path`, read until its end or `limit` bytes; nil when it cannot be opened or a
    /// read fails.
    package static func text(_ path: String, limit: Int = 4 << 20) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while bytes.count < limit {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[..<count])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
