import Archive
import FileKit
import Foundation
import StorageFormat

/// Builds a storage's next version from a folder: the smallest change list, the update list,
/// a deterministic archive, the status file, and the new content.
///
/// A publish survives being killed anywhere, and keeps off other publishes of the same storage:
/// 1. It takes an exclusive `flock` on the storage folder (`PublishLock`) or fails at once.
/// 2. It finishes or undoes an interrupted publish it finds (`Publisher+Recovery.swift`).
/// 3. It builds every new file in `<storage>/.content-sync-publish/stage/` (`PublishWorkFolder`),
///    from one snapshot copy of `--content`, and journals the install (`PublishJournal`).
/// 4. It installs (`PublishInstaller`): change list, update list, content manifest, archive,
///    the content folder (an atomic swap), and `cacheStatus.json` last: the commit point.
/// 5. It deletes the work folder.
/// 6. With an uploader, it hands the storage over in ``StorageUploadStep/order``, still locked.
/// Clients read the status first, so until the last rename they see the previous version.
public enum Publisher {
    /// Publishes (blocking: it copies, hashes and archives the whole content).
    public static func publish(_ options: PublishOptions) throws(PublishError) -> PublishReport {
        let paths = PublishPaths(storage: options.storage, content: options.content)
        // A base URL the layout refuses is a bad option value (the same exit as a sync's), not a bad storage.
        let layout: StorageLayout
        do { layout = try StorageLayout(baseURL: options.baseURL) } catch {
            throw PublishError(code: .configuration, message: error.message, underlying: error, option: .baseURL)
        }
        // The base URL is written into the storage's files, which every client reads.
        if options.baseURL.user != nil || options.baseURL.password != nil {
            throw PublishError(
                code: .configuration,
                message:
                    "the base URL has a user or password (not shown here), which would be written into the "
                    + "storage's public files (\(StorageLayout.statusPath), the lists); pass the URL without it (clients "
                    + "give their credentials themselves)",
                option: .baseURL)
        }
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: paths.content, isDirectory: &isFolder), isFolder.boolValue else {
            throw PublishError(
                code: .configuration,
                message: "the content folder \(paths.content) is not a folder; pass the folder holding the new version",
                option: .content)
        }
        try paths.checkLayout()
        let signer = try options.signingKey.map { (key: String) throws(PublishError) -> StorageWriter.Signer in
            // Fractions of a second count (the expiry is written rounded up to a whole one). A
            // lifetime of zero or less is the caller's to choose (tests make expired statuses).
            let (seconds, fraction) = options.signatureLifetime.components
            let lifetime = Double(seconds) + Double(fraction) / 1e18
            return StorageWriter.Signer(
                key: try SigningKey(fileText: key), expires: Date().addingTimeInterval(lifetime))
        }
        let storageExists = FileSystem.exists(paths.storage)
        // The folders --init creates, outermost first: removed again (when still empty) if the
        // publish is refused, so a refusal writes nothing.
        var created: [String] = []
        var finished = false
        defer {
            if !finished { for folder in created.reversed() { rmdir(folder) } }
        }
        if !storageExists {
            guard options.initialize else { throw Self.noStorage(paths) }
            if !options.dryRun {
                var folder = paths.storage
                while !folder.isEmpty, folder != "/", !FileSystem.exists(folder) {
                    created.insert(folder, at: 0)
                    folder = (folder as NSString).deletingLastPathComponent
                }
                // Folder by folder, with the system's words ("Permission denied"), not Foundation's.
                for folder in created {
                    do throws(FileSystemError) {
                        try FileSystem.makeFolder(folder)
                    } catch {
                        throw PublishError(
                            code: .fileSystem,
                            message: "cannot create the storage folder \(paths.storage): \(error)", underlying: error)
                    }
                }
            }
        }
        // A dry run of --init on a folder that does not exist yet reads nothing and locks nothing.
        let lock = storageExists || !options.dryRun ? try PublishLock(storage: paths.storage) : nil
        defer { withExtendedLifetime(lock) {} }
        if storageExists { try refuseWrongKindsAtOwnPaths(paths) }
        let run = PublishRun(hook: options.checkpoint, exchangeUnsupported: options.exchangeUnsupported)

        var recovery: PublishRecovery?
        var leftovers: [String] = []
        if options.dryRun {
            if lock != nil { try refuseDryRunOverInterruptedPublish(paths) }
        } else {
            (recovery, leftovers) = try recover(paths, run: run)
        }
        var report: PublishReport
        do {
            report = try publishLocked(options, paths: paths, layout: layout, signer: signer, lock: lock, run: run)
        } catch {
            // What recovery did stays true when the publish itself is refused: say it.
            guard let recovery, !run.killed else { throw error }
            throw PublishError(
                code: error.code, message: "\(error.message) (before that, recovery: \(recovery))",
                underlying: error.underlying)
        }
        report.recovery = recovery
        report.removedLeftovers = leftovers
        if let uploader = options.uploader, !options.dryRun {
            do {
                try upload(report.toVersion, of: paths.storage, with: uploader)
            } catch {
                var failure = error
                failure.report = report
                throw failure
            }
            report.uploaded = true
        }
        finished = true
        return report
    }

    /// Hands the storage to `uploader` step by step, still under the lock; a step that fails
    /// stops the upload before the status goes, so the remote keeps showing its previous version.
    private static func upload(_ version: CacheVersion, of storage: String, with uploader: any StorageUploading)
        throws(PublishError)
    {
        let steps = StorageUploadStep.order
        for step in steps {
            do {
                try uploader.upload(step, from: storage)
            } catch {
                let remote =
                    step.kind == .status
                    ? "the remote's \(StorageLayout.statusPath) is the previous one unless the failed copy replaced it"
                    : "\(StorageLayout.statusPath) was not uploaded, so clients still see the remote's previous version"
                throw PublishError(
                    code: .upload,
                    message: "uploading \(step) failed (step \(step.number) of \(steps.count)): \(error); \(remote). "
                        + "\(storage) holds \(version): run the same publish again to upload it",
                    underlying: error)
            }
        }
    }

    /// Everything after the lock and the recovery.
    private static func publishLocked(
        _ options: PublishOptions, paths: PublishPaths, layout: StorageLayout,
        signer: StorageWriter.Signer?, lock: PublishLock?, run: PublishRun
    ) throws(PublishError) -> PublishReport {
        let storage = paths.storage
        let statusPath = storage + "/" + StorageLayout.statusPath
        var phases = PhaseMarks()
        let statusData = FileManager.default.contents(atPath: statusPath)
        var readLayout = layout

        var fromVersion: CacheVersion?
        var minimal = options.minimal ?? options.version
        var expectedOldDigest: String?
        var previousArchive: FileFingerprint?
        var previousSignatureKeyID: String?
        var previousStatusVerified = false
        // The published change lists checked against the status (by storage path): the new
        // status vouches for these fingerprints, not for a second reading of the files.
        var checkedLists: [String: FileFingerprint] = [:]
        var previousURLsOutsideBase: [URL] = []
        var previousBase: URL?
        var requestedMinimal: CacheVersion?
        if options.initialize {
            if let statusData {
                if let status = try? CacheStatus.parse(statusData, from: layout.statusURL, layout: &readLayout),
                    let done = try alreadyPublished(
                        status, layout: layout, readLayout: readLayout, options: options, floor: nil, paths: paths)
                {
                    return done
                }
                throw PublishError(
                    code: .configuration,
                    message:
                        "\(storage) already holds a storage (\(StorageLayout.statusPath) exists); publish a new version of it instead of creating one",
                    option: .initialize)
            }
            // Without a status, entries a storage would hold are someone's files (a killed --init
            // was rolled back when the lock was taken): --init would replace them. Other files (a
            // README, .git) stay, as in any storage.
            let found =
                ["RXCacheContent", "RXCacheContent.zip"].filter { FileSystem.exists(storage + "/" + $0) }
                + ((try? FileManager.default.contentsOfDirectory(atPath: storage + "/RXCacheConfig")) ?? []).map {
                    "RXCacheConfig/" + $0
                }
            if !found.isEmpty {
                throw PublishError(
                    code: .configuration,
                    message:
                        "\(storage) holds \(found.sorted().joined(separator: ", ")) but no \(StorageLayout.statusPath): initializing would replace them; move them aside (or delete them) and run it again",
                    option: .initialize)
            }
        } else {
            guard let statusData else { throw Self.noStorage(paths) }
            let status = try formatWork { () throws(StorageFormatError) in
                try CacheStatus.parse(statusData, from: layout.statusURL, layout: &readLayout)
            }
            // A moved storage publishes on under the new base; clients that would replay lists
            // published under another base restore instead (Publisher+BaseURL.swift).
            previousBase = readLayout.publishedBase.flatMap {
                StorageLayout.normalized($0) != StorageLayout.normalized(layout.baseURL) ? $0 : nil
            }
            let floor = try minimalFloor(
                storage: storage, layout: layout, moved: previousBase != nil, current: status.actualVersion)
            if var done = try alreadyPublished(
                status, layout: layout, readLayout: readLayout, options: options, floor: floor, paths: paths)
            {
                if let signer {
                    try resign(statusData, at: statusPath, with: signer, dryRun: options.dryRun, in: &done)
                }
                return done
            }
            guard options.version > status.actualVersion else {
                let same =
                    options.version == status.actualVersion
                    ? " (it was published with other content, minimal version or base URL)" : ""
                throw PublishError(
                    code: .configuration,
                    message:
                        "version \(options.version) is not greater than the storage's current \(status.actualVersion)\(same); pass a higher version",
                    option: .version)
            }
            fromVersion = status.actualVersion
            let asked = options.minimal ?? status.minimalVersion
            minimal = floor.map { max(asked, $0) } ?? asked
            if minimal != asked { requestedMinimal = asked }
            expectedOldDigest = status.integrity?.treeDigest
            previousArchive = status.integrity?.archive
            if let signer {
                previousStatusVerified = try checkOwnSignature(of: statusData, at: statusPath, signer: signer)
            }
            checkedLists = try checkPublishedLists(status.integrity, storage: storage, version: status.actualVersion)
            previousSignatureKeyID = signatureKeyID(ofStatus: statusData)
            // URLs under the published base were rebased onto the new one above; what is left
            // outside it comes from a status whose base could not be inferred.
            let newBase = StorageLayout.normalized(layout.baseURL)
            previousURLsOutsideBase = [status.updateListURL, status.archiveURL].filter {
                !StorageLayout.normalized($0).hasPrefix(newBase)
            }
        }
        func noted(_ report: PublishReport) -> PublishReport {
            var report = report
            report.previousSignatureKeyID = previousSignatureKeyID
            report.previousStatusVerified = previousStatusVerified
            report.signatureKeyID = signer?.key.keyID
            report.previousURLsOutsideBase = previousURLsOutsideBase
            report.previousBaseURL = previousBase
            report.requestedMinimalVersion = requestedMinimal
            return report
        }
        guard minimal <= options.version else {
            throw PublishError(
                code: .configuration,
                message:
                    "the minimal version \(minimal) is greater than the new version \(options.version); the minimal version cannot be above the actual one",
                option: .minimal)
        }
        if let fromVersion {
            let relative = StorageWriter.changeListPath(from: fromVersion, to: options.version)
            // A file name holds 255 bytes, its temporary name (`.tmp-PID-N`) up to 32 more: a
            // long version passed every check, then failed at the very end with exit 5.
            let name = (relative as NSString).lastPathComponent
            if name.utf8.count + 32 > 255 {
                throw PublishError(
                    code: .configuration,
                    message:
                        "version \(options.version) is too long: its change list's file name \(name.prefix(40))… would be \(name.utf8.count) bytes, and a file name holds 255 with room for a temporary name; use a shorter version",
                    option: .version)
            }
            if FileSystem.exists(storage + "/" + relative) {
                throw PublishError(
                    code: .configuration,
                    message:
                        "\(relative) already exists; a published change list is never rewritten. If no status ever published \(options.version) (an older publisher's interrupted publish left it), delete it and run again"
                )
            }
        }

        // What the previous version's scan hashed, by inode: the snapshot's scan reads again only
        // the files it did not link from there. The previous publish's index spares hashing the
        // published files it recorded, unchanged since (same stamp).
        let fingerprints = FingerprintCache()
        let base = PublishBase(storage: storage)
        let index = fromVersion == nil ? PublishIndex() : base.loadIndex()
        let published = StampLedger(known: index.entries)
        let expectedDigest = expectedOldDigest
        /// The published tree, checked against the digest its status publishes, and its folder
        /// digests: the new tree's digest takes those of the folders the change leaves alone
        /// (TreeDelta).
        typealias Checked = (tree: ContentTree, digests: [SafeRelativePath: String])
        func checkPublished(_ fromVersion: CacheVersion) throws(PublishError) -> Checked {
            let tree = try ContentTree.scan(storage + "/RXCacheContent", cache: fingerprints, ledger: published)
            let digests = TreeDigest.folderDigests(of: tree)
            if let expectedDigest, digests[.root] != expectedDigest {
                throw PublishError(
                    code: .configuration,
                    message:
                        "\(storage)/RXCacheContent/ does not match the treeDigest that \(StorageLayout.statusPath) publishes for \(fromVersion): it was changed outside publish, or an older publisher's publish was interrupted. A change list from it would not lead clients from \(fromVersion); put \(fromVersion)'s content back in RXCacheContent/ and run again"
                )
            }
            return (tree, digests)
        }
        var oldTree: ContentTree?
        var oldDigests: [SafeRelativePath: String] = [:]
        // With the previous publish's index, the snapshot needs nothing of this check (it reads
        // the stamps of the published files it links itself), so the check runs beside it, on the
        // other core, and is waited for before anything uses the old tree or the storage changes.
        // Without one (or in a dry run) it comes first: the snapshot takes the fingerprints it
        // found.
        var besideCheck: BesideJob<Checked>?
        if let fromVersion {
            if options.dryRun || index.entries.isEmpty {
                let checked = try checkPublished(fromVersion)
                (oldTree, oldDigests) = (checked.tree, checked.digests)
                phases.mark("check the published tree")
            } else {
                besideCheck = BesideJob(name: "publish.check") { () throws(PublishError) in
                    try checkPublished(fromVersion)
                }
            }
        }

        if options.dryRun {
            let newTree = try checkedScan(paths.content, shownAs: paths.content)
            phases.mark("scan the content folder")
            let delta = oldTree.map { TreeDelta(from: $0, to: newTree) }
            let changes = try diff(from: oldTree, to: newTree, delta: delta, content: paths.content)
            phases.mark("diff")
            var dry = noted(report(options, from: fromVersion, minimal: minimal, changes: changes, tree: newTree))
            dry.phases = phases.timings
            return dry
        }
        guard lock != nil else { preconditionFailure("a publish that writes holds the lock") }

        // Stage: nothing in the storage changes until the journal says "installing".
        var work = PublishWorkFolder(storage: storage)
        var journal = PublishJournal(
            phase: .staging, pid: getpid(), fromVersion: fromVersion?.text,
            toVersion: options.version.text, minimalVersion: minimal.text)
        var result: PublishReport
        var nextIndex = PublishIndex()
        var twinMade = false
        var sources: [String: [UInt8]] = [:]
        var publishedTree = ContentTree(folders: [], files: [:])
        do throws(PublishError) {
            try run.checkpoint(.staging, "create the work folder")
            try work.create()
            try work.writeJournal(journal, durable: false)
            // Created first: every staged path goes through the held work folder.
            let writer = StorageWriter(root: storage, stage: work.stage, layout: layout, signer: signer)
            try run.checkpoint(.staging, "snapshot the content folder")
            let snapshot = work.staged("RXCacheContent")
            // Files unchanged since the previous version are linked from it (each with the stamp
            // its index recorded, or compared byte for byte), the rest copied; into the retired
            // version the last publish kept, caught up, when there is one (PublishBase).
            let reusing = fromVersion != nil && base.takeRetired(to: snapshot)
            let started = Date().timeIntervalSince1970
            // The snapshot's tree is noted as it is made; a scan of it is needed only when the
            // notes cannot vouch for something (then the scan names the problem).
            let notes = ContentSnapshot.TreeNotes(fingerprints: fingerprints, expectedFiles: index.entries.count)
            let snapshotted = try ContentSnapshot.copy(
                paths.content, to: snapshot, previous: fromVersion == nil ? nil : storage + "/RXCacheContent",
                reusing: reusing, index: index, notes: notes)
            phases.mark(
                (reusing
                    ? "snapshot the content folder (catching up the retired version)" : "snapshot the content folder")
                    + (besideCheck == nil ? "" : ", the published tree checked beside it"))
            if let besideCheck {
                let checked = try besideCheck.value()
                (oldTree, oldDigests) = (checked.tree, checked.digests)
                phases.mark("check the published tree (what was left of it)")
            }
            let newTree: ContentTree
            let stamps: [String: FileStamp]
            if notes.complete {
                newTree = try checkedTree(notes.tree, shownAs: paths.content)
                stamps = notes.stamps
            } else {
                let ledger = StampLedger()
                newTree = try checkedScan(snapshot, shownAs: paths.content, cache: fingerprints, ledger: ledger)
                stamps = ledger.seen
                phases.mark("scan the snapshot")
            }
            sources = snapshotted.sources
            publishedTree = newTree
            if oldTree == nil {
                // A publish over nothing replaces no version to retire: a twin of the snapshot, made
                // now so that its links have settled when the index is verified at the end, is the
                // retired tree the next publish catches up (instead of linking every file anew).
                do throws(FileSystemError) {
                    try PublishBase.linkTree(snapshot, to: work.twin)
                    twinMade = true
                } catch {
                    try? TreeRemoval.remove(work.twin)
                }
                phases.mark("link a twin of the snapshot")
            }
            try run.checkpoint(.staging, "build the archive")
            // The archive needs nothing of the diff, change list and manifest, nor they of it: it
            // is built beside them, and waited for before the status (which names its digest).
            let archive = BesideJob(name: "publish.archive") { () throws(PublishError) in
                try writer.writeArchive(
                    from: snapshot, sources: archiveSources(from: oldTree, to: newTree), tree: newTree,
                    previousArchive: previousArchive)
            }
            let newDigest: String
            do throws(PublishError) {
                nextIndex = PublishIndex(
                    newTree, stamps: stamps, sources: snapshotted.sources,
                    settledBefore: Int64((started - 2) * 1_000_000_000))
                let delta = oldTree.map { TreeDelta(from: $0, to: newTree) }
                let changes = try diff(from: oldTree, to: newTree, delta: delta, content: paths.content)
                phases.mark("diff (the archive is built beside it)")
                result = noted(report(options, from: fromVersion, minimal: minimal, changes: changes, tree: newTree))
                result.linkedContentFiles = snapshotted.linkedFiles
                result.keptContentFiles = snapshotted.keptFiles
                result.indexedContentFiles = published.matched

                try run.checkpoint(.staging, "write the change list, update list, content manifest and status")
                if let fromVersion {
                    let listPath = try writer.writeChangeList(
                        from: fromVersion, to: options.version, changes: changes, tree: newTree)
                    try writer.appendToUpdateList(listPath)
                    result.changeListPath = listPath
                } else {
                    try writer.writeUpdateList([])
                }
                newDigest =
                    delta.map { TreeDigest.digest(of: newTree, reusing: oldDigests, delta: $0) }
                    ?? TreeDigest.digest(of: newTree)
                _ = try writer.writeContentManifest(newTree, version: options.version, treeDigest: newDigest)
                phases.mark("change list, update list, manifest")
            } catch {
                _ = try? archive.value()
                throw error
            }
            (result.archiveBytes, result.reusedArchiveEntries) = try archive.value()
            phases.mark("archive (what was left of it)")
            let status = try writer.writeStatus(
                version: options.version, minimal: minimal, treeDigest: newDigest, unzippedBytes: result.contentBytes,
                checkedLists: checkedLists)

            journal.phase = .installing
            journal.treeDigest = newDigest
            journal.statusSHA256 = FileDigest.sha256(status)
            journal.content = FileSystem.identity(of: snapshot).map {
                PublishJournal.Identity(device: $0.device, inode: $0.inode)
            }
            journal.createdFolders = ["RXCacheConfig", "RXCacheConfig/HistoryOfVersions"].filter {
                !FileSystem.exists(storage + "/" + $0)
            }
            journal.steps = installSteps(storage: storage, changeList: result.changeListPath)
            try run.checkpoint(.staging, "write the install journal")
            try work.writeJournal(journal, durable: false)
            phases.mark("status and journal")
            // One flush for every staged byte and the journal: durability once per version.
            try fileWork { () throws(FileSystemError) in try DiskFlush.filesystem(holding: storage) }
            phases.mark("flush")
            // The install and a later recovery find the journal by the work folder's name.
            guard work.isInPlace else {
                throw PublishError(
                    code: .invalidStorage,
                    message:
                        "\(work.shownRoot) was moved or replaced while the publish staged in it (someone else renamed entries of the storage); nothing was installed: delete what stands at that name now, then publish again"
                )
            }
        } catch {
            var reported = work.shown(error)
            // The check beside the snapshot is waited for on every path; when it failed, its
            // finding is the one to report (alone, it would have come first).
            do throws(PublishError) {
                _ = try besideCheck?.value()
            } catch let found {
                if !run.killed { reported = found }
            }
            // Only a work folder this publish made and holds is undone: what stands at the name
            // after a failed creation is someone else's.
            if !run.killed, work.held != nil {
                if fromVersion != nil { base.giveBack(work.staged("RXCacheContent")) }
                try? work.remove()
            }
            throw reported
        }

        let installer = PublishInstaller(work: work, journal: journal, run: run)
        do {
            try installer.install()
        } catch {
            if run.killed { throw error }
            let error = work.shown(error)
            let previous = fromVersion.map { "\($0)" } ?? "empty"
            do {
                try installer.rollBack()
                try work.remove()
            } catch let undo {
                if run.killed { throw undo }
                let undo = work.shown(undo)
                throw PublishError(
                    code: error.code,
                    message:
                        "\(error.message); rolling back failed too (\(undo.message)): run the same publish again to finish the rollback",
                    underlying: error)
            }
            throw PublishError(
                code: error.code, message: "\(error.message); rolled back, the storage is \(previous) again",
                underlying: error.underlying)
        }
        phases.mark("install")
        // Committed. A run killed from here on is finished by the next one.
        do {
            try run.checkpoint(.cleanup, "keep the replaced version and the index for the next publish")
            if fromVersion == nil {
                if twinMade {
                    nextIndex = verifiedIndex(storage + "/RXCacheContent", of: publishedTree, sources: sources)
                }
                base.keep(previous: twinMade ? work.twin : nil, index: nextIndex)
            } else {
                base.keep(previous: work.staged("RXCacheContent"), index: nextIndex)
            }
            phases.mark("keep the retired version and the index")
            try run.checkpoint(.cleanup, "delete the work folder")
            try work.remove()
            phases.mark("delete the work folder")
        } catch {
            if run.killed { throw error }
            let error = work.shown(error)
            throw PublishError(
                code: error.code,
                message: "published \(options.version), but \(error.message); the next publish deletes the work folder",
                underlying: error)
        }
        result.phases = phases.timings
        return result
    }

    /// The time since the last mark, by step.
    private struct PhaseMarks {
        private var last = ContinuousClock.now
        private(set) var timings: [PublishPhaseTiming] = []

        mutating func mark(_ name: String) {
            let now = ContinuousClock.now
            let elapsed = last.duration(to: now)
            timings.append(
                PublishPhaseTiming(
                    name: name,
                    seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18))
            last = now
        }
    }

    /// The install order. Readers keep a valid storage as long as possible: the change list is
    /// new (nothing names it yet), the status is last.
    private static func installSteps(storage: String, changeList: String?) -> [PublishJournal.Step] {
        var steps: [PublishJournal.Step] = []
        if let changeList { steps.append(.init(path: changeList, existed: false)) }
        for path in [StorageLayout.updateListPath, StorageWriter.contentManifestPath, StorageWriter.archivePath] {
            steps.append(.init(path: path, existed: FileSystem.exists(storage + "/" + path)))
        }
        steps.append(
            .init(path: "RXCacheContent", existed: FileSystem.exists(storage + "/RXCacheContent"), isFolder: true))
        steps.append(
            .init(path: StorageLayout.statusPath, existed: FileSystem.exists(storage + "/" + StorageLayout.statusPath)))
        return steps
    }

    /// Scans a content folder and refuses names a storage cannot carry. Messages name the
    /// folder as the user gave it (`shownAs`), not the snapshot.
    private static func checkedScan(
        _ folder: String, shownAs content: String, cache: FingerprintCache? = nil, ledger: StampLedger? = nil
    ) throws(PublishError) -> ContentTree {
        let tree: ContentTree
        do {
            tree = try ContentTree.scan(folder, cache: cache, ledger: ledger)
        } catch {
            guard folder != content else { throw error }
            throw PublishError(
                code: error.code, message: error.message.replacingOccurrences(of: folder, with: content),
                underlying: error.underlying)
        }
        return try checkedTree(tree, shownAs: content)
    }

    /// Refuses a tree whose paths differ only in case.
    private static func checkedTree(_ tree: ContentTree, shownAs content: String) throws(PublishError) -> ContentTree {
        if let (first, second) = SafeRelativePath.caseCollision(in: Array(tree.folders) + Array(tree.files.keys)) {
            throw PublishError(
                code: .configuration,
                message:
                    "\(content): '\(first)' and '\(second)' differ only in case; clients on case-insensitive file systems would see one of them. Rename one"
            )
        }
        return tree
    }

    private static func diff(
        from oldTree: ContentTree?, to newTree: ContentTree, delta: TreeDelta?, content: String
    ) throws(PublishError) -> [Change.Kind] {
        guard let oldTree, let delta else { return [] }
        if let (old, new) = respelling(from: oldTree, to: newTree) {
            throw PublishError(
                code: .configuration,
                message:
                    "\(content): '\(new)' is the published '\(old)' in another Unicode normalization (NFC and NFD spell "
                    + "it with other bytes); clients compare names canonically, so they would keep the old spelling "
                    + "while the storage serves the new one, and a later change of it would fail for them. Rename it "
                    + "back, or to another name")
        }
        do {
            return try ChangeDiffer.diff(from: oldTree, to: newTree, delta: delta)
        } catch {
            throw PublishError(code: .invalidContent, message: "\(content): \(error)", underlying: error)
        }
    }

    /// A path of `new` that `old` holds spelled with other bytes (canonically equal: another
    /// Unicode normalization), with the old spelling first; nil when every kept path keeps its
    /// bytes. One hashed lookup a path.
    static func respelling(from old: ContentTree, to new: ContentTree) -> (SafeRelativePath, SafeRelativePath)? {
        for path in new.files.keys {
            if let index = old.files.index(forKey: path),
                !old.files[index].key.string.utf8.elementsEqual(path.string.utf8)
            {
                return (old.files[index].key, path)
            }
        }
        for folder in new.folders {
            if let index = old.folders.firstIndex(of: folder),
                !old.folders[index].string.utf8.elementsEqual(folder.string.utf8)
            {
                return (old.folders[index], folder)
            }
        }
        return nil
    }

    /// The index of the published tree at `folder`, read back after a publish over nothing, whose
    /// files this run wrote or linked (so none is recorded as settled): each file whose bytes are
    /// still `tree`'s, hashed now, is recorded with the stamp read before hashing it when that
    /// stamp had settled (changed 2 s or more before this reading began; the twin's links were
    /// made before the archive was built). Without it the next publish would hash every file of
    /// the tree again. Empty when the tree cannot be read whole: a shortcut missed, nothing else.
    static func verifiedIndex(_ folder: String, of tree: ContentTree, sources: [String: [UInt8]])
        -> PublishIndex
    {
        let started = Date().timeIntervalSince1970
        let ledger = StampLedger()
        // No fingerprint cache: every file is read, after its stamp settled.
        guard let read = try? ContentTree.scan(folder, cache: nil, ledger: ledger) else { return PublishIndex() }
        var agreeing = ContentTree(folders: [], files: [:])
        for (path, fingerprint) in read.files where tree.files[path] == fingerprint {
            agreeing.files[path] = fingerprint
        }
        return PublishIndex(
            agreeing, stamps: ledger.seen, sources: sources, settledBefore: Int64((started - 2) * 1_000_000_000))
    }

    /// New files whose bytes the old version had (new path → old path): their compressed
    /// archive entries are copied.
    private static func archiveSources(from oldTree: ContentTree?, to newTree: ContentTree) -> [SafeRelativePath:
        SafeRelativePath]
    {
        guard let oldTree else { return [:] }
        var sources: [SafeRelativePath: SafeRelativePath] = [:]
        sources.reserveCapacity(newTree.files.count)
        var elsewhere: [FileFingerprint: SafeRelativePath?] = [:]
        for (path, fingerprint) in newTree.files {
            if oldTree.files[path] == fingerprint {
                sources[path] = path
            } else {
                elsewhere[fingerprint] = .some(nil)
            }
        }
        guard !elsewhere.isEmpty else { return sources }
        // The first old path in path order holding the bytes of a file that is not where it was.
        for (path, fingerprint) in oldTree.files {
            guard let found = elsewhere[fingerprint] else { continue }
            if let found, found < path { continue }
            elsewhere[fingerprint] = .some(path)
        }
        for (path, fingerprint) in newTree.files where sources[path] == nil {
            if case .some(.some(let old)) = elsewhere[fingerprint] { sources[path] = old }
        }
        return sources
    }

    private static func report(
        _ options: PublishOptions, from: CacheVersion?, minimal: CacheVersion, changes: [Change.Kind],
        tree: ContentTree
    ) -> PublishReport {
        PublishReport(
            fromVersion: from, toVersion: options.version, minimalVersion: minimal, changes: changes,
            bytesToDownload: downloadBytes(changes, in: tree), files: tree.files.count, folders: tree.folders.count,
            contentBytes: tree.files.values.reduce(Int64(0)) { $0 + $1.size }, archiveBytes: 0, changeListPath: nil)
    }

    /// The storage already publishes `options.version` with the same content (tree digest),
    /// minimal version (raised to `floor`, as the publish raised it) and base URL: a re-run of a
    /// publish that completed, perhaps one that recovery just finished. Returns the report to
    /// give, or nil when this is not that case.
    private static func alreadyPublished(
        _ status: CacheStatus, layout: StorageLayout, readLayout: StorageLayout, options: PublishOptions,
        floor: CacheVersion?, paths: PublishPaths
    ) throws(PublishError) -> PublishReport? {
        let asked = options.minimal.map { minimal in floor.map { max(minimal, $0) } ?? minimal }
        guard status.actualVersion == options.version, let digest = status.integrity?.treeDigest,
            asked == nil || asked == status.minimalVersion,
            readLayout.publishedBase.map(StorageLayout.normalized) == StorageLayout.normalized(layout.baseURL)
        else { return nil }
        let tree = try checkedScan(paths.content, shownAs: paths.content)
        guard TreeDigest.digest(of: tree) == digest else { return nil }
        var done = report(options, from: nil, minimal: status.minimalVersion, changes: [], tree: tree)
        var info = stat()
        if stat(paths.storage + "/" + StorageWriter.archivePath, &info) == 0 { done.archiveBytes = Int64(info.st_size) }
        done.alreadyPublished = true
        if let minimal = options.minimal, minimal != status.minimalVersion { done.requestedMinimalVersion = minimal }
        return done
    }

    /// Signs the published status `data` (at `path`) again with `signer`, replacing any
    /// signature it has, so a version whose signature expires (or never had one) is served
    /// signed without a new version: the bytes clients verify are the same status's, with a new
    /// expiry. Written atomically and flushed; a dry run writes nothing.
    private static func resign(
        _ data: Data, at path: String, with signer: StorageWriter.Signer, dryRun: Bool, in report: inout PublishReport
    ) throws(PublishError) {
        let parsed: JSONValue
        do { parsed = try JSONValue.parse(data) } catch {
            throw PublishError(
                code: .invalidStorage, message: "\(path): \(error); cannot sign it again", underlying: error)
        }
        var signed = try signer.key.sign(parsed, expires: signer.expires).canonicalData
        signed.append(0x0A)
        report.previousSignatureKeyID = signatureKeyID(ofStatus: data)
        report.signatureKeyID = signer.key.keyID
        report.resignedUntil = Date(timeIntervalSince1970: signer.expires.timeIntervalSince1970.rounded(.up))
        guard !dryRun else { return }
        try fileWork { () throws(FileSystemError) in try AtomicFile.write(signed, to: path, durability: .full) }
    }

    /// The key id of the signature a status carries (`"unknown"` when it names none); nil when
    /// the status is unsigned.
    static func signatureKeyID(ofStatus data: Data) -> String? {
        guard case .object(let members)? = try? JSONValue.parse(data), let signature = members["signature"] else {
            return nil
        }
        guard case .object(let fields) = signature, case .string(let keyID)? = fields["keyId"] else { return "unknown" }
        return keyID
    }

    /// The storage's own folders, which a publish writes into and deletes in, must be folders
    /// where they are: a symlink at `.content-sync-publish` (git commits one, though the
    /// `.gitignore` line names the folder) had the publish empty the folder it pointed to, and
    /// one at `RXCacheConfig/` had the status written outside the storage. `RXCacheContent` may
    /// be a link to a folder: a publish exchanges the entry itself and never writes through it.
    /// (`.content-sync-publish-base` is the publisher's cache: anything planted there is deleted,
    /// never followed, and the base made again.)
    /// So must its status be a regular file: a folder, FIFO or device there was "not a storage
    /// yet" (which suggested --init), and a FIFO would have blocked the read.
    static func refuseWrongKindsAtOwnPaths(_ paths: PublishPaths) throws(PublishError) {
        let own: [(relative: String, kind: mode_t, linkAllowed: Bool, remedy: String)] = [
            (PublishPaths.workFolderName, S_IFDIR, false, "delete it: a publish creates its work folder itself"),
            ("RXCacheConfig", S_IFDIR, false, "put the folder it points to in its place"),
            ("RXCacheConfig/HistoryOfVersions", S_IFDIR, false, "put the folder it points to in its place"),
            ("RXCacheContent", S_IFDIR, true, "put the storage's content folder in its place"),
            (
                StorageLayout.statusPath, S_IFREG, false,
                "put its cacheStatus.json back (from the storage's copy, e.g. git checkout)"
            ),
        ]
        for entry in own {
            let path = paths.storage + "/" + entry.relative
            var info = stat()
            guard lstat(path, &info) == 0 else { continue }
            var kind = info.st_mode & S_IFMT
            if kind == S_IFLNK, entry.linkAllowed, stat(path, &info) == 0 { kind = info.st_mode & S_IFMT }
            guard kind != entry.kind else { continue }
            let what =
                switch kind {
                case S_IFLNK: "a symlink"
                case S_IFREG: "a file"
                case S_IFDIR: "a folder"
                default: "a FIFO, socket or device"
                }
            let wanted =
                entry.kind == S_IFDIR
                ? "the storage's own folder must be a folder" : "the storage's status must be a regular file"
            throw PublishError(
                code: .invalidStorage,
                message:
                    "\(path) is \(what), but \(wanted) there (a publish never writes through a link or outside the storage): \(entry.remedy), then publish again"
            )
        }
    }

    private static func noStorage(_ paths: PublishPaths) -> PublishError {
        PublishError(
            code: .configuration,
            message:
                "\(paths.storage) is not a storage yet (no \(StorageLayout.statusPath)): publish its first version with PublishOptions.initialize, or name the folder that holds one",
            option: .storage)
    }

    /// Bytes of the files a client one version behind must fetch.
    static func downloadBytes(_ changes: [Change.Kind], in tree: ContentTree) -> Int64 {
        var total: Int64 = 0
        for change in changes {
            switch change {
            case .add(let path), .redownload(_, let path):
                total += tree.files[path]?.size ?? 0
            case .deepRedownload(let folder):
                total += tree.files.filter { $0.key.isWithin(folder) }.reduce(0) { $0 + $1.value.size }
            case .remove, .move:
                break
            }
        }
        return total
    }
}
