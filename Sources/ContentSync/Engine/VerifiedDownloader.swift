import FileKit
import Foundation
import StorageFormat
import Transport

/// The verified downloader: fetches one file to disk, resuming a partial one, stops it at its
/// declared size and checks its SHA-256 before anyone uses it. A refused file is deleted.
///
/// Files it verified are remembered in the ``FingerprintCache`` by identity, so the staged
/// tree check does not read them again.
struct VerifiedDownloader: Sendable {
    let transport: any Transport
    let fingerprints: FingerprintCache
    /// The running update's limit on what it downloads (``ContentBudget``); empty outside one.
    let budget = ContentBudgetSlot()

    /// Downloads `url` to `partial` and checks it against `expected` before anyone uses it: the
    /// transfer stops at the declared size, and a file whose hash differs is deleted and refused.
    ///
    /// Bodies over 1 MiB are kept resumable across runs; `alwaysResumable` (the archive) keeps
    /// any size.
    func download(
        _ url: URL, to partial: String, expected: FileFingerprint?, what: String, maxBytes: Int64? = nil,
        alwaysResumable: Bool = false, budgeted: Bool = true, progress: ProgressHandler? = nil
    ) async throws(SyncError) -> HTTPResponse {
        try await download(
            url, into: .partial(partial), expected: expected, what: what, maxBytes: maxBytes,
            alwaysResumable: alwaysResumable, budgeted: budgeted, progress: progress)
    }

    /// ``download(_:to:expected:what:maxBytes:alwaysResumable:progress:)`` into any
    /// destination. A refused download is discarded; an unnamed file stays open for the caller
    /// to link (and close) when accepted.
    func download(
        _ url: URL, into destination: DownloadDestination, expected: FileFingerprint?, what: String,
        maxBytes: Int64? = nil, alwaysResumable: Bool = false, budgeted: Bool = true,
        progress: ProgressHandler? = nil
    ) async throws(SyncError) -> HTTPResponse {
        let response: HTTPResponse
        var options: DownloadOptions
        var limit = expected?.size ?? maxBytes
        if let declared = expected?.size, let maxBytes, declared > maxBytes {
            destination.discard()
            throw SyncError(
                code: .invalidStatus,
                message:
                    "\(what): the integrity data declares \(declared) bytes, more than the \(maxBytes) bytes the status allows it; the status contradicts itself, so its publisher must publish it again"
            )
        }
        // Within what the status declares for the whole content (`budget`): a reservation for a
        // file of declared size, what is left for one of unknown size.
        let budget = budgeted ? self.budget.current : nil
        var reserved: Int64 = 0
        var kept = false
        defer { if !kept, reserved > 0 { budget?.release(reserved) } }
        if let budget {
            if let declared = expected?.size {
                guard budget.reserve(declared) else {
                    destination.discard()
                    throw SyncError(
                        code: .integrity,
                        message:
                            "\(what): its declared \(declared) bytes do not fit in what is left of the content size (\(budget.remaining) of \(budget.limit) bytes: \(budget.declared)); the storage contradicts itself, so its publisher must publish it again"
                    )
                }
                reserved = declared
            } else {
                limit = min(limit ?? budget.remaining, budget.remaining)
            }
        }
        switch destination {
        case .partial(let partial):
            options = resumableOptions(
                partialPath: partial, maxBytes: limit,
                resumableFrom: alwaysResumable ? 0 : 1 << 20, progress: progress)
        case .unnamed, .recycled:
            options = DownloadOptions(maxBytes: limit, progress: progress)
            // A spare's old bytes are written over, never emptied first (its blocks are kept).
            if case .recycled = destination { options.overwrite = true }
        }
        let streamed = StreamingDigest()
        if expected != nil { options.onBodyChunk = { streamed.update($0) } }
        // A file of unknown size takes from the budget as it grows, so that downloads running
        // at once share what is left: each used to be allowed all of it (eight endless bodies
        // filled eight times the declared size).
        let share = budget.flatMap { reserved == 0 ? BudgetShare(of: $0) : nil }
        if let share { options.admitsSize = { share.admit(size: $0) } }
        defer { if !kept, let share { budget?.release(share.total) } }
        do {
            switch destination {
            case .partial(let partial):
                response = try await transport.download(HTTPRequest(url: url), to: partial, options: options)
            case .unnamed(let descriptor, _), .recycled(let descriptor, _, _):
                response = try await transport.download(HTTPRequest(url: url), into: descriptor, options: options)
            }
        } catch {
            if let budget, expected == nil, (error as? TransportError)?.code == .tooLarge {
                // Its bytes are refused: a partial file left for a resume would keep them.
                destination.discard()
                throw SyncError(
                    code: .integrity,
                    message:
                        "downloading \(what): it is larger than what is left of the content size (\(budget.declared)); the storage contradicts itself, so its publisher must publish it again",
                    underlying: error)
            }
            throw SyncError.wrap(error, context: "downloading \(what)")
        }
        // libcurl's transport refuses any other answer itself; an app's own transport may hand
        // over a 304 or 204, whose empty file is no answer to a plain GET.
        guard response.statusCode == 200 || response.statusCode == 206 else {
            destination.discard()
            throw SyncError(
                code: .network,
                message:
                    "downloading \(what): the server answered HTTP \(response.statusCode) to a plain GET, which carries no file; try again"
            )
        }
        if let expected {
            // The size on disk, not the response's: an app's own transport may not report it.
            let identity = destination.identity
            let actual: FileFingerprint
            if let size = identity?.size,
                let whole = streamed.sha256(ofFileWithSize: size, resumedFrom: response.resumedFrom)
            {
                actual = FileFingerprint(size: size, sha256: whole)
            } else {
                // A resumed download is read back in full: on the I/O pool, not a cooperative thread.
                actual = try await BlockingWork.files { [destination] () throws(FileSystemError) in
                    switch destination {
                    case .partial(let partial): try ContentTree.fingerprint(of: partial)
                    case .unnamed(let descriptor, let target), .recycled(let descriptor, _, let target):
                        try ContentTree.fingerprint(ofDescriptor: descriptor, shownAs: target)
                    }
                }
            }
            do {
                try formatWork { () throws(StorageFormatError) in
                    try StorageIntegrity.verify(actual, against: expected, what: what)
                }
            } catch {
                destination.discard()
                throw error
            }
            // Renaming or linking into the staged tree keeps the identity: the tree check need not read it again.
            if let identity { fingerprints.insert(actual, for: identity) }
        }
        kept = true
        if reserved == 0 {
            let size = destination.identity?.size ?? response.fileSize
            budget?.spend(max(0, size - (share?.total ?? 0)))
        }
        return response
    }

    /// The largest declared size downloaded as an unnamed file; the same 1 MiB above which a
    /// body is kept resumable across runs.
    static let unnamedDownloadLimit: Int64 = 1 << 20

    /// Download options that let a large download resume after a restart: the entity tag of a
    /// body over `resumableFrom` bytes is kept beside its partial file, and sent back as `If-Range`,
    /// with the whole length its answer declared (a second line), which a `416` may not contradict.
    ///
    /// A content-encoded body (gzip from S3, say) keeps no tag, and loses any older one: the file
    /// holds decoded bytes, and a range of the encoded representation cannot follow them.
    func resumableOptions(
        partialPath: String, maxBytes: Int64? = nil, resumableFrom: Int64 = 1 << 20,
        progress: ProgressHandler? = nil
    ) -> DownloadOptions {
        let sidecar = partialPath + ".etag"
        // Both are written again by name: a link planted at either would take the writes
        // elsewhere. Such a one goes (the download then starts over); the download's own open
        // refuses a link made after this (O_NOFOLLOW).
        try? FileSystem.removeUnlessPlainFile(partialPath)
        try? FileSystem.removeUnlessPlainFile(sidecar)
        let lines = ((try? SmallTextFile.read(sidecar, limit: 4096)) ?? "").split(separator: "\n").map {
            $0.trimmingCharacters(in: .whitespaces)
        }
        let etag = lines.first
        var options = DownloadOptions(
            resumeETag: etag?.isEmpty == false ? etag : nil, maxBytes: maxBytes, progress: progress)
        options.resumeLength = lines.count > 1 ? Int64(lines[1]) : nil
        options.onResponseStart = { status, headers in
            guard HTTPHeaderField.contentCodings(headers["content-encoding"]).isEmpty else {
                unlink(sidecar)
                return
            }
            let whole =
                status == 206
                ? ResponseExpectation.completeLength(ofContentRange: headers["content-range"])
                : headers["content-length"].flatMap(Int64.init)
            guard let etag = headers["etag"], let whole, whole > resumableFrom else { return }
            // A new file renamed into place: never written through whatever is at the name.
            try? AtomicFile.write(Data("\(etag)\n\(whole)\n".utf8), to: sidecar)
        }
        return options
    }
}
