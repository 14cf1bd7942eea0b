internal import CVips
import Synchronization

/// libvips, started once per process from this one place, with the settings a cache of
/// untrusted images needs.
///
/// - `vips_cache_set_max(0)`: libvips' operation cache keeps decoded input alive between calls,
///   which a server (and a cache) does not want.
/// - `vips_concurrency_set(1)`: one libvips thread per pipeline; the image pipeline runs as
///   many pipelines as there are cores instead. With libvips' own threads a bad PNG IDAT CRC
///   was accepted in about a third of runs (issue 22); one thread refuses it every time.
/// - Loaders as an allow-list: every untrusted operation is blocked, then every loader
///   (`VipsForeignLoad`), then JPEG, PNG, WebP and GIF are unblocked, and HEIF (with AVIF) or
///   SVG and PDF only when ``Options`` allow them. In 8.14 `tiff`, `matrix` and `heif` count as
///   trusted, so blocking the untrusted alone would leave them open.
///
/// Blocking is process-wide: the first ``start(_:)`` decides; a later one with other options
/// fails with ``ImageCacheError/Code/configuration``.
public enum VipsRuntime {
    /// Which formats beyond JPEG, PNG, WebP and GIF may be decoded.
    public struct Options: Sendable, Equatable {
        /// HEIF and AVIF input (libheif). Default false.
        public var allowsHEIF = false
        /// SVG and PDF input (librsvg, poppler): documents that can reference other files and
        /// run large parsers. Default false.
        public var allowsVectorFormats = false

        /// The default options: JPEG, PNG, WebP and GIF only.
        public init() {}
    }

    /// The loader classes each option unblocks.
    static func unblocked(_ options: Options) -> [String] {
        var loaders = ["VipsForeignLoadJpeg", "VipsForeignLoadPng", "VipsForeignLoadWebp", "VipsForeignLoadNsgif"]
        if options.allowsHEIF { loaders.append("VipsForeignLoadHeif") }
        if options.allowsVectorFormats { loaders += ["VipsForeignLoadSvg", "VipsForeignLoadPdf"] }
        return loaders
    }

    private static let started = Mutex<Options?>(nil)

    /// Starts libvips with `options`, once; later calls with the same options do nothing.
    public static func start(_ options: Options = Options()) throws(ImageCacheError) {
        try started.withLock { (current: inout Options?) throws(ImageCacheError) in
            if let current {
                guard current == options else {
                    throw ImageCacheError(
                        code: .configuration,
                        message:
                            "libvips was started with \(current) and cannot change to \(options): its loader blocking is process-wide; give every ImagePipeline the same VipsRuntime.Options"
                    )
                }
                return
            }
            guard cvips_init("content-sync") == 0 else {
                throw VipsRuntime.failure(.configuration, "libvips failed to start")
            }
            cvips_drop_warnings()
            cvips_cache_set_max(0)
            cvips_concurrency_set(1)
            cvips_block_untrusted_set(1)
            cvips_operation_block_set("VipsForeignLoad", 1)
            for loader in unblocked(options) { cvips_operation_block_set(loader, 0) }
            current = options
        }
    }

    /// Whether the loader class `loader` (`VipsForeignLoadSvgBuffer`) may run under the options
    /// libvips was started with.
    static func allows(loader: String) -> Bool {
        guard let options = started.withLock({ $0 }) else { return false }
        return unblocked(options).contains { loader.hasPrefix($0) }
    }

    /// The libvips version, `major.minor.micro`.
    public static var version: String {
        "\(cvips_version(0)).\(cvips_version(1)).\(cvips_version(2))"
    }

    /// libvips' error text, cleared; one line.
    static func takeError() -> String {
        let text = cvips_error_buffer().map { String(cString: $0) } ?? ""
        cvips_error_clear()
        return text.split(separator: "\n").joined(separator: "; ")
    }

    /// libvips' error, cleared, as the error to throw: `code`, with `context` and libvips' text
    /// (`emptyText` when it gave none). When libvips ran out of a resource instead (glib could
    /// not make a thread at a task limit, or memory ran out), the input is not at fault: the
    /// code is `.processing` and the message says what to raise. A `.refused` would have the
    /// pipeline drop a good original as damaged, and the CLI blame the image (exit 4).
    static func failure(_ code: ImageCacheError.Code, _ context: String, emptyText: String = "") -> ImageCacheError {
        let text = takeError()
        if let shortage = shortage(in: text) {
            return ImageCacheError(code: .processing, message: "\(context): \(text); \(shortage)")
        }
        return ImageCacheError(code: code, message: "\(context): \(text.isEmpty ? emptyText : text)")
    }

    /// What to do about a resource libvips' error `text` says ran out, or nil when it names none.
    static func shortage(in text: String) -> String? {
        let lowered = text.lowercased()
        if lowered.contains("error creating thread") || lowered.contains("unable to create thread") {
            return "libvips could not start a thread: the process is at its task limit "
                + "(systemd TasksMax, a container's pids limit, ulimit -u); raise it and try again"
        }
        if lowered.contains("out of memory") {
            return "libvips ran out of memory: free some, or lower ImageLimits.maxPixels, and try again"
        }
        return nil
    }
}
