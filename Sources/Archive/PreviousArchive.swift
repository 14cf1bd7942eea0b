internal import CLinux
internal import CZip

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An archive this library wrote before, opened read-only so that ``ZipWriter`` can copy the
/// deflated bytes of entries whose content did not change instead of compressing them again.
final class PreviousArchive {
    let handle: OpaquePointer
    let path: String

    /// The comment ``ZipWriter/archive(folder:to:topLevelFolder:reusing:)`` writes: who compressed
    /// the entries, by which rules, with which zlib. Entries are copied only between archives with
    /// the same marker, so a copied entry holds exactly the bytes a fresh build would. Version 2
    /// stores files that deflate does not shrink (``DeflateProbe``); version 1 deflated all.
    static var marker: String {
        "content-sync ZipWriter 2; deflate level default unless a sample shrinks under 1/32; zlib \(String(cString: zlibVersion()))"
    }

    /// Opens `path` when it exists and carries ``marker``; nil otherwise (nothing to reuse).
    init?(path: String) {
        var code: Int32 = 0
        guard let handle = zip_open(path, ZIP_RDONLY, &code) else { return nil }
        var length: Int32 = 0
        guard let comment = zip_get_archive_comment(handle, &length, zip_flags_t(ZIP_FL_ENC_RAW)),
            String(decoding: UnsafeRawBufferPointer(start: comment, count: Int(length)), as: UTF8.self) == Self.marker
        else {
            zip_discard(handle)
            return nil
        }
        self.handle = handle
        self.path = path
    }

    deinit {
        zip_discard(handle)
    }

    /// The index of entry `name`, and whether it is deflated (else stored), when it holds exactly
    /// `crc` and `size` and is deflated or stored.
    func reusableEntry(named name: String, crc: UInt32, size: Int64) -> (index: UInt64, deflated: Bool)? {
        let index = zip_name_locate(handle, name, zip_flags_t(ZIP_FL_ENC_UTF_8))
        guard index >= 0 else { return nil }
        var stat = zip_stat_t()
        zip_stat_init(&stat)
        guard zip_stat_index(handle, UInt64(index), 0, &stat) == 0,
            stat.valid & UInt64(ZIP_STAT_CRC | ZIP_STAT_SIZE | ZIP_STAT_COMP_METHOD)
                == UInt64(ZIP_STAT_CRC | ZIP_STAT_SIZE | ZIP_STAT_COMP_METHOD),
            stat.crc == crc, stat.size == UInt64(size),
            stat.comp_method == UInt16(ZIP_CM_DEFLATE) || stat.comp_method == UInt16(ZIP_CM_STORE)
        else { return nil }
        return (UInt64(index), stat.comp_method == UInt16(ZIP_CM_DEFLATE))
    }

    /// The CRC-32 and size of the file at `path`, or nil when it cannot be read.
    static func crc32(ofFile path: String) -> (crc: UInt32, size: Int64)? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        var crc = CZip.crc32(0, nil, 0)
        var size: Int64 = 0
        while true {
            let count = read(fd, buffer.baseAddress, buffer.count)
            if count < 0 {
                if clinux_errno() == EINTR { continue }
                return nil
            }
            if count == 0 { break }
            crc = CZip.crc32(crc, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), uInt(count))
            size += Int64(count)
        }
        return (UInt32(crc), size)
    }
}
