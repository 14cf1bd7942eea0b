import FileKit
import Foundation
import ImageCatalog
import ItemCache
import Metrics
import Synchronization

import struct Transport.TransportError

/// Fetches originals through the item cache's own fetchers (`http`, `https`, `file`) and
/// checks each new body before it is stored: an image this cache accepts, within the limits.
/// A refused body is never stored (`ItemCacheError/Code/rejected`); an accepted one is stored
/// with its `ImageMetadata` (size, format, orientation, SHA-256), read later without decoding.
struct OriginalFetcher: ItemFetching {
    var inner: [String: any ItemFetching]
    var limits: ImageLimits
    var pool: BlockingIOPool

    func fetch(_ request: FetchRequest) async throws -> FetchResponse {
        guard let url = request.url, let scheme = url.scheme?.lowercased(), let fetcher = inner[scheme] else {
            throw ItemCacheError(
                code: .fetch,
                message: "\(request.key.rawValue) has no http, https or file URL to fetch the image from",
                key: request.key)
        }
        let shown = ImageSource.url(url).shown
        var response: FetchResponse
        do {
            response = try await fetcher.fetch(request)
        } catch let error as TransportError where error.code == .tooLarge {
            throw ItemCacheError(
                code: .rejected,
                message:
                    "\(shown) is over the \(limits.maxBytes)-byte limit (ImageLimits.maxBytes); its download was stopped there",
                key: request.key)
        }
        // Only a body meant as the image is checked: an error page (a 404) is the origin's
        // answer, kept and reported as such.
        guard (200...299).contains(response.status) else { return response }
        let data: Data
        switch response.body {
        case .notModified: return response
        case .fetched(let bytes): data = bytes
        case .file(let file):
            // A large original stays the file the cache keeps; its facts are read from it (an
            // image is decoded whole anyway, and ImageLimits.maxBytes bounds it).
            do {
                data = try await pool.run { () throws(ItemCacheError) -> Data in try file.data() }
            } catch {
                throw ItemCacheError(code: .fetch, message: error.message, key: request.key, underlying: error)
            }
        }
        let limits = self.limits
        let facts = await pool.run { () -> Result<ImageMetadata, ImageCacheError> in
            Result { () throws(ImageCacheError) in try ImageMetadata.ofOriginal(data, source: shown, limits: limits) }
        }
        switch facts {
        case .success(let metadata):
            response.metadata = metadata.stored
            return response
        case .failure(let error):
            throw ItemCacheError(code: .rejected, message: error.message, key: request.key)
        }
    }
}

extension ImageMetadata {
    /// The facts of an original's bytes: its header (held to `limits`) and its SHA-256.
    static func ofOriginal(_ data: Data, source: String, limits: ImageLimits, custom: [String: String] = [:])
        throws(ImageCacheError) -> ImageMetadata
    {
        let header = try ImageProbe.header(of: data, source: source, limits: limits)
        return ImageMetadata(header: header, bytes: Int64(data.count), sha256: FileDigest.sha256(data), custom: custom)
    }

    /// The facts of an original whose header is `header`.
    init(header: ImageHeader, bytes: Int64, sha256: String, custom: [String: String] = [:]) {
        self.init(
            width: header.width, height: header.height, format: header.format, orientation: header.orientation,
            bytes: bytes, sha256: sha256, custom: custom)
    }
}

/// What a variant is made from: the original's bytes and the resize, held while a load of the
/// variant's key may need them.
/// Where a variant's original is: in memory, or stored (opened by the one process that makes
/// the variant, and read from its file).
enum OriginalBytes: Sendable {
    case data(Data)
    case stored(any ImageStorage, CacheKey)
    /// A file of a mirrored folder, open (kept open while the job is held or used).
    case file(OpenFile)
}

struct VariantJob: Sendable {
    var original: OriginalBytes
    /// The original's SHA-256, recorded with the variant (`ImageMetadata/originalDigestName`).
    var digest: String
    var source: String
    var request: ResizeRequest
    var processing: any ImageProcessing
    var limits: ImageLimits
    var pool: BlockingIOPool
    var counters: ImageCounters
}

/// What a pipeline counted since it started (``ImagePipeline/counts``), and its swift-metrics
/// instruments (``ImagePipeline/Configuration/metricsPrefix``).
final class ImageCounters: Sendable {
    let made = Atomic<Int>(0)
    let hits = Atomic<Int>(0)
    let refusals = Atomic<Int>(0)
    let metrics: ImageMetrics

    init(metrics: ImageMetrics) {
        self.metrics = metrics
    }

    /// A variant made: counted, with the time its processing took.
    func countMade(processing: Duration) {
        made.add(1, ordering: .relaxed)
        metrics.made.increment()
        metrics.processing.recordNanoseconds(processing.nanoseconds)
    }

    /// A stored variant answered, from `tier`.
    func countHit(_ tier: ItemSource) {
        hits.add(1, ordering: .relaxed)
        (tier == .memory ? metrics.memoryHits : metrics.diskHits).increment()
    }

    /// An original or a request refused (too large, not an image, a format that is off).
    func countRefusal() {
        refusals.add(1, ordering: .relaxed)
        metrics.refusals.increment()
    }
}

/// The pipeline's swift-metrics instruments. Names, with the configured prefix (`image_cache`
/// by default): `<prefix>_variants_made` and `<prefix>_processing_duration` (a timer, per
/// variant made), `<prefix>_variant_hits` by `tier` (`memory`, `disk`: stored variants that
/// answered), `<prefix>_refusals` (originals or requests refused). The item cache's own
/// instruments count the originals' and variants' loads beneath (`CacheConfiguration`'s
/// `metricsPrefix`).
struct ImageMetrics: Sendable {
    let made, memoryHits, diskHits, refusals: Counter
    let processing: Metrics.Timer

    init(prefix: String, factory: (any MetricsFactory)?) {
        let factory = factory ?? MetricsSystem.factory
        made = Counter(label: prefix + "_variants_made", factory: factory)
        memoryHits = Counter(label: prefix + "_variant_hits", dimensions: [("tier", "memory")], factory: factory)
        diskHits = Counter(label: prefix + "_variant_hits", dimensions: [("tier", "disk")], factory: factory)
        refusals = Counter(label: prefix + "_refusals", factory: factory)
        processing = Metrics.Timer(label: prefix + "_processing_duration", factory: factory)
    }
}

/// The jobs of the variants being loaded in this process, by variant key. Several loads of one
/// key each add theirs; the fetch (one, coalesced by the loader) uses any.
final class VariantJobs: Sendable {
    private let jobs = Mutex<[String: (job: VariantJob, holders: Int)]>([:])

    /// Holds `job` for `key` until the returned release is called.
    func hold(_ job: VariantJob, for key: String) {
        jobs.withLock { jobs in
            if let held = jobs[key] {
                jobs[key] = (held.job, held.holders + 1)
            } else {
                jobs[key] = (job, 1)
            }
        }
    }

    func release(_ key: String) {
        jobs.withLock { jobs in
            guard let held = jobs[key] else { return }
            jobs[key] = held.holders > 1 ? (held.job, held.holders - 1) : nil
        }
    }

    func job(for key: String) -> VariantJob? { jobs.withLock { $0[key]?.job } }

    /// How many keys are held (tests: none after the loads end).
    var count: Int { jobs.withLock { $0.count } }
}

/// Makes variants: the item cache's fetcher for the variant context. The loader runs it once
/// per key across every process sharing the folder; it resizes on the processing pool.
struct VariantMaker: ItemFetching {
    let jobs: VariantJobs

    func fetch(_ request: FetchRequest) async throws -> FetchResponse {
        guard let job = jobs.job(for: request.key.rawValue) else {
            throw ItemCacheError(
                code: .fetch,
                message:
                    "\(request.key.rawValue) is an image variant, made only through ImagePipeline.image(for:); load it there",
                key: request.key)
        }
        let original: OriginalBytes
        if case .stored(let store, let key) = job.original {
            // Opened as a file of its own (a copy of the value's descriptor): readable even if
            // the value is evicted meanwhile.
            let opened = try await store.withValue(for: key) { value throws(ImageCacheError) -> OriginalBytes in
                switch value.content {
                case .file(let descriptor): .file(try OpenFile(adopting: dup(descriptor), shownAs: key.rawValue))
                case .bytes(let data): .data(data)
                }
            }
            guard let opened else {
                throw ItemCacheError(
                    code: .notCached, message: "the original \(key.rawValue) is no longer stored", key: key)
            }
            original = opened
        } else {
            original = job.original
        }
        let input: ImageInput
        switch original {
        case .data(let data): input = .data(data)
        case .file(let file): input = .descriptor(file.descriptor)
        case .stored: preconditionFailure("opened above")
        }
        let started = ContinuousClock.now
        let made = await job.pool.run { () -> Result<ProcessedImage, ImageCacheError> in
            // The file (in `original`) stays open while it is read.
            withExtendedLifetime(original) {
                Result { () throws(ImageCacheError) in
                    try job.processing.process(input, source: job.source, request: job.request, limits: job.limits)
                }
            }
        }
        switch made {
        case .success(let image):
            job.counters.countMade(processing: ContinuousClock.now - started)
            var response = FetchResponse(body: .fetched(image.data), headers: ["content-type": image.format.mimeType])
            response.metadata =
                ImageMetadata(
                    width: image.width, height: image.height, format: image.format.rawValue,
                    bytes: Int64(image.data.count)
                ).stored
            response.metadata[ImageMetadata.originalDigestName] = job.digest
            response.metadata[ImageMetadata.variantName] = job.request.identifier
            if case .file = job.original {
                response.metadata[ImageMetadata.originalFileName] = URL(fileURLWithPath: job.source).absoluteString
            }
            return response
        case .failure(let error) where error.code == .refused:
            throw ItemCacheError(code: .rejected, message: error.message, key: request.key)
        case .failure(let error):
            throw ItemCacheError(code: .fetch, message: error.message, key: request.key, underlying: error)
        }
    }
}
