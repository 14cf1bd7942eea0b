import Archive
import FileKit
import Foundation
import StorageFormat

/// What `verify` found.
public struct VerifyReport: Sendable, Equatable {
    /// The version compared: the one the storage publishes and the folder holds.
    public var version: CacheVersion
    /// Every difference between the local folder and the published version, one readable line each.
    public var differences: [String]
    /// Paths fixed by `--repair`.
    public var repaired: Int
    /// True when the folder matches the published tree digest (after any repair).
    public var matches: Bool
}

/// The mirror verifier behind `verify`: compares the content folder with the published version
/// byte for byte and, asked to, repairs it through the staging area like any update.
struct MirrorVerifier: Sendable {
    let configuration: SyncConfiguration
    let store: StateStore
    let staging: StagingArea
    let storage: StorageClient
    let stager: Stager
    let switcher: VersionSwitch

    /// Compares the content folder with the storage's published tree digest and manifest, and with
    /// `repair`, fixes the differences: the current tree is hard-linked into the staging area,
    /// repaired there, and swapped in atomically, like any update.
    func verify(repair: Bool) async throws(SyncError) -> VerifyReport {
        let lock = try UpdateLock(
            statePath: store.path, stateFolder: store.folder, contentDirectory: configuration.contentDirectory,
            staging: staging)
        defer { withExtendedLifetime(lock) {} }
        do {
            var report = try await verifyLocked(repair: repair)
            report.differences = report.differences.map(staging.shown)
            return report
        } catch {
            // Named as the operator knows the staging folder, not by the held descriptor.
            throw staging.shown(error)
        }
    }

    /// ``verify(repair:)`` under its lock.
    private func verifyLocked(repair: Bool) async throws(SyncError) -> VerifyReport {
        let recorded = try await store.syncState()?.localVersion
        guard let local = recorded.flatMap({ try? CacheVersion($0) }) else {
            throw SyncError(
                code: .configuration,
                message: recorded == nil
                    ? "\(configuration.contentDirectory) has never been synced; run sync first"
                    : "the state database \(store.path) records a version for \(configuration.contentDirectory) that is not one (a damaged row); run sync, which restores the folder from the archive"
            )
        }
        var layout = try formatWork { () throws(StorageFormatError) in try StorageLayout(baseURL: configuration.baseURL)
        }
        let status = try await storage.fetchStatus(layout: &layout)
        guard status.actualVersion == local else {
            throw SyncError(
                code: .configuration,
                message:
                    "the storage publishes \(status.actualVersion) but \(configuration.contentDirectory) holds \(local); "
                    + "only the published version can be verified: run sync first")
        }
        return try await check(local: local, status: status, layout: layout, repair: repair, cache: nil)
    }

    /// ``verify(repair:)`` with the update lock held and the status fetched: `local` is the
    /// version the status publishes. With `cache` (the fingerprints recorded at the switch),
    /// a file whose identity it knows is taken as recorded instead of read: the periodic full
    /// check of a no-change update (protocol.md §4.5). Without, every file is read.
    ///
    /// A repair reads no byte twice: the tree is hard-linked into the staging area, so its
    /// files keep the identities the scan just hashed (or took from `cache`), and the staged
    /// check trusts those; only what the repair downloads is new. The manifest is fetched once,
    /// and the switch records every file's fingerprint and the tree index, so the next update
    /// reads nothing again either.
    func check(local: CacheVersion, status: CacheStatus, layout: StorageLayout, repair: Bool, cache: FingerprintCache?)
        async throws(SyncError) -> VerifyReport
    {
        guard let integrity = status.integrity, let digest = integrity.treeDigest,
            let manifestURL = integrity.contentManifestURL, integrity.contentManifest != nil
        else {
            // Not the storage's fault (the original format has no such data): this command cannot
            // work with it, so it is a configuration error, not an invalid storage.
            throw SyncError(
                code: .configuration,
                message:
                    "the storage publishes no integrity data (treeDigest and contentManifest), so there is nothing to verify against; republish it with the content-sync publisher to verify mirrors"
            )
        }
        let directory = configuration.contentDirectory
        // Without `cache`, every file is read, and what was read is remembered in the stager's
        // cache (over any row the state database has for the same identity: bit rot that kept
        // the size and time is known by its real bytes), for the repair to trust.
        let remembering = cache ?? stager.fingerprints
        // The digest is seconds of CPU at a million files: on the pool with the scan, never on a
        // cooperative thread (two full checks there held every task of `watch` for seconds).
        let (tree, intruders, matches) = try await BlockingWork.files { () throws(FileSystemError) in
            let (tree, intruders) = try ContentTree.scanLocal(
                directory, cache: remembering, readingEvery: cache == nil, unreadableIsDrift: true)
            return (tree, intruders, intruders.isEmpty && TreeDigest.digest(of: tree) == digest)
        }
        if matches {
            return VerifyReport(version: local, differences: [], repaired: 0, matches: true)
        }
        guard let manifest = try await storage.fetchManifest(integrity) else {
            throw SyncError(
                code: .invalidStatus, message: "\(manifestURL.lastPathComponent) vanished from the integrity data")
        }
        let (consistent, differences) = try await BlockingWork.run { () throws(SyncError) in
            (
                TreeDigest.digest(of: manifest) == digest,
                Self.differences(local: tree, intruders: intruders, published: manifest)
            )
        }
        // A manifest that is not the tree the digest vouches for would name correct files as
        // different (and its repair is refused): the storage's fault, said as such.
        guard consistent else {
            throw SyncError(
                code: .integrity,
                message:
                    "the storage is inconsistent: its content manifest (\(manifestURL.lastPathComponent)) contradicts the published tree digest, so \(directory) cannot be compared with it; republish the storage"
            )
        }
        guard repair else { return VerifyReport(version: local, differences: differences, repaired: 0, matches: false) }

        let started = Date()
        let staging = self.staging
        // A repair keeps no twin: it is forgotten before its folder goes.
        try await store.dropTwin()
        try await BlockingWork.files { () throws(FileSystemError) in
            try staging.resetNext(includingDownloads: true)
            for folder in tree.folders.sorted() { try FileSystem.makeFolder(folder.absolute(in: staging.next)) }
            // From the content folder held open, never through a link: a folder of it swapped
            // for a link to elsewhere since the scan (the folder itself too) fails the repair
            // instead of having the staged tree share files with what the link leads to.
            let live = try HeldFolder.content(directory)
            do throws(FileSystemError) {
                try FileSystem.linkOrCopy(
                    tree.files.keys.sorted().lazy.map { ($0.absolute(in: live.path), $0.absolute(in: staging.next)) })
            } catch {
                throw live.shown(error)
            }
        }
        try await store.beginPlan(
            PendingPlanRecord(
                identity: "repair:\(local.text)", kind: "repair", fromVersion: local.text,
                toVersion: local.text, phase: .staging, createdAt: started))
        let repaired: Int
        let index: IndexUpdate
        switch try await stager.checkTree(integrity, layout: layout, loadingStored: cache != nil, manifest: manifest) {
        case .matches(let count, let checked):
            repaired = count
            index = checked.map(IndexUpdate.whole) ?? .drop
        case .unrepairable(let reason):
            try await store.clearPlan()
            var refusal = SyncError(
                code: .integrity,
                message:
                    "the local folder cannot be repaired file by file (\(reason)); reset the state and sync again, or republish the storage"
            )
            refusal.remedy = .reset
            throw refusal
        }
        // Intruders are not linked into the staged copy: the switch leaves them behind with the old
        // tree. An unreadable file was downloaded again (counted in `repaired`) as well.
        let fixed = repaired + intruders.count { $0.kind != .unreadable }
        var pending = switcher.pending(.repair, from: local, to: local)
        pending.filesDownloaded = fixed
        try await switcher.switchTo(
            pending,
            history: UpdateHistoryEntry(
                startedAt: started, finishedAt: Date(), fromVersion: local.text, toVersion: local.text, kind: .repair,
                outcome: .succeeded, filesDownloaded: fixed), index: index, liveFolders: index.folders, fullCheck: true,
            progress: { _ in })
        return VerifyReport(version: local, differences: differences, repaired: fixed, matches: true)
    }

    /// Every way the local tree differs from the published one, one readable line each: extra,
    /// missing and different files and folders, a file where a folder belongs and the reverse,
    /// and every entry that cannot be content at all (with its real name, escaped).
    static func differences(local tree: ContentTree, intruders: [Intruder], published manifest: ContentTree) -> [String]
    {
        var differences: [String] = []
        // A published file that cannot be read is said once, as such, not also as missing.
        let unreadable = Set(intruders.lazy.filter { $0.kind == .unreadable }.map(\.shownPath))
        for (path, fingerprint) in manifest.files.sorted(by: { $0.key < $1.key }) {
            if unreadable.contains(path.string) { continue }
            if let have = tree.files[path] {
                if have != fingerprint {
                    differences.append("different file \(path) (\(have.size) bytes, expected \(fingerprint.size))")
                }
            } else if tree.folders.contains(path) {
                differences.append("a folder where a file belongs: \(path)")
            } else {
                differences.append("missing file \(path)")
            }
        }
        for path in tree.files.keys.sorted() where manifest.files[path] == nil {
            differences.append(
                manifest.folders.contains(path) ? "a file where a folder belongs: \(path)" : "extra file \(path)")
        }
        for folder in manifest.folders.subtracting(tree.folders).sorted() where tree.files[folder] == nil {
            differences.append("missing folder \(folder)")
        }
        for folder in tree.folders.subtracting(manifest.folders).sorted() where manifest.files[folder] == nil {
            differences.append("extra folder \(folder)")
        }
        for intruder in intruders {
            differences.append(intruder.kind == .unreadable ? "\(intruder)" : "extra \(intruder)")
        }
        return differences
    }
}
