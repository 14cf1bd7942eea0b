import FileKit
import Foundation
import Logging
import StorageFormat
import Transport

/// The storage client: fetches the storage's documents (status, update list, change lists,
/// content manifest) over the transport, conditionally with stored ETags, and checks them
/// against the status's integrity data and signature before anyone uses them.
///
/// It holds no state of its own: ETags, stored bodies and the highest signed version accepted
/// live in the ``StateStore``.
struct StorageClient: Sendable {
    let configuration: SyncConfiguration
    let store: StateStore
    let transport: any Transport
    var logger: Logger { configuration.logger }

    /// The change lists of one replay, fetched and read but not yet planned.
    struct Chain: Sendable {
        /// The lists in replay order.
        var lists: PendingLists
        /// How many lists the chain has.
        var count: Int { lists.count }
    }

    /// The update list's entries that may lead from `local` to the status's actual version,
    /// fetched and checked against the signed status when keys are trusted. Lists the client
    /// has moved past are forgotten from the state database.
    func fetchChain(from local: CacheVersion, status: CacheStatus, layout: StorageLayout) async throws(SyncError)
        -> Chain?
    {
        let listData = try await fetchFile(status.updateListURL, expected: status.integrity?.updateList)
        let updateList = try await documentWork(bytes: listData.count) { () throws(StorageFormatError) in
            try UpdateList.parse(listData, from: status.updateListURL, layout: layout)
        }
        let candidates = UpdateChain.candidates(updateList, local: local, actual: status.actualVersion)
        if let (earlier, later) = UpdateChain.firstOutOfOrder(candidates) {
            throw SyncError(
                code: .invalidUpdateList,
                message: "\(Redaction.url(status.updateListURL)): \(later.url.lastPathComponent) comes after "
                    + "\(earlier.url.lastPathComponent), which reaches the later version \(earlier.namedTo.map(\.text) ?? "?"): the lists "
                    + "from \(local) to \(status.actualVersion) are out of order; the publisher must list them in "
                    + "publication order (oldest first)")
        }
        if !configuration.trustedSigningKeys.isEmpty {
            // Mix-and-match: every file fetched must be tied to the signed status by its hash.
            if status.integrity?.updateList == nil {
                throw SyncError(
                    code: .signature, message: "the signed status does not cover the update list's hash; refusing it")
            }
            for entry in candidates where status.integrity?.changeLists[entry.url] == nil {
                throw SyncError(
                    code: .signature,
                    message:
                        "\(entry.url.lastPathComponent) is not covered by the signed status's integrity data; refusing it"
                )
            }
        }
        // Lists the client has moved past are never fetched again: forget their stored copies.
        let wanted = Set(candidates.map(\.url))
        try await store.deleteCachedResources(Array(Set(updateList.entries.map(\.url)).subtracting(wanted)))
        return try await fetchChain(
            candidates, from: local, to: status.actualVersion, layout: layout, integrity: status.integrity
        )
        .map { Chain(lists: PendingLists($0)) }
    }

    /// The published tree from the content manifest, checked against its hash; nil when the
    /// storage has none.
    func fetchManifest(_ integrity: StorageIntegrity) async throws(SyncError) -> ContentTree? {
        guard let url = integrity.contentManifestURL, let fingerprint = integrity.contentManifest else { return nil }
        let data = try await fetchFile(url, expected: fingerprint)
        return try await documentWork(bytes: data.count) { () throws(StorageFormatError) in
            try ContentManifest.parse(data, name: url.lastPathComponent)
        }
    }

    /// The largest storage file kept in the state database for conditional fetches. SQLite
    /// copies a blob twice while writing it, so storing a 60 MB change list tripled an update's
    /// peak memory; a larger file is simply fetched again when an update is retried.
    static let maxStoredBodyBytes = 4 << 20

    /// Whether an entity tag may be kept and sent back in `If-None-Match`: at most 1,024 bytes
    /// (hosts send 30 to 70) of no control characters. A 100 KB tag from a hostile origin or a
    /// hostile database row was sent with every request (and hung `sync-agent serve`), and a
    /// line break in one would end the header.
    static func isUsableEntityTag(_ tag: String) -> Bool {
        tag.utf8.count <= 1_024 && tag.utf8.allSatisfy { $0 >= 0x20 && $0 != 0x7F }
    }

    /// Fetches a storage JSON file conditionally: with a stored ETag the request carries
    /// `If-None-Match`, and a `304` reuses the stored body. A client that is up to date therefore
    /// costs the storage one bodiless request. The stored body is read only on a `304`, so a
    /// changed file never has two bodies in memory.
    func fetchFile(_ url: URL, expected: FileFingerprint? = nil) async throws(SyncError) -> Data {
        let etag = try await store.cachedETag(url).flatMap { Self.isUsableEntityTag($0) ? $0 : nil }
        var request = HTTPRequest(url: url)
        if let etag { request.headers["If-None-Match"] = etag }
        // A file whose size the integrity data declares is cut off past it, not read to the
        // transport's general limit (an endless body cost 64 MiB of memory and of traffic).
        request.maxBodyBytes = expected?.size
        let response: HTTPResponse
        do {
            response = try await transport.data(for: request)
        } catch {
            throw SyncError.wrap(error, context: "fetching \(url.lastPathComponent)")
        }
        if response.isNotModified, let etag, let answered = response.etag, answered != etag {
            // "Not modified", naming another entity tag than the one sent: the stored copy is not
            // the one it means (RFC 9111 §4.3.4: such a 304 updates nothing). It is forgotten, and
            // the file fetched whole, unconditionally (so this happens once).
            try await store.deleteCachedResources([url])
            return try await fetchFile(url, expected: expected)
        }
        if response.isNotModified {
            // A 304 carries no body: it is an answer only when a stored copy backs the ETag we
            // sent. An app's own transport may pass one through for an unconditional request, or
            // the stored copy may have gone since; installing the empty body would blame the
            // storage (or, for a change list, replay nothing). Forget the ETag so the retry
            // fetches the whole file.
            guard etag != nil, let cached = try await store.cachedResource(url) else {
                if etag != nil { try await store.deleteCachedResources([url]) }
                throw SyncError(
                    code: .network,
                    message: "fetching \(url.lastPathComponent): the server answered 304 Not Modified to a request "
                        + (etag == nil ? "that was not conditional" : "whose stored copy is gone")
                        + ", so there is no body to use; the next attempt fetches the whole file")
            }
            let body = cached.body
            try await documentWork(bytes: body.count) { () throws(StorageFormatError) in
                try StorageIntegrity.verify(body, against: expected, what: url.lastPathComponent)
            }
            return body
        }
        guard response.statusCode == 200 else {
            // Only a 200 carries a whole file to a plain GET (an app's transport may pass a 204 or 206 through).
            throw SyncError(
                code: .network,
                message:
                    "fetching \(url.lastPathComponent): the server answered HTTP \(response.statusCode) to a plain GET, which is no whole file; try again"
            )
        }
        let body = response.body
        try await documentWork(bytes: body.count) { () throws(StorageFormatError) in
            try StorageIntegrity.verify(body, against: expected, what: url.lastPathComponent)
        }
        if let etag = response.etag, Self.isUsableEntityTag(etag), response.body.count <= Self.maxStoredBodyBytes {
            try await store.saveCachedResource(
                CachedResourceRecord(
                    url: StateStore.key(url), etag: etag, body: response.body,
                    fetchedAt: Date()))
        } else if etag != nil {
            try await store.deleteCachedResources([url]) // the stored copy is stale
        }
        return response.body
    }

    /// Fetches and parses `cacheStatus.json`, checks its signature when keys are trusted, and
    /// records the check (and the highest signed version accepted) in the state database.
    func fetchStatus(layout: inout StorageLayout) async throws(SyncError) -> CacheStatus {
        let url = layout.statusURL
        let data = try await fetchFile(url)
        var status = try formatWork { () throws(StorageFormatError) in
            try CacheStatus.parse(data, from: url, layout: &layout)
        }
        let signed = try await checkSignature(data, status: status, name: url.lastPathComponent)
        if !configuration.verifyIntegrity && !signed { status.integrity = nil }
        // Shown by `status` and kept on disk: never with its password or token.
        let base = Redaction.url(configuration.baseURL)
        let actual = status.actualVersion
        try await store.updateSyncState(contentDirectory: configuration.contentDirectory) {
            $0.lastCheck = Date()
            $0.baseURL = base
            if signed, $0.highestAcceptedVersion.flatMap({ try? CacheVersion($0) }).map({ $0 < actual }) ?? true {
                $0.highestAcceptedVersion = actual.text
            }
        }
        return status
    }

    /// With trusted keys configured: the status must be signed by one of them, unexpired, carry
    /// integrity data, and not go below the highest version ever accepted. Returns whether it
    /// was checked.
    private func checkSignature(_ data: Data, status: CacheStatus, name: String) async throws(SyncError) -> Bool {
        let pins = try await store.trustPins()
        guard !configuration.trustedSigningKeys.isEmpty else {
            // Trust is pinned: a folder once synced under trusted keys is not updated without them.
            guard pins.isEmpty else {
                var refusal = SyncError(
                    code: .signature,
                    message:
                        "\(configuration.contentDirectory) was synced with trusted signing key(s) \(pins.keys.sorted().joined(separator: ", ")); "
                        + "updating it without them would accept an unsigned or differently signed \(name)")
                refusal.setting = .trustedSigningKeys
                throw refusal
            }
            return false
        }
        let keys = try configuration.trustedSigningKeys.map { (text: String) throws(SyncError) in
            try formatWork { () throws(StorageFormatError) in try StatusSignature.publicKey(base64: text) }
        }
        let root: JSONValue
        do { root = try JSONValue.parse(data) } catch {
            throw SyncError(code: .invalidStatus, message: "\(name): \(error)", underlying: error)
        }
        do throws(SyncError) {
            try formatWork { () throws(StorageFormatError) in
                try StatusSignature.verify(root, trustedKeys: keys, now: Date(), name: name)
            }
        } catch {
            // The client's keys decide only an unsigned status or another key's; an altered,
            // expired or malformed one is the storage's fault whatever keys are given.
            var refusal = error
            if StatusSignature.isSignedByNone(of: keys, root) { refusal.setting = .trustedSigningKeys }
            throw refusal
        }
        guard status.integrity?.treeDigest != nil, status.integrity?.archive != nil else {
            throw SyncError(
                code: .signature,
                message:
                    "\(name) is signed but carries no integrity data, so its lists and archive are not tied to the signature; refusing it"
            )
        }
        if let highest = try await store.syncState()?.highestAcceptedVersion.flatMap({ try? CacheVersion($0) }),
            status.actualVersion < highest
        {
            throw SyncError(
                code: .signature,
                message:
                    "\(name) is signed for \(status.actualVersion), below \(highest) which this client already accepted: a rollback; refusing it"
            )
        }
        // The keys that verified it are the folder's from now on (a new set replaces the old:
        // giving other keys is the operator's explicit choice).
        let configured = Dictionary(
            keys.map { (StatusSignature.keyID(of: $0), $0.rawRepresentation.base64EncodedString()) }
        ) { first, _ in first }
        if configured != pins { try await store.setTrustPins(configured) }
        return true
    }

    /// Fetches the change lists the chain from `local` to `actual` needs (see ``ChainResolver``),
    /// six at a time, and returns the chain in replay order, each list read but not parsed; nil
    /// when no chain reaches `actual`. A list the storage no longer has (404) is skipped. Only
    /// the bodies of lists that can still be in the chain are kept while the others arrive.
    private func fetchChain(
        _ candidates: [UpdateList.Entry], from local: CacheVersion, to actual: CacheVersion, layout: StorageLayout,
        integrity: StorageIntegrity?
    ) async throws(SyncError) -> [ChangeListReader]? {
        var resolver = ChainResolver(candidates: candidates, local: local, actual: actual)
        do {
            return try await withThrowingTaskGroup(of: (Int, ChangeListReader?).self) { group in
                var queue: [Int] = []
                var next = 0
                var inFlight = 0
                var kept: [Int: ChangeListReader] = [:]
                func launch(_ group: inout ThrowingTaskGroup<(Int, ChangeListReader?), any Error>) {
                    while inFlight < 6, next < queue.count {
                        let index = queue[next]
                        let entry = candidates[index]
                        next += 1
                        inFlight += 1
                        group.addTask {
                            do {
                                let data = try await self.fetchFile(
                                    entry.url, expected: integrity?.changeLists[entry.url])
                                return (index, try ChangeListReader(data, from: entry.url, layout: layout))
                            } catch let error as SyncError
                                where (error.underlying as? TransportError)?.statusCode == 404
                            {
                                self.logger.debug(
                                    "change list is not published",
                                    metadata: ["sync.list": "\(Redaction.url(entry.url))"])
                                return (index, nil)
                            }
                        }
                    }
                }
                var action = resolver.start()
                while true {
                    switch action {
                    case .chain(let order):
                        group.cancelAll()
                        return order.map { kept[$0]! }
                    case .noChain:
                        group.cancelAll()
                        return nil
                    case .fetch(let indexes):
                        queue += indexes
                        launch(&group)
                    case .wait:
                        break
                    }
                    guard let (index, reader) = try await group.next() else {
                        preconditionFailure("the chain resolver waits for a fetch that was never started")
                    }
                    inFlight -= 1
                    if let reader {
                        action = resolver.fetched(index, from: reader.from, to: reader.to)
                        if resolver.mayBePicked(index) { kept[index] = reader }
                    } else {
                        action = resolver.missing(index)
                    }
                    kept = kept.filter { resolver.mayBePicked($0.key) }
                    launch(&group)
                }
            }
        } catch {
            throw SyncError.wrap(error)
        }
    }
}
