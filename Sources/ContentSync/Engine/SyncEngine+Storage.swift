import Foundation
import Transport

extension SyncEngine {
    /// Fetches a storage JSON file conditionally: with a stored ETag the request carries
    /// `If-None-Match`, and a `304` reuses the stored body. A client that is up to date therefore
    /// costs the storage one bodiless request.
    func fetchStorageFile(_ url: URL, expected: FileFingerprint? = nil) async throws(SyncError) -> Data {
        let cached = try await store.cachedResource(url)
        var request = HTTPRequest(url: url)
        if let cached { request.headers["If-None-Match"] = cached.etag }
        let response: HTTPResponse
        do {
            response = try await transport.data(for: request)
        } catch {
            throw SyncError.wrap(error, context: "fetching \(url.lastPathComponent)")
        }
        if response.isNotModified, let cached {
            try StorageIntegrity.verify(cached.body, against: expected, what: url.lastPathComponent)
            return cached.body
        }
        try StorageIntegrity.verify(response.body, against: expected, what: url.lastPathComponent)
        if let etag = response.etag {
            try await store.saveCachedResource(CachedResourceRecord(url: url.absoluteString, etag: etag, body: response.body,
                                                                    fetchedAt: Date()))
        }
        return response.body
    }

    func fetchStatus(layout: inout StorageLayout) async throws(SyncError) -> CacheStatus {
        let url = layout.statusURL
        let data = try await fetchStorageFile(url)
        var status = try CacheStatus.parse(data, from: url, layout: &layout)
        let signed = try await checkSignature(data, status: status, name: url.lastPathComponent)
        if !configuration.verifyIntegrity && !signed { status.integrity = nil }
        let base = configuration.baseURL.absoluteString
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
        guard !configuration.trustedSigningKeys.isEmpty else { return false }
        let keys = try configuration.trustedSigningKeys.map { (text: String) throws(SyncError) in try StatusSignature.publicKey(base64: text) }
        let root: JSONValue
        do { root = try JSONValue.parse(data) } catch {
            throw SyncError(code: .invalidStatus, message: "\(name): \(error)", underlying: error)
        }
        try StatusSignature.verify(root, trustedKeys: keys, now: Date(), name: name)
        guard status.integrity?.treeDigest != nil, status.integrity?.archive != nil else {
            throw SyncError(code: .integrity,
                            message: "\(name) is signed but carries no integrity data, so its lists and archive are not tied to the signature; refusing it")
        }
        if let highest = try await store.syncState()?.highestAcceptedVersion.flatMap({ try? CacheVersion($0) }), status.actualVersion < highest {
            throw SyncError(code: .integrity,
                            message: "\(name) is signed for \(status.actualVersion), below \(highest) which this client already accepted: a rollback; refusing it")
        }
        return true
    }

    /// Fetches the change lists that may lie between `local` and `actual`, a few at a time, in
    /// list order. A list the storage no longer has (404) is skipped: the chain resolution then
    /// decides whether it was needed.
    func fetchChangeLists(_ entries: [UpdateList.Entry], layout: StorageLayout,
                          integrity: StorageIntegrity?) async throws(SyncError) -> [ChangeList] {
        let results: [Int: ChangeList]
        do {
            results = try await withThrowingTaskGroup(of: (Int, ChangeList?).self) { group in
                var collected: [Int: ChangeList] = [:]
                var next = 0
                func launch(_ group: inout ThrowingTaskGroup<(Int, ChangeList?), any Error>) {
                    guard next < entries.count else { return }
                    let index = next
                    let entry = entries[index]
                    next += 1
                    group.addTask {
                        do {
                            let data = try await self.fetchStorageFile(entry.url, expected: integrity?.changeLists[entry.url])
                            return (index, try ChangeList.parse(data, from: entry.url, layout: layout))
                        } catch let error as SyncError where (error.underlying as? TransportError)?.statusCode == 404 {
                            self.logger.warning("change list is not published", metadata: ["sync.list": "\(entry.url.absoluteString)"])
                            return (index, nil)
                        }
                    }
                }
                for _ in 0..<min(6, entries.count) { launch(&group) }
                while let (index, list) = try await group.next() {
                    if let list { collected[index] = list }
                    launch(&group)
                }
                return collected
            }
        } catch {
            throw SyncError.wrap(error)
        }
        return results.keys.sorted().compactMap { results[$0] }
    }
}
