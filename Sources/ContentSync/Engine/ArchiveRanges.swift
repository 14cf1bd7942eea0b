import Archive
import FileKit
import Foundation
import Logging
import StorageFormat
import Synchronization
import Transport

#if canImport(Glibc)
    import Glibc
#endif

/// The storage's archive of the version a replay reaches, from which many new files can be
/// taken as a few byte ranges instead of a request each (``ArchiveRangeFetcher``).
struct PublishedArchive: Sendable, Equatable {
    /// The archive's URL (`urlAtZipArchiveOfCacheContent`).
    var url: URL
    /// Its size, from the integrity block: every range answer must be of an archive this long.
    var size: Int64
    /// Entries the version has at least (files and folders): its directory holds a record of
    /// at least 62 bytes for each, which tells before any request whether it is too large.
    var minimumEntries = 0

    /// The archive of `status`'s version, when a replay to `version` may use it: the integrity
    /// block gives its size (and every download its hash), and it is the version the plan reaches.
    init?(status: CacheStatus, reaching version: CacheVersion) {
        guard version == status.actualVersion, let archive = status.integrity?.archive, archive.size > 0 else {
            return nil
        }
        self.url = status.archiveURL
        self.size = archive.size
    }
}

/// How the entries to fetch are cut into byte ranges of the archive: in archive order, an entry
/// joins the range before it when the bytes between them are at most `maxGap` (fetched and
/// thrown away) and the range is still under `target` bytes. Pure, so table-tested.
struct ArchiveRangePlan: Equatable {
    struct Piece: Equatable {
        /// The bytes `start..<end` of the archive.
        var start: UInt64
        var end: UInt64
        /// The entries it holds: indexes into the directory's entries, in order.
        var entries: [Int]
        var length: UInt64 { end - start }
    }

    var pieces: [Piece]

    /// A plan of these pieces, as given.
    init(pieces: [Piece]) {
        self.pieces = pieces
    }

    /// The bytes all the ranges fetch.
    var bytes: UInt64 { pieces.reduce(0) { $0 + $1.length } }

    /// `wanted`: indexes into `entries` (sorted by offset, as ``ArchiveDirectory/entries`` is),
    /// ascending.
    init(wanted: [Int], entries: [ArchiveDirectory.Entry], maxGap: UInt64, target: UInt64) {
        var pieces: [Piece] = []
        for index in wanted {
            let entry = entries[index]
            if var last = pieces.last, entry.start >= last.end, entry.start - last.end <= maxGap,
                last.length < target
            {
                last.end = entry.end
                last.entries.append(index)
                pieces[pieces.count - 1] = last
            } else {
                pieces.append(Piece(start: entry.start, end: entry.end, entries: [index]))
            }
        }
        self.pieces = pieces
    }

    /// The pieces in the order they are fetched: those holding the most entries first, ties in
    /// archive order. A range of many small files costs far more to place (a file made, hashed
    /// and named per entry) than one of a few large files of the same bytes; fetched last, as
    /// archive order puts them when small files follow large ones, their placing ran alone
    /// after the last byte came (S2: 29–41 ms; fetched first, 1–13 ms, though a stage already
    /// busy on every core gained no wall time from it).
    var launchOrder: [Piece] {
        pieces.enumerated().sorted { ($0.element.entries.count, $1.offset) > ($1.element.entries.count, $0.offset) }
            .map(\.element)
    }

    /// The size a range aims at: the bytes split in about four ranges per connection, so that
    /// inflating the first ones overlaps fetching the others, between 256 KiB and 2 MiB. A range
    /// is held in memory until inflated (at most ``ArchiveRangeFetcher/queued`` at once, each
    /// under 2 MiB + a gap + one entry of at most ``ArchiveRangeFetcher/maxEntryBytes``), and an
    /// update killed meanwhile loses them.
    static func target(totalBytes: UInt64, connections: Int) -> UInt64 {
        let share = totalBytes / UInt64(max(1, connections) * 4)
        return min(max(share, 256 << 10), 2 << 20)
    }
}

/// Fetches many new files of a replay as byte ranges of the storage's archive of the target
/// version: one request for its end (and directory), then a few large ranges, each inflated by
/// libzip as soon as it is in and each entry checked against the change list's SHA-256 and size
/// before it is given its name in `next/`, as a download is. It only ever saves requests: any
/// file it cannot deliver so (an archive not plainly laid out, a server that ignores ranges, an
/// archive republished meanwhile, an entry whose bytes differ) is left to the per-file downloads.
struct ArchiveRangeFetcher: Sendable {
    let transport: any Transport
    let archive: PublishedArchive
    let staging: StagingArea
    let fingerprints: FingerprintCache
    /// Connections the transport may use (``SyncConfiguration/maxConcurrentDownloads``).
    let connections: Int
    /// Ranges handed to the transport at once (``Stager/downloadsQueued(_:)``): twice the
    /// connections for the manager's own transport, which queues the rest behind its cap.
    let queued: Int
    let logger: Logger
    /// Where each range, once in memory, waits before it writes into `next/` (nil: it does not
    /// wait); a range the gate turns away places nothing, and no range starts after it.
    var gate: StartGate?

    /// Fewer new files than this are fetched one by one: a range of the archive costs a round
    /// trip for its directory first.
    static let minimumFiles = 64
    /// The largest directory fetched: a mirror of a million files changing a few thousand
    /// fetches them one by one.
    static let maxDirectoryBytes: UInt64 = 16 << 20
    /// What the archive may add to the new files' bytes, as a divisor (1/100: 1 %): its
    /// directory must be no larger, and the gaps between entries are fetched only while the
    /// directory, the ranges and the gaps stay within it. Past it the files are downloaded one by
    /// one, which fetches exactly their bytes (issue 4's S3 goal: bytes downloaded = net new
    /// bytes). A jump over many versions of small files (S3: a directory 3.4 % of the new bytes)
    /// therefore downloads file by file, and a version adding 100 MiB (S2: 0.5 %) takes ranges.
    static let overheadDivisor: UInt64 = 100
    /// Bytes between two wanted entries fetched rather than split into two ranges: about what
    /// one more request costs in bandwidth over 8 connections with a 10 ms round trip at
    /// 100 Mbit/s.
    static let maxGap: UInt64 = 16 << 10
    /// Larger entries are downloaded as files: a request is nothing beside their bytes, and a
    /// range holds its bytes in memory until inflated.
    static let maxEntryBytes: UInt64 = 2 << 20
    /// The smallest directory record of a content entry: 46 bytes and `RXCacheContent/x`.
    static let minimumRecordBytes: UInt64 = 46 + 16

    struct Outcome: Sendable {
        /// The files now in `next/`, each with the bytes of its span of the archive.
        var fetched: [(path: SafeRelativePath, bytes: Int64)] = []
        /// Bytes received over the network in all (the directory and gaps included).
        var bytes: Int64 = 0
        /// Ranges fetched.
        var ranges = 0
    }

    /// Takes what it can of `paths` (each with its expected fingerprint) from the archive into
    /// `next/`; the caller downloads the others. Throws only when the update is cancelled.
    func fetch(
        _ paths: [SafeRelativePath], expected: [SafeRelativePath: FileFingerprint],
        progress: @escaping @Sendable (SafeRelativePath, Int64) -> Void
    ) async throws(SyncError) -> Outcome {
        var outcome = Outcome()
        guard paths.count >= Self.minimumFiles else { return outcome }
        let started = ContinuousClock.now
        var wantedBytes: UInt64 = 0
        for path in paths {
            // Sizes a change list may declare past any real file make the sum overflow: no ranges.
            guard let fingerprint = expected[path], fingerprint.size >= 0 else { return outcome }
            let (sum, overflow) = wantedBytes.addingReportingOverflow(UInt64(fingerprint.size))
            guard !overflow, sum < UInt64(Int64.max) / 4 else { return outcome }
            wantedBytes = sum
        }
        // 1. The end records, then the directory if the tail does not hold it all; not even
        // asked for when the version's entries alone make the directory too large.
        let directoryLimit = min(Self.maxDirectoryBytes, wantedBytes / Self.overheadDivisor)
        guard UInt64(max(0, archive.minimumEntries)) * Self.minimumRecordBytes <= directoryLimit else {
            logger.debug(
                "the archive's directory lists at least \(archive.minimumEntries) entries, large beside the new files; downloading them one by one"
            )
            return outcome
        }
        let size = UInt64(archive.size)
        let tailLength = min(size, UInt64(ArchiveDirectory.tailLength))
        guard let (tail, etag) = try await fetchBytes(size - tailLength..<size, etag: nil, into: &outcome) else {
            return outcome
        }
        guard let location = ArchiveDirectory.locate(tail: tail, archiveSize: size) else {
            logger.debug("the archive's end is not plainly laid out; downloading the files one by one")
            return outcome
        }
        guard UInt64(location.bytes.count) <= directoryLimit else {
            logger.debug(
                "the archive's directory (\(location.bytes.count) bytes) is large beside the new files; downloading them one by one"
            )
            return outcome
        }
        let tailStart = size - tailLength
        guard location.bytes.upperBound >= tailStart else { return outcome }
        var records: [UInt8]
        if location.bytes.lowerBound >= tailStart {
            records = Array(
                tail[Int(location.bytes.lowerBound - tailStart)..<Int(location.bytes.upperBound - tailStart)])
        } else {
            guard
                let (head, _) = try await fetchBytes(location.bytes.lowerBound..<tailStart, etag: etag, into: &outcome)
            else { return outcome }
            records = head
            records += tail[0..<Int(location.bytes.upperBound - tailStart)]
        }
        guard let directory = ArchiveDirectory(records: records, location: location) else {
            logger.debug("the archive's directory is damaged; downloading the files one by one")
            return outcome
        }
        records = []
        let directoryRead = ContinuousClock.now
        // 2. The entries of the wanted files, each no longer than its file could deflate to.
        var byName: [BytesKey: Int] = [:]
        byName.reserveCapacity(directory.entries.count)
        for (index, entry) in directory.entries.enumerated() where byName[BytesKey(entry.name)] == nil {
            byName[BytesKey(entry.name)] = index
        }
        var pathOf: [Int: SafeRelativePath] = [:]
        for path in paths {
            let name = Array((StorageLayout.contentFolder + path.string).utf8)
            guard let index = byName[BytesKey(name)], let fingerprint = expected[path] else { continue }
            let entry = directory.entries[index]
            let size = UInt64(fingerprint.size)
            // Its local header (30 bytes, the name, an extra field), the data deflate could not
            // shrink (a little over the size) and a data descriptor: more is not a file's entry.
            let span = entry.end - entry.start
            guard span <= Self.maxEntryBytes, span <= size + size / 64 + UInt64(name.count) + 1_054 else { continue }
            pathOf[index] = path
        }
        guard pathOf.count >= Self.minimumFiles else {
            logger.debug(
                "the archive holds \(pathOf.count) of the \(paths.count) new files; downloading them one by one")
            return outcome
        }
        // Gaps are fetched to save requests, but only while everything read of the archive (its
        // end and directory so far, then the ranges) stays within the new files' bytes plus
        // their share (``overheadDivisor``): past it, only the entries themselves are fetched.
        let wanted = pathOf.keys.sorted()
        let target = ArchiveRangePlan.target(totalBytes: wantedBytes, connections: connections)
        let limit = wantedBytes + wantedBytes / Self.overheadDivisor
        var plan = ArchiveRangePlan(wanted: wanted, entries: directory.entries, maxGap: Self.maxGap, target: target)
        if UInt64(outcome.bytes) + plan.bytes > limit {
            plan = ArchiveRangePlan(wanted: wanted, entries: directory.entries, maxGap: 0, target: target)
        }
        // 3. The ranges, a few at a time; each inflated as soon as it is in.
        let fetched = try await fetchPieces(
            plan.launchOrder, directory: directory, pathOf: pathOf, expected: expected, etag: etag, progress: progress)
        outcome.fetched = fetched.files
        outcome.bytes += fetched.bytes
        outcome.ranges = fetched.ranges
        func seconds(_ instant: ContinuousClock.Instant?) -> String {
            guard let instant else { return "-" }
            let duration = instant - started
            return String(format: "%.3f s", duration.seconds)
        }
        logger.debug(
            "took \(outcome.fetched.count) of \(paths.count) new files from \(outcome.ranges) ranges of the archive (\(outcome.bytes) bytes): directory read at \(seconds(directoryRead)), last range in at \(seconds(fetched.lastIn)), all inflated at \(seconds(ContinuousClock.now))"
        )
        return outcome
    }

    /// What one range gave: the files it placed, the bytes received and when its last byte came
    /// (nil: the range was refused).
    private struct RangeResult: Sendable {
        var placed: [(path: SafeRelativePath, bytes: Int64)] = []
        var received: (bytes: Int64, at: ContinuousClock.Instant)?
    }

    /// Fetches and inflates `pieces`, each in one task that holds its range's bytes in memory
    /// from the download to the last entry, `queued` at once: with the manager's own transport
    /// twice the connections, the extra downloads queued behind its cap, so that a range is
    /// inflated while the next one arrives.
    private func fetchPieces(
        _ pieces: [ArchiveRangePlan.Piece], directory: ArchiveDirectory, pathOf: [Int: SafeRelativePath],
        expected: [SafeRelativePath: FileFingerprint], etag: String?,
        progress: @escaping @Sendable (SafeRelativePath, Int64) -> Void
    ) async throws(SyncError) -> (
        files: [(path: SafeRelativePath, bytes: Int64)], bytes: Int64, ranges: Int, lastIn: ContinuousClock.Instant?
    ) {
        var files: [(path: SafeRelativePath, bytes: Int64)] = []
        var bytes: Int64 = 0
        var ranges = 0
        var lastIn: ContinuousClock.Instant?
        let buffers = RangeBufferPool(size: Int(pieces.map(\.length).max() ?? 1))
        do {
            try await withThrowingTaskGroup(of: RangeResult.self) { group in
                var next = 0
                var stopped = false
                func launch(_ group: inout ThrowingTaskGroup<RangeResult, any Error>) {
                    guard !stopped, next < pieces.count else { return }
                    let piece = pieces[next]
                    next += 1
                    group.addTask {
                        // Stored entries: placed as the bytes come (once `next/` is ready).
                        if let stream = RangeStream(
                            piece: piece, archiveSize: self.archive.size, directory: directory, pathOf: pathOf,
                            expected: expected, next: self.staging.next, gate: self.gate, buffers: buffers,
                            fingerprints: self.fingerprints, progress: progress)
                        {
                            let received = try await self.download(piece, into: stream, etag: etag)
                            let arrived = ContinuousClock.now
                            await stream.drain()
                            // Files placed before an answer broke off are verified: they stay.
                            return RangeResult(placed: stream.placed, received: received.map { ($0, arrived) })
                        }
                        let bytes = RangeBytes(count: Int(piece.length), from: buffers)
                        guard let received = try await self.download(piece, into: bytes, etag: etag) else {
                            return RangeResult()
                        }
                        let arrived = ContinuousClock.now
                        if let gate = self.gate, !(await gate.wait()) { return RangeResult() }
                        let placed = try await self.extract(
                            piece, from: bytes, directory: directory, pathOf: pathOf, expected: expected,
                            progress: progress)
                        return RangeResult(placed: placed, received: (received, arrived))
                    }
                }
                for _ in 0..<max(1, queued) { launch(&group) }
                while let result = try await group.next() {
                    files += result.placed
                    guard let received = result.received else {
                        // One range refused (a republished archive, a server without ranges):
                        // the others would be too, and every file not yet in is fetched alone.
                        stopped = true
                        continue
                    }
                    bytes += received.bytes
                    ranges += 1
                    lastIn = max(lastIn ?? received.at, received.at)
                    launch(&group)
                }
            }
        } catch {
            throw SyncError.wrap(error)
        }
        return (files, bytes, ranges, lastIn)
    }

    /// Fetches `piece` into `bytes` (its body streamed to `/dev/null`, each chunk handed over as
    /// it comes: no file is written and read back); the bytes received, or nil (logged) when the
    /// answer is not exactly those bytes of an archive of the published size.
    private func download(_ piece: ArchiveRangePlan.Piece, into bytes: some RangeReceiver, etag: String?) async throws
        -> Int64?
    {
        let sink = open("/dev/null", O_WRONLY | O_CLOEXEC)
        guard sink >= 0 else {
            logger.debug("cannot open /dev/null for a range of the archive; downloading its files one by one")
            return nil
        }
        defer { close(sink) }
        do {
            var options = DownloadOptions(maxBytes: Int64(piece.length))
            let total = Mutex<String?>(nil)
            options.onResponseStart = { status, headers in
                total.withLock { $0 = headers["content-range"] }
                // A retried attempt's body starts again.
                bytes.start(status: status, contentRange: headers["content-range"])
            }
            options.onBodyChunk = { chunk in bytes.append(chunk) }
            let response = try await transport.download(
                rangeRequest(piece.start..<piece.end, etag: etag), into: sink, options: options)
            guard response.statusCode == 206, response.fileSize == Int64(piece.length), bytes.isComplete,
                ResponseExpectation.completeLength(
                    ofContentRange: total.withLock { $0 } ?? response.headers["content-range"]) == archive.size
            else {
                logger.debug(
                    "the storage answered a range of the archive with HTTP \(response.statusCode) and other bytes; downloading the files one by one"
                )
                return nil
            }
            return response.bytesReceived
        } catch {
            if Task.isCancelled { throw CancellationError() }
            logger.debug("fetching a range of the archive failed (\(error)); downloading its files one by one")
            return nil
        }
    }

    /// Inflates `piece`'s entries into `next/`, each verified against its file's fingerprint
    /// before it is given its name; returns those placed.
    private func extract(
        _ piece: ArchiveRangePlan.Piece, from bytes: RangeBytes, directory: ArchiveDirectory,
        pathOf: [Int: SafeRelativePath], expected: [SafeRelativePath: FileFingerprint],
        progress: @escaping @Sendable (SafeRelativePath, Int64) -> Void
    ) async throws(SyncError) -> [(path: SafeRelativePath, bytes: Int64)] {
        let (staging, fingerprints, logger) = (self.staging, self.fingerprints, self.logger)
        return try await BlockingWork.run { () -> [(path: SafeRelativePath, bytes: Int64)] in
            // Stored entries are taken from the range as they lie; libzip opens it at the first
            // deflated one, and an entry it cannot read is downloaded alone.
            let reader = ArchiveRangeReader(
                directory: directory, entries: piece.entries, rangeBytes: bytes.contents, start: piece.start,
                shownAs: "the storage's archive")
            var placed: [(path: SafeRelativePath, bytes: Int64)] = []
            // Each folder of the range opened once: the files are made and named in it by
            // descriptor, with no path walked per file.
            var folders = FolderHandles()
            for (position, index) in piece.entries.enumerated() {
                guard !Task.isCancelled, let path = pathOf[index], let fingerprint = expected[path] else { continue }
                let target = path.absolute(in: staging.next)
                let (folder, name) = folders.resolve(target)
                guard folder != AT_FDCWD,
                    let destination = DownloadDestination.openUnnamed(inFolder: folder, for: target),
                    case .unnamed(let file, _) = destination
                else { continue }
                defer { destination.close() }
                let digest = StreamingDigest()
                let inflated: Int64?
                do {
                    inflated = try reader.inflate(position, limit: fingerprint.size) { chunk in
                        digest.update(chunk)
                        return DescriptorIO.writeAll(file, chunk) == nil
                    }
                } catch {
                    logger.debug("'\(path)' does not inflate from the archive (\(error)); downloading it")
                    destination.discard()
                    continue
                }
                guard inflated != nil,
                    destination.nameIfVerified(
                        fingerprint, digest: digest, in: folder, name: name, recordingIn: fingerprints)
                else {
                    logger.debug(
                        "'\(path)' in the archive is not the file the change list describes, or cannot be named; downloading it"
                    )
                    destination.discard()
                    continue
                }
                let span = Int64(directory.entries[index].end - directory.entries[index].start)
                placed.append((path, span))
                progress(path, span)
            }
            return placed
        }
    }

    private func rangeRequest(_ bytes: Range<UInt64>, etag: String?) -> HTTPRequest {
        var request = HTTPRequest(
            url: archive.url, headers: ["Range": "bytes=\(bytes.lowerBound)-\(bytes.upperBound - 1)"])
        // A strong tag pins every range to the archive the first answer came from; a weak one
        // never matches If-Match, so it is not sent (each entry's hash still is checked).
        if let etag, !etag.hasPrefix("W/") { request.headers["If-Match"] = etag }
        return request
    }

    /// The bytes `range` of the archive in memory, with the entity tag of the answer; nil
    /// (logged) when the answer is anything but exactly them.
    private func fetchBytes(_ range: Range<UInt64>, etag: String?, into outcome: inout Outcome) async throws(SyncError)
        -> ([UInt8], String?)?
    {
        do {
            let response = try await transport.data(for: rangeRequest(range, etag: etag))
            outcome.bytes += Int64(response.body.count)
            guard response.statusCode == 206, response.body.count == range.count,
                ResponseExpectation.completeLength(ofContentRange: response.headers["content-range"]) == archive.size
            else {
                logger.debug(
                    "the storage answered a range of the archive with HTTP \(response.statusCode) and other bytes; downloading the files one by one"
                )
                return nil
            }
            return ([UInt8](response.body), response.etag)
        } catch {
            if Task.isCancelled { throw SyncError.wrap(CancellationError()) }
            logger.debug("fetching the archive's directory failed (\(error)); downloading the files one by one")
            return nil
        }
    }
}

/// The range buffers of one fetch, each as large as its largest range and reused from range to
/// range: a fresh allocation of megabytes faults its pages in anew (13 % of S2's CPU time when
/// every range had its own). A new buffer's pages are populated at once
/// (`MADV_POPULATE_WRITE`, Linux 5.14; ignored before), cheaper than faulting them in one by
/// one as the body fills it (S2: −14 to −28 ms of 410–430 ms CPU). At most as many exist as
/// ranges are in flight; all are freed with the pool, when the fetch ends.
final class RangeBufferPool: @unchecked Sendable {
    let size: Int
    /// Guarded by `lock`.
    private var free: [UnsafeMutableRawBufferPointer] = []
    private let lock = NSLock()

    init(size: Int) {
        self.size = max(1, size)
    }

    deinit {
        for buffer in free { buffer.deallocate() }
    }

    func take() -> UnsafeMutableRawBufferPointer {
        if let buffer = lock.withLock({ free.popLast() }) { return buffer }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: Self.page)
        _ = madvise(buffer.baseAddress, size / Self.page * Self.page, Self.populateWrite)
        return buffer
    }

    private static let page = 4096
    /// `MADV_POPULATE_WRITE` from `<sys/mman.h>`, which Glibc's module does not export.
    private static let populateWrite: Int32 = 23

    func give(_ buffer: UnsafeMutableRawBufferPointer) {
        lock.withLock { free.append(buffer) }
    }
}

/// One range's bytes, filled by the transport's body callbacks on its I/O thread and read by the
/// extraction once the download returned (the task that made it awaits one, then the other).
/// Never more than its capacity: an answer longer than the range is not kept. Its buffer is taken
/// from the pool when the first byte comes, so ranges queued behind the connection cap hold none.
final class RangeBytes: RangeReceiver, @unchecked Sendable {
    private struct State {
        var storage: UnsafeMutableRawBufferPointer?
        var count = 0
        var overflowed = false
    }
    private let pool: RangeBufferPool
    /// Guarded by `lock`.
    private var state = State()
    private let lock = NSLock()
    let capacity: Int

    /// `count` bytes (at most the pool's size) to be received into a buffer of `pool`.
    init(count: Int, from pool: RangeBufferPool) {
        precondition(count <= pool.size)
        self.pool = pool
        capacity = count
    }

    deinit {
        if let storage = state.storage { pool.give(storage) }
    }

    /// A new attempt's body starts: what an earlier one gave is dropped. The answer itself is
    /// checked once the download returns.
    func start(status: Int, contentRange: String?) {
        lock.withLock { (state.count, state.overflowed) = (0, false) }
    }

    func append(_ chunk: UnsafeRawBufferPointer) {
        lock.withLock {
            guard !state.overflowed, chunk.count <= capacity - state.count else {
                state.overflowed = true
                return
            }
            guard let base = chunk.baseAddress else { return }
            if state.storage == nil { state.storage = pool.take() }
            (state.storage!.baseAddress! + state.count).copyMemory(from: base, byteCount: chunk.count)
            state.count += chunk.count
        }
    }

    /// Whether exactly `capacity` bytes came, and no more.
    var isComplete: Bool {
        lock.withLock { !state.overflowed && state.count == capacity }
    }

    /// The bytes received so far (all of them once ``isComplete``).
    var contents: UnsafeRawBufferPointer {
        lock.withLock {
            guard let storage = state.storage else { return UnsafeRawBufferPointer(start: nil, count: 0) }
            return UnsafeRawBufferPointer(rebasing: storage[0..<state.count])
        }
    }
}
