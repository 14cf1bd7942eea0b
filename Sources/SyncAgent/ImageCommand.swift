import ArgumentParser
import FileKit
import Foundation
import ImageCache
import ItemCache
import Transport

/// `sync-agent image`: image variants from the command line, in an item cache folder shared
/// with apps and other processes.
struct ImageCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "image",
        abstract: "Fetch an image through the cache and write a resized variant of it.",
        subcommands: [ImageGetCommand.self])
}

/// `sync-agent image get`.
struct ImageGetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Write a variant of an image (a size, mode and format) to stdout or a file.",
        discussion: """
            The original is fetched once through the item cache (HTTP freshness and \
            revalidation as for cache get) and checked as an image before it is kept: JPEG, \
            PNG, WebP or GIF by its bytes, whole, within 50 million pixels (20 million for a \
            progressive JPEG or interlaced PNG) and 64 MiB. Each variant is made once, in this \
            process and across all processes sharing the folder, and kept with its original: a \
            new version of the original gets new variants and the old ones go. A file:// URL \
            of a folder that sync-agent mirrors is read in place and keyed by its content. \
            Exit codes: 0 written; 3 for a failure of the network with nothing stored; 4 for an \
            image that is refused (nothing is written to stdout, nothing is cached); 5 for the \
            cache folder; 6 for a bad option; 8 for --offline with nothing stored; 22 or 23 \
            when the origin answered a 4xx or 5xx instead of the image.
            """)

    @Argument(help: "The image's URL: https://, http:// or file:// (an image in a mirrored folder).")
    var url: String
    @OptionGroup var folder: CacheFolderOptions

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The box: WxH, Wx (free height) or xH (free width), each side 1 to 16384; the free side rounds to nearest.",
            valueName: "WxH"))
    var size: String

    @Option(
        name: .long,
        help: ArgumentHelp(
            "fit (within the box, the default), fill (cover the box, cropped from the centre) or force (exactly the box, aspect changed).",
            valueName: "MODE"))
    var mode: String?

    @Flag(
        name: .long,
        help: "Crop a fill where libvips' attention finds the subject, not the centre (implies --mode fill).")
    var smartCrop = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "jpeg, png, webp or avif (default: the source's for JPEG, PNG and WebP; else png, which keeps alpha).",
            valueName: "FORMAT"))
    var format: String?

    @Option(name: .long, help: ArgumentHelp("1 to 100 (default: JPEG 80, WebP 80, AVIF 60).", valueName: "Q"))
    var quality: String?

    @Flag(
        name: .long,
        help: "Enlarge a source smaller than the box (by default a variant is never larger than its source).")
    var upscale = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The colour alpha is flattened onto for JPEG: white (default), black, #rrggbb, #rgb or r,g,b.",
            valueName: "COLOR"))
    var background: String?

    @Flag(name: .long, help: "Never touch the network: a stored original (even expired) or exit 8.")
    var offline = false

    @Flag(
        name: .long,
        help:
            "Print the variant's metadata as JSON instead of its bytes (which go to -o FILE when given): width, height, format, bytes, orientation, source, made, key and the original's."
    )
    var info = false

    @Option(
        name: [.customShort("o"), .long],
        help: ArgumentHelp("Write the bytes to FILE (atomically) instead of stdout.", valueName: "FILE"))
    var output: String?

    @Option(
        name: [.customShort("H"), .long],
        help: ArgumentHelp("A request header for the original (repeatable).", valueName: "'Name: value'"))
    var header: [String] = []

    /// The exit code of a refused image.
    static let refusedExit: Int32 = 4

    /// The request the options describe, or exit 6 naming the option and a good value.
    func imageRequest() throws -> ImageRequest {
        try refuseUnreadableArguments()
        guard let source = ImageSource.url(parsing: url) else {
            throw CLIFailure(
                code: 6,
                message:
                    "'\(Redaction.text(url))' is not an http, https or file URL; give one such as https://host/photo.jpg or file:///srv/mirror/photo.jpg"
            )
        }
        guard let box = ImageRequest.size(parsing: size) else {
            throw CLIFailure(
                code: 6,
                message:
                    "--size '\(size)' is not WxH, Wx or xH with sides from 1 to \(ResizeRequest.largestSide); write it as --size 720x480 or --size 720x"
            )
        }
        var request = ImageRequest(source: source, width: box.width, height: box.height)
        switch mode?.lowercased() {
        case nil: request.mode = smartCrop ? .smartFill : .fit
        case "fit", "force":
            if smartCrop {
                throw CLIFailure(code: 6, message: "--smart-crop chooses what a fill crops; use it with --mode fill")
            }
            request.mode = mode?.lowercased() == "fit" ? .fit : .force
        case "fill": request.mode = smartCrop ? .smartFill : .fill
        default:
            throw CLIFailure(
                code: 6, message: "--mode '\(mode ?? "")' is not fit, fill or force; write it as --mode fill")
        }
        if let format {
            guard let parsed = ImageFormat(rawValue: format.lowercased() == "jpg" ? "jpeg" : format.lowercased()) else {
                throw CLIFailure(
                    code: 6, message: "--format '\(format)' is not jpeg, png, webp or avif; write it as --format webp")
            }
            request.format = parsed
        }
        if let quality {
            guard let value = Int(quality), (1...100).contains(value) else {
                throw CLIFailure(
                    code: 6, message: "--quality '\(quality)' is not from 1 to 100; write it as --quality 80")
            }
            request.quality = value
        }
        if let background {
            guard let color = ImageRequest.color(parsing: background) else {
                throw CLIFailure(
                    code: 6,
                    message:
                        "--background '\(background)' is not a colour; write it as white, black, #ffcc00, #fc0 or 255,204,0"
                )
            }
            request.background = color
        }
        request.upscale = upscale
        request.policy = offline ? .offline : .useCache
        request.headers = try parseRequestHeaders(header)
        return request
    }

    func run() async throws {
        let request = try imageRequest()
        let pipeline: ImagePipeline
        let cache = try folder.cacheConfiguration(create: true)
        do {
            pipeline = try ImagePipeline(cache: cache)
        } catch {
            throw CLIFailure(image: error)
        }
        folder.warnAboutRepairs(pipeline.store.openingRepairs)
        let result: Result<ImageResponse, ImageCacheError>
        do {
            result = .success(try await pipeline.image(for: request))
        } catch {
            result = .failure(error)
        }
        try? await pipeline.close()
        try deliver(result.mapError { CLIFailure(image: $0) }.get(), request: request)
    }

    /// Writes the variant (or its JSON).
    func deliver(_ image: ImageResponse, request: ImageRequest) throws {
        if let output {
            try OutputFile.write(image.data, to: output)
        } else if !info {
            Console.standardOutput(image.data)
        }
        guard info else { return }
        func facts(_ metadata: ImageMetadata) -> [String: Any] {
            var object: [String: Any] = [
                "width": metadata.width, "height": metadata.height, "format": metadata.format,
                "bytes": metadata.bytes, "orientation": metadata.orientation,
            ]
            if let sha256 = metadata.sha256 { object["sha256"] = sha256 }
            if !metadata.custom.isEmpty { object["metadata"] = metadata.custom }
            return object
        }
        var object = facts(image.metadata)
        object["original"] = facts(image.original)
        object["source"] = image.source.description
        object["made"] = image.wasMade
        object["key"] = image.key.rawValue
        object["url"] = request.source.shown
        if let output { object["output"] = FileSystem.absolutePath(output) }
        Console.standardOutput(try cacheJSON(object))
    }
}

extension CLIFailure {
    /// An image failure's exit code: 4 for a refused image, 6 for a request that cannot be
    /// made, the cache's codes for the cache's failures (``init(cache:)``), 1 for libvips
    /// failing on an accepted image.
    init(image error: ImageCacheError) {
        if error.code == .cache, let cacheError = error.cacheError {
            self.init(cache: cacheError)
            return
        }
        let code: Int32 =
            switch error.code {
            case .refused: ImageGetCommand.refusedExit
            case .configuration: 6
            default: 1
            }
        self.init(code: code, message: error.message)
    }
}
