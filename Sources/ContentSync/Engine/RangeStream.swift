import Archive
import CLinux
import FileKit
import Foundation
import StorageFormat
import Synchronization
import Transport

#if canImport(Glibc)
    import Glibc
#endif

/// What a range of the archive is received into: its bytes gathered in memory (``RangeBytes``),
/// or its stored entries placed as they come (``RangeStream``). Fed on the transport's I/O
/// thread, one attempt after another.
protocol RangeReceiver: AnyObject, Sendable {
    /// An attempt's answer starts, with its status and `Content-Range`: what an earlier attempt
    /// gave is dropped.
    func start(status: Int, contentRange: String?)
    /// The answer's next bytes.
    func append(_ chunk: UnsafeRawBufferPointer)
    /// Whether exactly the range's bytes came, and no more.
    var isComplete: Bool { get }
}

/// Places the stored entries of one range of the archive in `next/` as the range's bytes arrive,
/// on the transport's I/O thread: each entry's data is hashed and written into an unnamed file
/// straight from libcurl's buffer, checked against its fingerprint when its last byte is in,
/// and given its name, as ``ArchiveRangeFetcher/extract`` does from a range held in memory. No
/// range is held, and no byte is copied but into its file.
///
/// Only for a range whose wanted entries the directory says are all stored (the initializer is
/// nil otherwise). Until `gate` opens (`next/` is ready) the bytes are held in a buffer of the
/// fetch's pool, placed when it opens, and dropped if it says no. Nothing is taken from an answer
/// that is not exactly the range asked (`206` with that `Content-Range` of an archive of the
/// published size); an entry whose local header differs from its record, that does not verify,
/// or that cannot be written is skipped, left to its own download as any entry the fetch does not
/// place.
final class RangeStream: RangeReceiver, @unchecked Sendable {
    /// One wanted entry, its offsets counted from the range's start.
    private struct Target {
        var path: SafeRelativePath
        var fingerprint: FileFingerprint
        var start: Int
        var end: Int
        /// The bytes the archive's records give for the entry, for progress.
        var span: Int64
    }

    private enum Phase {
        /// Skipping bytes up to the next target's local header.
        case seeking
        /// Gathering the local header (`needed` bytes in all once its length is known).
        case header(needed: Int)
        /// Writing the data, `left` bytes of it still to come, into `file`.
        case data(left: Int, file: DownloadDestination, folder: Int32, name: String, digest: StreamingDigest)
    }

    private struct State {
        var accepted = false
        /// The gate opened: bytes are placed as they come.
        var live = false
        /// The bytes `0..<received` of this attempt while the gate is closed; nil once it opened
        /// (or when there is no gate).
        var held: RangeBytes?
        var received = 0
        var next = 0
        var phase = Phase.seeking
        var header: [UInt8] = []
        var placed: [(path: SafeRelativePath, bytes: Int64)] = []
        /// Targets placed by an earlier attempt: skipped by a retried one.
        var done: Set<Int> = []
    }

    private let targets: [Target]
    private let range: Range<UInt64>
    private let archiveSize: Int64
    private let next: String
    private let fingerprints: FingerprintCache
    private let progress: @Sendable (SafeRelativePath, Int64) -> Void
    private let gate: StartGate?
    /// Guarded by `lock`, as are `state` and `folders`: the I/O thread writes, the task reads once
    /// the download returned.
    private let lock = NSLock()
    private var state = State()
    private var folders = FolderHandles()

    /// A stream for `piece` of an archive of `archiveSize` bytes, or nil when any of its wanted
    /// entries (those in `pathOf` with a fingerprint in `expected`) is not stored, or is stored
    /// with another size than its fingerprint's.
    init?(
        piece: ArchiveRangePlan.Piece, archiveSize: Int64, directory: ArchiveDirectory,
        pathOf: [Int: SafeRelativePath], expected: [SafeRelativePath: FileFingerprint], next: String,
        gate: StartGate?, buffers: RangeBufferPool, fingerprints: FingerprintCache,
        progress: @escaping @Sendable (SafeRelativePath, Int64) -> Void
    ) {
        var targets: [Target] = []
        for index in piece.entries {
            guard let path = pathOf[index], let fingerprint = expected[path] else { continue }
            let entry = directory.entries[index]
            guard let size = directory.storedSize(of: entry), Int64(size) == fingerprint.size,
                entry.start >= piece.start, entry.end <= piece.end, entry.start < entry.end
            else { return nil }
            targets.append(
                Target(
                    path: path, fingerprint: fingerprint, start: Int(entry.start - piece.start),
                    end: Int(entry.end - piece.start), span: Int64(entry.end - entry.start)))
        }
        guard !targets.isEmpty, piece.length <= UInt64(buffers.size) else { return nil }
        self.targets = targets
        self.range = piece.start..<piece.end
        self.archiveSize = archiveSize
        self.next = next
        self.fingerprints = fingerprints
        self.progress = progress
        self.gate = gate
        state.live = gate == nil
        if gate != nil { state.held = RangeBytes(count: Int(piece.length), from: buffers) }
    }

    deinit {
        if case .data(_, let file, _, _, _) = state.phase { file.close() }
    }

    func start(status: Int, contentRange: String?) {
        lock.withLock {
            dropPartialEntry()
            state.held?.start(status: status, contentRange: contentRange)
            state.received = 0
            state.next = 0
            state.phase = .seeking
            // Exactly the range asked, of an archive of the published size: else nothing is taken.
            let span = ResponseExpectation.span(ofContentRange: contentRange)
            state.accepted =
                status == 206 && span?.first == Int64(range.lowerBound) && span?.last == Int64(range.upperBound) - 1
                && span?.total == archiveSize
        }
    }

    func append(_ chunk: UnsafeRawBufferPointer) {
        lock.withLock {
            guard state.accepted else { return }
            guard chunk.count <= range.count - state.received else {
                // Longer than the range: not the range (the transport refuses it too).
                dropPartialEntry()
                state.accepted = false
                return
            }
            if !state.live {
                switch gate?.decision {
                case nil:
                    hold(chunk)
                    return
                case true?:
                    goLive()
                case false?:
                    state.accepted = false
                    return
                }
            }
            consume(chunk, from: state.received)
            state.received += chunk.count
        }
    }

    /// Waits for the gate if it was closed while the bytes came, then places what was held.
    /// Call once the download returned.
    func drain() async {
        guard let gate, lock.withLock({ !state.live }) else { return }
        let go = await gate.wait()
        lock.withLock {
            if go { goLive() } else { state.accepted = false }
        }
    }

    private func hold(_ chunk: UnsafeRawBufferPointer) {
        state.held?.append(chunk)
        state.received += chunk.count
    }

    /// The gate is open: the bytes held so far are placed, and the rest as they come; the
    /// buffer goes back to the pool.
    private func goLive() {
        state.live = true
        guard let held = state.held else { return }
        state.held = nil
        if state.accepted { consume(held.contents, from: 0) }
    }

    var isComplete: Bool {
        lock.withLock { state.accepted && state.received == range.count }
    }

    /// The files placed, each with its entry's bytes in the archive.
    var placed: [(path: SafeRelativePath, bytes: Int64)] {
        lock.withLock { state.placed }
    }

    /// Feeds `chunk`, the range's bytes from `start` on, through the targets.
    private func consume(_ chunk: UnsafeRawBufferPointer, from start: Int) {
        var at = 0
        while at < chunk.count, state.next < targets.count {
            let target = targets[state.next]
            let position = start + at
            switch state.phase {
            case .seeking:
                if state.done.contains(state.next) || position >= target.end {
                    state.next += 1
                } else if position < target.start {
                    at += min(target.start - position, chunk.count - at)
                } else if position > target.start {
                    // Its header was cut by an entry skipped before it: not taken.
                    state.next += 1
                } else {
                    state.header.removeAll(keepingCapacity: true)
                    state.phase = .header(needed: ArchiveDirectory.localHeaderLength)
                }
            case .header(let needed):
                let take = min(needed - state.header.count, chunk.count - at)
                state.header.append(contentsOf: UnsafeRawBufferPointer(rebasing: chunk[at..<at + take]))
                at += take
                guard state.header.count == needed else { continue }
                if needed == ArchiveDirectory.localHeaderLength {
                    let offset = state.header.withUnsafeBytes { ArchiveDirectory.storedDataOffset(localHeader: $0) }
                    guard let offset, offset <= target.end - target.start,
                        Int(target.fingerprint.size) <= target.end - target.start - offset
                    else {
                        skipTarget()
                        continue
                    }
                    if offset > needed {
                        state.phase = .header(needed: offset)
                        continue
                    }
                }
                beginData(target)
            case .data(let left, let file, let folder, let name, let digest):
                let take = min(left, chunk.count - at)
                let slice = UnsafeRawBufferPointer(rebasing: chunk[at..<at + take])
                at += take
                digest.update(slice)
                guard case .unnamed(let descriptor, _) = file, DescriptorIO.writeAll(descriptor, slice) == nil else {
                    file.close()
                    state.phase = .seeking
                    state.next += 1
                    continue
                }
                state.phase = .data(left: left - take, file: file, folder: folder, name: name, digest: digest)
                if left == take { finish(target) }
            }
        }
    }

    /// The header is in: opens the entry's unnamed file (an empty entry is placed at once).
    private func beginData(_ target: Target) {
        let (folder, name) = folders.resolve(target.path.absolute(in: next))
        guard folder != AT_FDCWD,
            let file = DownloadDestination.openUnnamed(inFolder: folder, for: target.path.absolute(in: next))
        else {
            skipTarget()
            return
        }
        state.phase = .data(
            left: Int(target.fingerprint.size), file: file, folder: folder, name: name, digest: StreamingDigest())
        if target.fingerprint.size == 0 { finish(target) }
    }

    /// The entry's last byte is written: named if it is the file the change list describes.
    private func finish(_ target: Target) {
        guard case .data(_, let file, let folder, let name, let digest) = state.phase else { return }
        defer {
            file.close()
            state.phase = .seeking
            state.next += 1
        }
        guard
            file.nameIfVerified(
                target.fingerprint, digest: digest, in: folder, name: name, recordingIn: fingerprints)
        else { return }
        state.done.insert(state.next)
        state.placed.append((target.path, target.span))
        progress(target.path, target.span)
    }

    private func skipTarget() {
        state.phase = .seeking
        state.next += 1
    }

    /// An entry cut off mid-way (a retried attempt, an answer refused): its unnamed file goes.
    private func dropPartialEntry() {
        if case .data(_, let file, _, _, _) = state.phase { file.close() }
        state.phase = .seeking
    }
}
