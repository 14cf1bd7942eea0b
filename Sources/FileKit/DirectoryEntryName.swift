import Glibc

/// The name of a `dirent` that `readdir` returned, read up to its NUL.
///
/// Never `entry.pointee.d_name`: that copies the whole 256-byte field, but `readdir`'s records
/// are only `d_reclen` bytes long, and for a record at the end of its buffer the copy can run
/// into an unmapped page. Foundation's `Process.run` crashed this way in our test runs
/// (swift-corelibs-foundation #5472, fixed after Swift 6.3.1).
public enum DirectoryEntryName {
    /// The NUL-terminated name, valid until the next `readdir` or `closedir` of its stream.
    public static func pointer(_ entry: UnsafeMutablePointer<dirent>) -> UnsafePointer<CChar> {
        UnsafeRawPointer(entry).advanced(by: MemoryLayout<dirent>.offset(of: \dirent.d_name)!)
            .assumingMemoryBound(to: CChar.self)
    }

    /// The name's bytes, without the NUL.
    public static func bytes(_ entry: UnsafeMutablePointer<dirent>) -> UnsafeBufferPointer<UInt8> {
        let name = pointer(entry)
        return UnsafeRawBufferPointer(start: name, count: strlen(name)).bindMemory(to: UInt8.self)
    }

    /// Whether the entry is `.` or `..`.
    public static func isDotOrDotDot(_ entry: UnsafeMutablePointer<dirent>) -> Bool {
        let name = pointer(entry)
        return name[0] == 0x2E && (name[1] == 0 || (name[1] == 0x2E && name[2] == 0))
    }
}
