import ArgumentParser
import FileKit
import Foundation
import ImageCache
import ItemCache
import SyncAgent
import Transport

// How `sync-agent image get` makes a variant (ImageHelper, in SyncAgent, execs this binary for it).
extension ImageGetCommand {
    /// The request the options describe, or exit 6 naming the option and a good value.
    func imageRequest() throws -> ImageRequest {
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
        request.account = try checkedAccount(account)
        return request
    }

    /// Makes the variant and writes it: `image get`'s work, in this process.
    func make() async throws {
        let request = try imageRequest()
        let pipeline: ImagePipeline
        let cache = try folder.cacheConfiguration(create: true)
        do {
            pipeline = try ImagePipeline(cache: cache)
        } catch {
            throw CLIFailure(image: error)
        }
        if let store = pipeline.store { folder.warnAboutRepairs(store.openingRepairs) }
        defer { if let store = pipeline.store { folder.warnAboutDamageFoundWhileRunning(store) } }
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
        // As `cache get` says it of a value: one line when the original stood in stale.
        if image.originalSource == .stale {
            Console.standardError(
                "warning: \(request.source.shown): made from a stale original (its origin could not be asked)\n")
        }
        // As `cache get` says it of a value too large to keep.
        if let storeError = image.originalStoreError {
            Console.warning(
                "\(request.source.shown): the original was not kept in the cache (\(storeError.message)); its variant was not kept either"
            )
        }
        if let output {
            try OutputFile.write(image.data, to: output)
        } else if !info {
            try Console.output(image.data)
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
        if let originalSource = image.originalSource { object["originalSource"] = originalSource.description }
        object["made"] = image.wasMade
        object["key"] = Redaction.text(image.key.rawValue)
        object["url"] = request.source.shown
        if let output { object["output"] = FileSystem.absolutePath(output) }
        try Console.output(try cacheJSON(object))
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
