internal import CZlib

/// Decodes a body's content coding (RFC 9110 §8.4.1) as it streams in, and says whether the coded
/// stream came to its end.
///
/// Ours rather than libcurl's: libcurl takes a gzip or deflate body whose compressed stream stops
/// early as whole when the HTTP framing is complete (a `Content-Length` that counts the short
/// body, or a chunked body with its last chunk; curl/curl #2719), so a body cut off at the origin
/// was stored and served as the whole value. Here a body counts only when its stream ended: the
/// gzip trailer's CRC-32 and length checked, a zlib stream's Adler-32, a raw deflate stream's
/// final block. The codings are the two zlib decodes, and the ones the transport offers
/// (`Accept-Encoding: gzip, deflate`); any other is refused by name.
final class ContentDecoder {
    enum Coding: String {
        case gzip
        /// RFC 9110's "deflate" is a zlib stream (RFC 1950); some servers send a raw deflate
        /// stream (RFC 1951) under the name, which is read too, as browsers and libcurl do.
        case deflate
    }

    /// What the transport asks for: the codings this decoder reads.
    static let offered = "gzip, deflate"

    /// The coding `contentEncoding` names, nil for none (or only `identity`); the problem when it
    /// names one this decoder does not read, or more than one.
    static func coding(of contentEncoding: String?) -> Result<Coding?, Refusal> {
        guard let contentEncoding else { return .success(nil) }
        switch HTTPHeaderField.contentCodings(contentEncoding) {
        case []: return .success(nil)
        case ["gzip"], ["x-gzip"]: return .success(.gzip)
        case ["deflate"]: return .success(.deflate)
        default:
            return .failure(
                Refusal(
                    problem:
                        "sent a body in Content-Encoding: \(contentEncoding), which this client cannot decode (it asks for \(offered))"
                ))
        }
    }

    struct Refusal: Error {
        var problem: String
    }

    enum Outcome {
        case decoded
        /// The output closure returned false: the receiver refused the bytes.
        case stopped
        case failed(String)
    }

    let coding: Coding
    private let stream: UnsafeMutablePointer<z_stream>
    private let buffer: UnsafeMutableRawBufferPointer
    private var initialized = false
    /// The current stream reached its end (`Z_STREAM_END`) and no byte came after it.
    private var ended = false
    /// A deflate body's first byte, held until the second tells a zlib header from raw deflate.
    private var firstByte: UInt8?
    private(set) var codedBytes: Int64 = 0

    init(coding: Coding) {
        self.coding = coding
        stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
        stream.initialize(to: z_stream())
        buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)
    }

    deinit {
        if initialized { inflateEnd(stream) }
        stream.deinitialize(count: 1)
        stream.deallocate()
        buffer.deallocate()
    }

    /// Decodes `input`, handing the decoded bytes to `output` in pieces of at most 64 KiB.
    func decode(_ input: UnsafeRawBufferPointer, output: (UnsafeRawBufferPointer) -> Bool) -> Outcome {
        guard !input.isEmpty else { return .decoded }
        codedBytes += Int64(input.count)
        if !initialized {
            let windowBits: Int32
            switch coding {
            case .gzip:
                windowBits = 15 + 16
            case .deflate:
                // A zlib header: compression method 8, a window of at most 32 KiB, and the two
                // bytes a multiple of 31 (RFC 1950 §2.2).
                guard let first = firstByte ?? input.first else { return .decoded }
                let secondIndex = firstByte == nil ? 1 : 0
                guard input.count > secondIndex else {
                    firstByte = first
                    return .decoded
                }
                let second = input[secondIndex]
                let isZlib = first & 0x0F == 8 && first >> 4 <= 7 && (UInt16(first) << 8 | UInt16(second)) % 31 == 0
                windowBits = isZlib ? 15 : -15
            }
            let status = czlib_inflate_init(stream, windowBits)
            guard status == Z_OK else { return .failed("zlib could not start decoding (\(status))") }
            initialized = true
            if let held = firstByte {
                firstByte = nil
                var byte = held
                let outcome = withUnsafeBytes(of: &byte) { inflateAll($0, output: output) }
                guard case .decoded = outcome else { return outcome }
            }
        }
        return inflateAll(input, output: output)
    }

    /// Nil when the coded stream ended; otherwise why the body is not whole.
    func finish() -> String? {
        if ended { return nil }
        return "sent a body in Content-Encoding: \(coding.rawValue) whose compressed stream stops before its end "
            + "(\(codedBytes) bytes came): the body was cut short; it is not kept"
    }

    private func inflateAll(_ input: UnsafeRawBufferPointer, output: (UnsafeRawBufferPointer) -> Bool) -> Outcome {
        guard let base = input.baseAddress else { return .decoded }
        stream.pointee.next_in = UnsafeMutablePointer(mutating: base.assumingMemoryBound(to: Bytef.self))
        stream.pointee.avail_in = uInt(input.count)
        while true {
            if ended {
                // Bytes after the end: another gzip member (RFC 1952 §2.2), or for a zlib or
                // raw deflate stream, something that is not the body.
                guard coding == .gzip else {
                    return .failed(
                        "sent a body in Content-Encoding: deflate with \(stream.pointee.avail_in) bytes after the end of its stream"
                    )
                }
                inflateReset(stream)
                ended = false
            }
            stream.pointee.next_out = buffer.baseAddress!.assumingMemoryBound(to: Bytef.self)
            stream.pointee.avail_out = uInt(buffer.count)
            let status = inflate(stream, Z_NO_FLUSH)
            let produced = buffer.count - Int(stream.pointee.avail_out)
            if produced > 0, !output(UnsafeRawBufferPointer(rebasing: buffer[0..<produced])) { return .stopped }
            switch status {
            case Z_STREAM_END:
                ended = true
                if stream.pointee.avail_in == 0 { return .decoded }
            case Z_OK, Z_BUF_ERROR:
                // All input taken and room left over: nothing is pending until more comes.
                if stream.pointee.avail_in == 0 && stream.pointee.avail_out != 0 { return .decoded }
                if status == Z_BUF_ERROR && produced == 0 { return .decoded }
            default:
                let reason = stream.pointee.msg.map { String(cString: $0) } ?? "zlib error \(status)"
                return .failed(
                    "sent a body in Content-Encoding: \(coding.rawValue) that does not decode (\(reason), after \(codedBytes) coded bytes)"
                )
            }
        }
    }
}
