internal import CLinux
internal import CZip

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Decides whether a file is worth deflating, the way zip tools store what deflate cannot shrink:
/// it deflates up to four 16 KiB samples of the file (its start, end and two points between, or the
/// whole file when it is at most 64 KiB) and says yes when they shrink by at least 1/32.
///
/// Images, video, archives and random data then go into the archive stored: a client takes them
/// from a range of it with no inflating and no CRC pass (its SHA-256 check stays), and a publish
/// saves deflating them (about 40 MB/s per core). The answer depends only on the file's bytes and
/// zlib, so archiving the same content twice still gives identical bytes. One probe serves one
/// thread; its zlib stream is reset, not made again, for each file.
final class DeflateProbe {
    /// Bytes of one sample, and the samples read from a larger file.
    static let sampleBytes = 16 << 10
    static let samples = 4

    private var stream = z_stream()
    private var ready = false
    private let input = UnsafeMutableRawBufferPointer.allocate(byteCount: sampleBytes, alignment: 16)
    /// Larger than deflate's bound for one sample, so that one `Z_FINISH` call always ends it.
    private let output = UnsafeMutableRawBufferPointer.allocate(byteCount: 2 * sampleBytes, alignment: 16)

    init() {
        ready = czip_deflate_init_raw(&stream, Z_DEFAULT_COMPRESSION) == Z_OK
    }

    deinit {
        if ready { deflateEnd(&stream) }
        input.deallocate()
        output.deallocate()
    }

    /// Whether the file at `path` (of `size` bytes) shrinks by at least 1/32 when deflated; true
    /// when it cannot be read or is no longer a regular file (libzip then reports the error as it
    /// adds the file) or is empty. A fifo or a symlink put in the file's place is never waited on
    /// nor followed (`O_NONBLOCK | O_NOFOLLOW`).
    func worthDeflating(path: String, size: Int64) -> Bool {
        guard ready, size > 0 else { return true }
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { return true }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return true }
        var read: Int64 = 0
        var deflated: Int64 = 0
        for offset in Self.sampleOffsets(size: size) {
            let count = Int(min(Int64(Self.sampleBytes), size - offset))
            guard let sample = readFully(fd, at: offset, count: count), let out = deflate(sample) else { return true }
            read += Int64(sample)
            deflated += Int64(out)
        }
        return Self.worthDeflating(sampleBytes: read, deflatedBytes: deflated)
    }

    /// The decision from the samples' sizes: deflate when it saves at least 1/32 of them.
    static func worthDeflating(sampleBytes: Int64, deflatedBytes: Int64) -> Bool {
        sampleBytes > 0 && deflatedBytes <= sampleBytes - sampleBytes / 32
    }

    /// Where the samples of a file of `size` bytes start: the whole file as samples end to end
    /// when it is at most ``samples`` × ``sampleBytes``, else its first and last sample and the
    /// others evenly between.
    static func sampleOffsets(size: Int64) -> [Int64] {
        let sample = Int64(sampleBytes)
        guard size > sample * Int64(samples) else {
            return Array(stride(from: 0, to: size, by: Int(sample)))
        }
        let last = size - sample
        return (0..<samples).map { last * Int64($0) / Int64(samples - 1) }
    }

    /// The bytes read into `input` (fewer only at the file's end), or nil on an error.
    private func readFully(_ fd: Int32, at offset: Int64, count: Int) -> Int? {
        var got = 0
        while got < count {
            let n = pread(fd, input.baseAddress! + got, count - got, off_t(offset) + off_t(got))
            if n < 0 {
                if clinux_errno() == EINTR { continue }
                return nil
            }
            if n == 0 { break }
            got += n
        }
        return got
    }

    /// The deflated size of `input`'s first `count` bytes as one raw deflate stream.
    private func deflate(_ count: Int) -> Int? {
        guard count > 0 else { return 0 }
        guard deflateReset(&stream) == Z_OK else { return nil }
        stream.next_in = input.baseAddress!.assumingMemoryBound(to: Bytef.self)
        stream.avail_in = uInt(count)
        stream.next_out = output.baseAddress!.assumingMemoryBound(to: Bytef.self)
        stream.avail_out = uInt(output.count)
        guard CZip.deflate(&stream, Z_FINISH) == Z_STREAM_END else { return nil }
        return output.count - Int(stream.avail_out)
    }
}
