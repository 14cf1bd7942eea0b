import Archive
import FileKit
import StorageFormat
import Foundation
import Transport

extension SyncEngine {
    /// Downloads `url` to `partial` and checks it against `expected` before anyone uses it: the
    /// transfer stops at the declared size, and a file whose hash differs is deleted and refused.
    ///
    /// Bodies over 1 MiB are kept resumable across runs; `alwaysResumable` (the archive) keeps
    /// any size.
    func downloadVerified(_ url: URL, to partial: String, expected: FileFingerprint?, what: String, maxBytes: Int64? = nil,
                          alwaysResumable: Bool = false, progress: ProgressHandler? = nil) async throws(SyncError) -> HTTPResponse {
        try await downloadVerified(url, into: .partial(partial), expected: expected, what: what, maxBytes: maxBytes,
                                   alwaysResumable: alwaysResumable, progress: progress)
    }

    /// ``downloadVerified(_:to:expected:what:maxBytes:alwaysResumable:progress:)`` into any
    /// destination. A refused download is discarded; an unnamed file stays open for the caller
    /// to link (and close) when accepted.
    func downloadVerified(_ url: URL, into destination: DownloadDestination, expected: FileFingerprint?, what: String,
                          maxBytes: Int64? = nil, alwaysResumable: Bool = false,
                          progress: ProgressHandler? = nil) async throws(SyncError) -> HTTPResponse {
        let response: HTTPResponse
        var options: DownloadOptions
        switch destination {
        case .partial(let partial):
            options = resumableOptions(partialPath: partial, maxBytes: expected?.size ?? maxBytes,
                                       resumableFrom: alwaysResumable ? 0 : 1 << 20, progress: progress)
        case .unnamed:
            options = DownloadOptions(maxBytes: expected?.size ?? maxBytes, progress: progress)
        }
        let streamed = StreamingDigest()
        if expected != nil { options.onBodyChunk = { streamed.update($0) } }
        do {
            switch destination {
            case .partial(let partial):
                response = try await transport.download(HTTPRequest(url: url), to: partial, options: options)
            case .unnamed(let descriptor, _):
                response = try await transport.download(HTTPRequest(url: url), into: descriptor, options: options)
            }
        } catch {
            throw SyncError.wrap(error, context: "downloading \(what)")
        }
        // libcurl's transport refuses any other answer itself; an app's own transport may hand
        // over a 304 or 204, whose empty file is no answer to a plain GET.
        guard response.statusCode == 200 || response.statusCode == 206 else {
            destination.discard()
            throw SyncError(code: .network,
                            message: "downloading \(what): the server answered HTTP \(response.statusCode) to a plain GET, which carries no file; try again")
        }
        if let expected {
            // The size on disk, not the response's: an app's own transport may not report it.
            let identity = destination.identity
            let actual: FileFingerprint
            if let size = identity?.size, let whole = streamed.sha256(ofFileWithSize: size, resumedFrom: response.resumedFrom) {
                actual = FileFingerprint(size: size, sha256: whole)
            } else {
                // A resumed download is read back in full: on the I/O pool, not a cooperative thread.
                actual = try await BlockingWork.files { [destination] () throws(FileSystemError) in
                    switch destination {
                    case .partial(let partial): try ContentTree.fingerprint(of: partial)
                    case .unnamed(let descriptor, let target): try ContentTree.fingerprint(ofDescriptor: descriptor, shownAs: target)
                    }
                }
            }
            do {
                try formatWork { () throws(StorageFormatError) in try StorageIntegrity.verify(actual, against: expected, what: what) }
            } catch {
                destination.discard()
                throw error
            }
            // Renaming or linking into the staged tree keeps the identity: the tree check need not read it again.
            if let identity { fingerprints.insert(actual, for: identity) }
        }
        return response
    }

    /// Compares the staged tree with the published tree digest and repairs what differs from the
    /// content manifest. Returns the number of repaired paths, or nil when the tree cannot be
    /// made to match (no manifest, or the storage's files contradict it).
    ///
    /// Files whose identity the ``FingerprintCache`` knows are not read again, unless
    /// `trustingCache` is false (`verify` hashes every byte).
    func verifyStagedTree(_ integrity: StorageIntegrity?, layout: StorageLayout,
                          trustingCache: Bool = true) async throws(SyncError) -> Int? {
        guard let integrity, let expectedDigest = integrity.treeDigest else { return 0 }
        let staging = self.staging
        let cache: FingerprintCache?
        if trustingCache {
            fingerprints.load(try await store.fileFingerprints())
            cache = fingerprints
        } else {
            cache = nil
        }
        fingerprints.startTracking()
        var (tree, intruders) = try await BlockingWork.files { () throws(FileSystemError) in try ContentTree.scanLocal(staging.next, cache: cache) }
        if intruders.isEmpty && TreeDigest.digest(of: tree) == expectedDigest { return 0 }
        guard let manifestURL = integrity.contentManifestURL, let manifestFingerprint = integrity.contentManifest else {
            logger.warning("the staged tree does not match the published digest and the storage has no content manifest")
            return nil
        }
        let manifest: ContentTree
        do {
            let data = try await fetchStorageFile(manifestURL, expected: manifestFingerprint)
            manifest = try ContentManifest.parse(data, name: manifestURL.lastPathComponent)
        } catch {
            logger.warning("cannot read the content manifest to repair from", metadata: ["sync.error": "\(error)"])
            return nil
        }
        guard TreeDigest.digest(of: manifest) == expectedDigest else {
            logger.warning("the content manifest contradicts the published tree digest")
            return nil
        }
        let plan = RepairPlan(staged: tree, intruders: intruders, manifest: manifest)
        // First everything the version does not have, whatever its kind (a file where a folder
        // belongs goes here, and so does a folder where a file belongs), then the missing
        // folders, then the files: no step can find something of the wrong kind in its way, and
        // none undoes another.
        try await BlockingWork.files { () throws(FileSystemError) in
            for intruder in plan.intruders { try intruder.remove(under: staging.next) }
            for path in plan.removals { try FileSystem.removeTree(path.absolute(in: staging.next)) }
            for folder in plan.folders { try FileSystem.makeFolder(folder.absolute(in: staging.next)) }
        }
        for (path, fingerprint) in plan.downloads {
            let partial = staging.partialFile(for: path)
            let target = path.absolute(in: staging.next)
            try await BlockingWork.files { () throws(FileSystemError) in try FileSystem.removeTree(target) }
            do {
                _ = try await downloadVerified(layout.contentURL(for: path), to: partial, expected: fingerprint, what: "'\(path)'")
            } catch where error.code == .integrity || (error.underlying as? TransportError)?.statusCode == 404 {
                logger.warning("repair cannot fetch a matching copy", metadata: ["sync.path": "\(path)", "sync.error": "\(error)"])
                return nil
            }
            try await BlockingWork.files { () throws(FileSystemError) in
                try FileSystem.rename(partial, to: target, operation: "cannot move the repaired '\(path)' into")
            }
        }
        fingerprints.startTracking()
        (tree, intruders) = try await BlockingWork.files { () throws(FileSystemError) in try ContentTree.scanLocal(staging.next, cache: cache) }
        guard intruders.isEmpty, TreeDigest.digest(of: tree) == expectedDigest else { return nil }
        logger.warning("repaired the staged version to match the published tree digest", metadata: ["sync.repaired": "\(plan.count)"])
        return plan.count
    }
}

/// What turns a local tree into the published one: the pure half of a repair, so its order and
/// its handling of kind changes are tested without I/O.
struct RepairPlan: Equatable {
    /// Entries that cannot be content, to delete by their raw names.
    var intruders: [Intruder]
    /// Files and folders the version does not have at that path with that kind, deepest first;
    /// none lies inside another (a folder's removal takes its contents).
    var removals: [SafeRelativePath]
    /// Folders to create, parents first.
    var folders: [SafeRelativePath]
    /// Files to fetch (missing, different, or where something else stood), with their fingerprints.
    var downloads: [(SafeRelativePath, FileFingerprint)]

    init(staged: ContentTree, intruders: [Intruder], manifest: ContentTree) {
        self.intruders = intruders
        var doomed = Set<SafeRelativePath>()
        for path in staged.files.keys where manifest.files[path] == nil { doomed.insert(path) }
        for folder in staged.folders where !manifest.folders.contains(folder) { doomed.insert(folder) }
        // Only the outermost of each doomed subtree: deleting it takes the rest. Sorted, a
        // subtree's paths follow its root, so one comparison each finds them (no ancestor
        // lists: a tree can be 1,800 levels deep).
        var outermost: [SafeRelativePath] = []
        for path in doomed.sorted() where !(outermost.last.map(path.isWithin) ?? false) { outermost.append(path) }
        removals = outermost.reversed()
        folders = manifest.folders.subtracting(staged.folders).sorted()
        downloads = manifest.files.sorted(by: { $0.key < $1.key }).filter { staged.files[$0.key] != $0.value }
    }

    /// Paths repaired, for the report.
    var count: Int { intruders.count + removals.count + folders.count + downloads.count }

    static func == (lhs: RepairPlan, rhs: RepairPlan) -> Bool {
        lhs.intruders == rhs.intruders && lhs.removals == rhs.removals && lhs.folders == rhs.folders
            && lhs.downloads.map(\.0) == rhs.downloads.map(\.0) && lhs.downloads.map(\.1) == rhs.downloads.map(\.1)
    }
}
