import Foundation
import Synchronization

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// Records a publish's checkpoints and stops it at one of them, as a kill or an I/O error would.
final class CheckpointHook: Sendable {
    private let seen = Mutex<[PublishCheckpoint]>([])
    private let stop: @Sendable (PublishCheckpoint) -> PublishCheckpoint.Decision

    /// Stops at checkpoint `index` (of this run) with `decision`; nil only records.
    convenience init(stopAt index: Int? = nil, _ decision: PublishCheckpoint.Decision = .kill) {
        self.init { point in point.index == index ? decision : .proceed }
    }

    init(_ stop: @escaping @Sendable (PublishCheckpoint) -> PublishCheckpoint.Decision) {
        self.stop = stop
    }

    var checkpoints: [PublishCheckpoint] { seen.withLock { $0 } }

    var hook: @Sendable (PublishCheckpoint) -> PublishCheckpoint.Decision {
        { point in
            self.seen.withLock { $0.append(point) }
            return self.stop(point)
        }
    }
}

/// A storage at `base` and the content of the version published over it, for kill-and-rerun tests.
struct InterruptedPublish {
    let scratch: String
    let baseVersion: String
    let version: String
    var initialize = false
    var signingKey: String?
    var exchangeUnsupported = false

    func content(_ version: String) throws -> String {
        let path = scratch + "/content-\(version)"
        if !FileManager.default.fileExists(atPath: path) { try PublishFixture.materializeContent(version, at: path) }
        return path
    }

    /// A fresh storage at `baseVersion` (an empty folder for `--init`).
    func makeBase(at storage: String) throws {
        try? FileManager.default.removeItem(atPath: storage)
        if initialize {
            try FileManager.default.createDirectory(atPath: storage, withIntermediateDirectories: true)
            return
        }
        let template = scratch + "/base-\(baseVersion)"
        if !FileManager.default.fileExists(atPath: template) {
            var options = PublishOptions(
                storage: template, content: try content(baseVersion), version: v(baseVersion),
                baseURL: PublishFixture.base)
            options.initialize = true
            options.signingKey = signingKey
            _ = try Publisher.publish(options)
        }
        try FileManager.default.copyItem(atPath: template, toPath: storage)
    }

    func options(storage: String, version: String? = nil, hook: CheckpointHook? = nil) throws -> PublishOptions {
        let target = version ?? self.version
        var options = PublishOptions(
            storage: storage, content: try content(target), version: v(target), baseURL: PublishFixture.base)
        options.initialize = initialize
        options.signingKey = signingKey
        options.exchangeUnsupported = exchangeUnsupported
        options.checkpoint = hook?.hook
        return options
    }

    @discardableResult
    func publish(storage: String, version: String? = nil, hook: CheckpointHook? = nil) throws -> PublishReport {
        try Publisher.publish(options(storage: storage, version: version, hook: hook))
    }
}

/// A storage as bytes, for "byte-identical" checks: `TreeSnapshot` of the whole folder, the
/// work folder included (hidden names count), with a signed status reduced to what does not
/// depend on the time of signing. The publisher's base folder (`PublishBase`: the retired version
/// and an index of inode numbers, shortcuts that every publish checks before using) is left out:
/// two storages never hold the same inodes. `PublishBaseTests` checks it.
func storageSnapshot(_ storage: String) throws -> TreeSnapshot {
    var snapshot = try TreeSnapshot.read(storage, skipping: [PublishBase.folderName])
    let status = StorageLayout.statusPath
    if let data = FileManager.default.contents(atPath: storage + "/" + status),
        var object = try JSONSerialization.jsonObject(with: data) as? [String: Any], object["signature"] != nil
    {
        object["signature"] = nil
        snapshot.files[status] = SHA256Hex.of(
            try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
    }
    return snapshot
}

/// `snapshot` without the publish work folder.
func withoutWorkFolder(_ snapshot: TreeSnapshot) -> TreeSnapshot {
    let work = PublishPaths.workFolderName
    return TreeSnapshot(
        folders: snapshot.folders.filter { $0 != work && !$0.hasPrefix(work + "/") },
        files: snapshot.files.filter { !$0.key.hasPrefix(work + "/") })
}
