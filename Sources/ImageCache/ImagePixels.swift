internal import CVips
import Foundation
import ItemCache
import Synchronization

/// A variant decoded to 8-bit RGBA, for an app that draws with its own toolkit.
public struct ImagePixels: Sendable, Equatable {
    /// Width and height in pixels.
    public var width: Int, height: Int
    /// Bytes from one row to the next: `width × 4` (rows are not padded).
    public var stride: Int
    /// Red, green, blue and alpha (not premultiplied), 8 bits each, row by row from the top.
    public var bytes: Data
}

extension ImageProcessor {
    /// The encoded image in `data` (named `source` in messages) decoded to RGBA8 in sRGB:
    /// an opaque image gets an alpha of 255, grey becomes RGB.
    public static func rgba(_ data: Data, source: String) throws(ImageCacheError) -> ImagePixels {
        try VipsRuntime.start()
        var pixels: UnsafeMutableRawPointer?
        var size = 0
        var width: Int32 = 0
        var height: Int32 = 0
        let status = data.withUnsafeBytes { raw in
            cvips_rgba8_buffer(raw.baseAddress, raw.count, &pixels, &size, &width, &height)
        }
        guard status == 0, let pixels else {
            throw VipsRuntime.failure(.processing, "decoding \(source)")
        }
        defer { cvips_free(pixels) }
        guard size == Int(width) * Int(height) * 4 else {
            throw ImageCacheError(
                code: .processing, message: "decoding \(source) gave \(size) bytes for \(width)×\(height) RGBA")
        }
        return ImagePixels(
            width: Int(width), height: Int(height), stride: Int(width) * 4, bytes: Data(bytes: pixels, count: size))
    }
}

/// Decoded variants in memory, least recently used first out, costed by their bytes.
final class DecodedTier: Sendable {
    private struct State {
        var entries: [String: (pixels: ImagePixels, tick: UInt64)] = [:]
        var bytes = 0
        var tick: UInt64 = 0
    }
    private let state = Mutex(State())
    let limit: Int

    init(limit: Int) { self.limit = max(0, limit) }

    func value(for key: String) -> ImagePixels? {
        state.withLock { state in
            guard let entry = state.entries[key] else { return nil }
            state.tick += 1
            state.entries[key] = (entry.pixels, state.tick)
            return entry.pixels
        }
    }

    func insert(_ pixels: ImagePixels, for key: String) {
        let cost = pixels.bytes.count
        guard cost <= limit else { return }
        state.withLock { state in
            if let old = state.entries.removeValue(forKey: key) { state.bytes -= old.pixels.bytes.count }
            while state.bytes + cost > limit, let oldest = state.entries.min(by: { $0.value.tick < $1.value.tick }) {
                state.entries.removeValue(forKey: oldest.key)
                state.bytes -= oldest.value.pixels.bytes.count
            }
            state.tick += 1
            state.entries[key] = (pixels, state.tick)
            state.bytes += cost
        }
    }

    /// The bytes held.
    var bytes: Int { state.withLock { $0.bytes } }
}

extension ImagePipeline {
    /// The variant `request` asks for, decoded to RGBA8 (made and stored first if it is not);
    /// decoded variants stay in memory up to ``Configuration/decodedMemoryLimit`` bytes.
    public func pixels(for request: ImageRequest) async throws(ImageCacheError) -> ImagePixels {
        let image = try await image(for: request)
        if let decoded = decoded.value(for: image.key.rawValue) { return decoded }
        let data = image.data
        let shown = request.source.shown
        let pixels = try await configuration.processingPool.run { () throws(ImageCacheError) -> ImagePixels in
            try ImageProcessor.rgba(data, source: shown)
        }
        decoded.insert(pixels, for: image.key.rawValue)
        return pixels
    }

    /// The state of the variant `request` asks for, ISCache's way: found when stored,
    /// inProgress while its original downloads or it is being made, notFound otherwise.
    /// Never touches the network.
    public func state(for request: ImageRequest) async -> ItemState {
        guard let originalKey = try? originalKey(of: request.source, headers: request.headers, account: request.account)
        else { return .notFound }
        if let key = try? await knownVariantKey(for: request) {
            let state = await loader.state(for: key)
            // Not made yet, but its original is downloading again (a new version).
            if state == .notFound, case .inProgress(let progress) = await loader.state(for: originalKey) {
                return .inProgress(progress)
            }
            return state
        }
        if case .inProgress(let progress) = await loader.state(for: originalKey) { return .inProgress(progress) }
        return .notFound
    }

    /// The states of the variant `request` asks for as they change (the first is the current
    /// one): the original's download while its bytes are not known, then the variant's.
    public func states(for request: ImageRequest) -> AsyncStream<ItemState> {
        let (stream, continuation) = AsyncStream<ItemState>.makeStream(bufferingPolicy: .bufferingNewest(16))
        let task = Task { [self] in
            var key = try? await knownVariantKey(for: request)
            if key == nil,
                let originalKey = try? originalKey(
                    of: request.source, headers: request.headers, account: request.account)
            {
                continuation.yield(await state(for: request))
                for await state in await loader.states(for: originalKey) {
                    if case .inProgress = state { continuation.yield(state) }
                    if state == .found, let known = try? await knownVariantKey(for: request) {
                        key = known
                        break
                    }
                }
            }
            guard let key, !Task.isCancelled else { return continuation.finish() }
            for await state in await loader.states(for: key) { continuation.yield(state) }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

}
