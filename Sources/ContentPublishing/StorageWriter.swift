import Archive
import Crypto
import FileKit
import Foundation
import StorageFormat

/// Writes a publish's new files into its work folder's `stage/`, at their storage paths: JSON
/// with sorted keys (the same content gives the same bytes). It reads the storage itself only
/// for what the new version builds on: the previous archive, the update list, the change lists.
struct StorageWriter {
    /// Signs the status file when the publisher was given a key.
    struct Signer {
        var key: SigningKey
        var expires: Date
    }

    /// The storage folder (read only).
    let root: String
    /// Where the new files go (`<work folder>/stage`).
    let stage: String
    let layout: StorageLayout
    var signer: Signer?

    func staged(_ relative: String) -> String { stage + "/" + relative }

    /// Archives `content` deterministically under a top-level `RXCacheContent/`, copying from the
    /// current archive the deflated entries of files whose bytes it holds (`sources`: new path →
    /// old path). Returns its size and the number of entries copied.
    ///
    /// With `tree` (the content's) and `previousArchive` (the size and SHA-256 the previous
    /// status gives its archive), a previous archive that still has them is spliced
    /// (``ZipWriter/splice(folder:to:topLevelFolder:previous:folders:files:unchanged:moved:)``):
    /// its entries for files whose bytes did not change are copied as they are, in runs.
    func writeArchive(
        from content: String, sources: [SafeRelativePath: SafeRelativePath] = [:], tree: ContentTree? = nil,
        previousArchive: FileFingerprint? = nil
    ) throws(PublishError) -> (bytes: Int64, reused: Int) {
        let previous = root + "/" + Self.archivePath
        let path = staged(Self.archivePath)
        var reused: Int?
        do {
            // Entries are copied from the previous archive only while it is the one its status
            // published (the size and SHA-256 its integrity data gives): a damaged one (a flipped
            // byte keeps every recorded CRC and size) or a forged one (bytes made to keep the
            // CRC-32) would otherwise be carried into every later version and sealed with it. A
            // status without integrity data vouches for nothing: the archive is built fresh.
            var trusted = false
            if !sources.isEmpty, let expected = previousArchive {
                trusted = (try? ContentTree.fingerprint(of: previous)) == expected
            }
            do {
                if trusted, let tree {
                    reused = try ZipWriter.splice(
                        folder: content, to: path, topLevelFolder: "RXCacheContent", previous: previous,
                        folders: tree.folders, files: tree.files.keys, unchanged: { sources[$0] == $0 },
                        moved: sources.filter { $0.key != $0.value })
                }
                if reused == nil {
                    reused = try ZipWriter.archive(
                        folder: content, to: path, topLevelFolder: "RXCacheContent",
                        reusing: trusted ? ArchiveReuse(previousArchive: previous, sources: sources) : nil)
                }
            } catch  where trusted {
                // Reuse only saves work: whatever failed while reading the previous archive, the
                // archive is built from the content alone (a failure that is not the previous
                // archive's fails again, and is reported).
                reused = try ZipWriter.archive(
                    folder: content, to: path, topLevelFolder: "RXCacheContent", reusing: nil)
            }
        } catch {
            throw PublishError(code: .archive, message: "cannot build \(path): \(error)", underlying: error)
        }
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw PublishError.fileSystem("cannot read", path: path, syscall: "stat", errno: errno)
        }
        return (Int64(info.st_size), reused ?? 0)
    }

    static let archivePath = "RXCacheContent.zip"

    /// `changes_<from>_<to>.json`'s path relative to the storage.
    static func changeListPath(from: CacheVersion, to: CacheVersion) -> String {
        "RXCacheConfig/HistoryOfVersions/changes_\(from.text)_\(to.text).json"
    }

    /// Stages `changes_<from>_<to>.json`; returns its path relative to the storage.
    func writeChangeList(from: CacheVersion, to: CacheVersion, changes: [Change.Kind], tree: ContentTree)
        throws(PublishError) -> String
    {
        let relative = Self.changeListPath(from: from, to: to)
        let entries: [[String: Any]] = changes.map { change in
            var object = entry(change)
            // Integrity extension: a change that makes a client download a file names its bytes.
            switch change {
            case .add(let path), .redownload(_, let path):
                if let fingerprint = tree.files[path] {
                    object["sha256"] = fingerprint.sha256
                    object["size"] = fingerprint.size
                }
            case .deepRedownload(let folder):
                // Every file the refresh downloads, by path relative to the folder.
                var files: [String: Any] = [:]
                for (path, fingerprint) in tree.files where path.isWithin(folder) && path != folder {
                    files[path.rebased(from: folder, onto: .root).string] = [
                        "sha256": fingerprint.sha256, "size": fingerprint.size,
                    ]
                }
                object["files"] = files
            default:
                break
            }
            return object
        }
        try writeJSON(["from": from.text, "to": to.text, "changes": entries], to: relative)
        return relative
    }

    /// Stages the storage's update list with `changeListPath` appended (once).
    func appendToUpdateList(_ changeListPath: String) throws(PublishError) {
        let path = root + "/" + StorageLayout.updateListPath
        let url = layout.baseURL.absoluteString + changeListPath
        // The storage's history: clients behind replay through it. A missing one (or a folder,
        // a FIFO in its place) was silently started again, and every client behind restored
        // from the archive.
        let kind = FileSystem.status(of: path).map { $0.st_mode & S_IFMT }
        guard kind == S_IFREG, let data = FileManager.default.contents(atPath: path) else {
            let problem = kind == nil ? "is missing" : kind == S_IFREG ? "cannot be read" : "is not a file"
            throw PublishError(
                code: .invalidStorage,
                message:
                    "\(path) \(problem), but a storage with versions has one (clients behind replay through it); restore it (from the storage's copy, e.g. git checkout), or, to start the history over (clients behind then restore from the archive), write {\"updatesByVersions\": []} there"
            )
        }
        guard case .array(let items)? = try? JSONValue.parse(data)["updatesByVersions"] else {
            throw PublishError(
                code: .invalidStorage,
                message: "\(path) is not {\"updatesByVersions\": [URL, …]}; fix it before publishing")
        }
        var urls = items.compactMap { if case .string(let text) = $0 { return text } else { return nil } }
        if !urls.contains(url) { urls.append(url) }
        try writeUpdateList(urls)
    }

    func writeUpdateList(_ urls: [String]) throws(PublishError) {
        try writeJSON(["updatesByVersions": urls], to: StorageLayout.updateListPath)
    }

    /// Stages the per-version content manifest the client repairs from. Returns its path.
    func writeContentManifest(_ tree: ContentTree, version: CacheVersion, treeDigest: String) throws(PublishError)
        -> String
    {
        let data = ContentManifest.encode(tree, version: version.text, treeDigest: treeDigest)
        try writeData(data, to: Self.contentManifestPath)
        return Self.contentManifestPath
    }

    static let contentManifestPath = ContentManifest.path

    /// Stages `cacheStatus.json` with the integrity block: the tree digest and the SHA-256 and
    /// size of the archive, the content manifest, the update list and every change list it names
    /// (each as the storage will hold it once installed: staged if staged, else the storage's;
    /// one of `checkedLists`, by storage path, with the fingerprint checked against the previous
    /// status). Returns the status's bytes.
    @discardableResult
    func writeStatus(
        version: CacheVersion, minimal: CacheVersion, treeDigest: String, unzippedBytes: Int64,
        checkedLists: [String: FileFingerprint]
    ) throws(PublishError) -> Data {
        let base = layout.baseURL.absoluteString
        func facts(ofFile path: String) throws(PublishError) -> [String: Any] {
            let fingerprint = try fileWork { () throws(FileSystemError) in try ContentTree.fingerprint(of: path) }
            return ["sha256": fingerprint.sha256, "size": fingerprint.size]
        }
        var changeLists: [String: Any] = [:]
        if let data = FileManager.default.contents(atPath: staged(StorageLayout.updateListPath)),
            case .array(let items)? = try? JSONValue.parse(data)["updatesByVersions"]
        {
            for case .string(let url) in items where url.hasPrefix(base) {
                let relative = String(url.dropFirst(base.count))
                // This publish's change list is staged; the others are the storage's.
                if relative.hasPrefix("RXCacheConfig/HistoryOfVersions/") && FileSystem.exists(staged(relative)) {
                    changeLists[url] = try facts(ofFile: staged(relative))
                } else if let checked = checkedLists[relative] {
                    changeLists[url] = ["sha256": checked.sha256, "size": checked.size]
                } else if FileManager.default.fileExists(atPath: root + "/" + relative) {
                    changeLists[url] = try facts(ofFile: root + "/" + relative)
                }
            }
        }
        let archive = try facts(ofFile: staged(Self.archivePath))
        let integrity: [String: Any] = [
            "format": 1,
            "treeDigest": treeDigest,
            "archive": archive,
            "contentManifest": try facts(ofFile: staged(Self.contentManifestPath)).merging([
                "url": base + Self.contentManifestPath
            ]) { a, _ in a },
            "updateList": try facts(ofFile: staged(StorageLayout.updateListPath)),
            "changeLists": changeLists,
        ]
        let status: [String: Any] = [
            "actualCacheVersion": version.text,
            "minimalCacheVersion": minimal.text,
            "urlAtListOfURLsToUpdatesByVersion": base + StorageLayout.updateListPath,
            "urlAtZipArchiveOfCacheContent": base + "RXCacheContent.zip",
            "zippedArchiveSizeInMB": Self.megabytes(archive["size"] as! Int64),
            "unzippedArchiveSizeInMB": Self.megabytes(unzippedBytes),
            "integrity": integrity,
        ]
        guard let signer else {
            return try writeJSON(status, to: StorageLayout.statusPath)
        }
        // Signed: canonicalize through the same reader the client uses, sign, write canonically.
        let data: Data
        let parsed: JSONValue
        do {
            data = try JSONSerialization.data(withJSONObject: status, options: [.sortedKeys, .withoutEscapingSlashes])
            parsed = try JSONValue.parse(data)
        } catch {
            throw PublishError(code: .fileSystem, message: "cannot serialize the status: \(error)", underlying: error)
        }
        var signed = try signer.key.sign(parsed, expires: signer.expires).canonicalData
        signed.append(0x0A)
        try writeData(signed, to: StorageLayout.statusPath)
        return signed
    }

    /// MiB rounded up to three decimals, so a declared size is never below the real one.
    static func megabytes(_ bytes: Int64) -> String {
        let thousandths = (Double(bytes) / CacheStatus.bytesPerMB * 1000).rounded(.up)
        var text = String(format: "%.3f", thousandths / 1000)
        while text.hasSuffix("0") { text.removeLast() }
        if text.hasSuffix(".") { text.removeLast() }
        return text
    }

    private func entry(_ change: Change.Kind) -> [String: Any] {
        func url(_ path: SafeRelativePath) -> String { layout.contentURL(for: path).absoluteString }
        switch change {
        case .add(let path):
            return ["oldPath": "", "newPath": url(path), "redownload": false, "rename": false]
        case .remove(let path):
            return ["oldPath": url(path), "newPath": "", "redownload": false, "rename": false]
        case .move(let from, let to, let rename):
            return ["oldPath": url(from), "newPath": url(to), "redownload": false, "rename": rename]
        case .redownload(let from, let to):
            return ["oldPath": url(from), "newPath": url(to), "redownload": true, "rename": false]
        case .deepRedownload(let folder):
            return [
                "oldPath": url(folder), "newPath": url(folder), "redownload": true, "rename": false,
                "isDeepFolderRedownload": true,
            ]
        }
    }

    @discardableResult
    private func writeJSON(_ object: [String: Any], to relative: String) throws(PublishError) -> Data {
        var data: Data
        do {
            data = try JSONSerialization.data(
                withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        } catch {
            throw PublishError(code: .fileSystem, message: "cannot serialize \(relative): \(error)", underlying: error)
        }
        data.append(0x0A)
        try writeData(data, to: relative)
        return data
    }

    /// Writes a staged file (the stage is private: no temporary name needed).
    private func writeData(_ data: Data, to relative: String) throws(PublishError) {
        try PublishWorkFolder.write(data, to: staged(relative))
    }
}
