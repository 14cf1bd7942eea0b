import Archive
import Foundation

/// Builds a storage's next version from a folder: the smallest change list, the update list,
/// a deterministic archive, the status file, and the new content.
///
/// Order matters for a storage that clients read while it is being published: the content, the
/// archive, the change list and the update list are written first, and the status file last, so
/// a client never sees a version whose files are not there yet.
public enum Publisher {
    /// Publishes (blocking: it hashes and archives the whole content).
    public static func publish(_ options: PublishOptions) throws(SyncError) -> PublishReport {
        let storage = SyncConfiguration.absolutePathForCLI(options.storage)
        let content = SyncConfiguration.absolutePathForCLI(options.content)
        let layout = try StorageLayout(baseURL: options.baseURL)
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: content, isDirectory: &isFolder), isFolder.boolValue else {
            throw SyncError(code: .configuration, message: "--content \(content) is not a folder; pass the folder holding the new version")
        }
        if content == storage + "/RXCacheContent" || content.hasPrefix(storage + "/RXCacheContent/") {
            throw SyncError(code: .configuration, message: "--content must not be the storage's own RXCacheContent/; pass a separate folder")
        }
        let newTree = try ContentTree.scan(content)
        if let (first, second) = SafeRelativePath.caseCollision(in: Array(newTree.folders) + Array(newTree.files.keys)) {
            throw SyncError(code: .configuration,
                            message: "\(content): '\(first)' and '\(second)' differ only in case; clients on case-insensitive file systems would see one of them. Rename one")
        }
        let statusPath = storage + "/" + StorageLayout.statusPath

        var fromVersion: CacheVersion?
        var minimal = options.minimal ?? options.version
        var changes: [Change.Kind] = []
        /// New files whose bytes the old version had (new path → old path): their compressed
        /// archive entries are copied.
        var archiveSources: [SafeRelativePath: SafeRelativePath] = [:]
        if options.initialize {
            if FileManager.default.fileExists(atPath: statusPath) {
                throw SyncError(code: .configuration,
                                message: "\(storage) already holds a storage (\(StorageLayout.statusPath) exists); publish a new version without --init")
            }
            changes = []
        } else {
            guard let data = FileManager.default.contents(atPath: statusPath) else {
                throw SyncError(code: .configuration,
                                message: "\(statusPath) not found; create the storage first with `sync-agent publish --init`")
            }
            var readLayout = layout
            let status = try CacheStatus.parse(data, from: layout.statusURL, layout: &readLayout)
            guard options.version > status.actualVersion else {
                throw SyncError(code: .configuration,
                                message: "version \(options.version) is not greater than the storage's current \(status.actualVersion); pass a higher --version")
            }
            fromVersion = status.actualVersion
            minimal = options.minimal ?? status.minimalVersion
            let oldTree = try ContentTree.scan(storage + "/RXCacheContent")
            var oldPathOf: [FileFingerprint: SafeRelativePath] = [:]
            for (path, fingerprint) in oldTree.files.sorted(by: { $0.key < $1.key }) where oldPathOf[fingerprint] == nil {
                oldPathOf[fingerprint] = path
            }
            for (path, fingerprint) in newTree.files {
                archiveSources[path] = oldTree.files[path] == fingerprint ? path : oldPathOf[fingerprint]
            }
            do {
                changes = try ChangeDiffer.diff(from: oldTree, to: newTree)
            } catch {
                throw SyncError(code: .invalidChangeList, message: "\(content): \(error)", underlying: error)
            }
        }
        guard minimal <= options.version else {
            throw SyncError(code: .configuration,
                            message: "--minimal \(minimal) is greater than --version \(options.version); the minimal version cannot be above the actual one")
        }

        let contentBytes = newTree.files.values.reduce(Int64(0)) { $0 + $1.size }
        var report = PublishReport(fromVersion: fromVersion, toVersion: options.version, minimalVersion: minimal, changes: changes,
                                   bytesToDownload: downloadBytes(changes, in: newTree), files: newTree.files.count,
                                   folders: newTree.folders.count, contentBytes: contentBytes, archiveBytes: 0, changeListPath: nil)
        if options.dryRun { return report }

        let signer = try options.signingKey.map { (key: String) throws(SyncError) -> StorageWriter.Signer in
            StorageWriter.Signer(key: try StatusSignature.privateKey(base64: key),
                                 expires: Date().addingTimeInterval(Double(options.signatureLifetime.components.seconds)))
        }
        let writer = StorageWriter(root: storage, layout: layout, signer: signer)
        try writer.prepareFolders()
        try writer.replaceContent(with: content)
        (report.archiveBytes, report.reusedArchiveEntries) = try writer.writeArchive(from: content, sources: archiveSources)
        if let fromVersion {
            report.changeListPath = try writer.writeChangeList(from: fromVersion, to: options.version, changes: changes, tree: newTree)
            try writer.appendToUpdateList(report.changeListPath!)
        } else {
            try writer.writeUpdateList([])
        }
        _ = try writer.writeContentManifest(newTree, version: options.version)
        try writer.writeStatus(version: options.version, minimal: minimal, tree: newTree, unzippedBytes: contentBytes)
        return report
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
