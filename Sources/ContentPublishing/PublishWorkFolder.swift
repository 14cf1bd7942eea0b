import FileKit
import Foundation
import Glibc
import StorageFormat

/// The folder inside the storage where a publish builds, keeps and journals:
/// `<storage>/.content-sync-publish/`.
///
/// It is inside the storage so that every rename into place stays on one filesystem (atomic),
/// and so that two storages never share one. It holds:
/// - `journal.json`: ``PublishJournal``, written by temporary file, `fsync` and rename;
/// - `stage/`: the new files at their storage paths (`stage/RXCacheContent/` is the snapshot of
///   `--content`; after the swap it holds the previous content);
/// - `kept/`: each file the install replaced, at its storage path, until the publish is over;
/// - `twin/`: in a publish over nothing, hard links to the snapshot's files, kept as the retired
///   tree (``PublishBase``) once the version is published.
///
/// After a publish, committed or rolled back, the folder is gone.
struct PublishWorkFolder {
    let storage: String

    var root: String { storage + "/" + PublishPaths.workFolderName }
    var journalPath: String { root + "/journal.json" }
    var stage: String { root + "/stage" }
    var kept: String { root + "/kept" }
    var twin: String { root + "/twin" }

    func staged(_ relative: String) -> String { stage + "/" + relative }
    func kept(_ relative: String) -> String { kept + "/" + relative }
    func destination(_ relative: String) -> String { storage + "/" + relative }

    var exists: Bool { FileSystem.exists(root) }

    /// Creates the folder with `stage/` and `kept/` and their `RXCacheConfig/HistoryOfVersions/`.
    func create() throws(PublishError) {
        for folder in [
            root, stage, stage + "/RXCacheConfig", stage + "/RXCacheConfig/HistoryOfVersions",
            kept, kept + "/RXCacheConfig", kept + "/RXCacheConfig/HistoryOfVersions",
        ] {
            try fileWork { () throws(FileSystemError) in try FileSystem.makeFolder(folder) }
        }
    }

    /// The journal, or nil when there is none. An unreadable journal is an error: guessing
    /// could delete the only copy of a replaced file.
    func readJournal() throws(PublishError) -> PublishJournal? {
        guard let data = FileManager.default.contents(atPath: journalPath) else {
            if FileSystem.exists(journalPath) {
                throw PublishError(
                    code: .fileSystem, message: "cannot read the publish journal \(journalPath); check its permissions")
            }
            return nil
        }
        do {
            let journal = try JSONDecoder().decode(PublishJournal.self, from: data)
            guard journal.format == 1 else {
                throw PublishError(
                    code: .configuration, message: "format \(journal.format), this publisher reads format 1")
            }
            if let problem = journal.pathProblem {
                throw PublishError(code: .invalidStorage, message: problem)
            }
            return journal
        } catch {
            throw PublishError(
                code: .configuration,
                message:
                    "\(journalPath) is not a publish journal this publisher can read (\(error)); an interrupted publish cannot be recovered automatically: compare the storage with its cacheStatus.json, then delete \(root)",
                underlying: error)
        }
    }

    /// Writes the journal atomically: a temporary file, `fsync`, rename, so it is never read
    /// empty or half-written. `durable` also `fsync`s the folder (otherwise the `syncfs` before
    /// installing covers the rename).
    func writeJournal(_ journal: PublishJournal, durable: Bool) throws(PublishError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        let data: Data
        do { data = try encoder.encode(journal) } catch {
            throw PublishError(
                code: .fileSystem, message: "cannot encode the publish journal: \(error)", underlying: error)
        }
        try fileWork { () throws(FileSystemError) in
            try AtomicFile.write(data, to: journalPath, durability: durable ? .full : .contents)
        }
    }

    /// Deletes the folder: everything but the journal first, the journal last, so that a run
    /// killed meanwhile still finds the journal and makes the same decision again.
    func remove() throws(PublishError) {
        guard exists else { return }
        // Its own entries have ASCII names; below them (the snapshot) names go by raw bytes, since
        // a name that is not UTF-8 can be there (the scan then refused it).
        for name in try fileWork({ () throws(FileSystemError) in try DirectoryWalker.names(in: root) })
        where name != "journal.json" {
            try fileWork { () throws(FileSystemError) in try TreeRemoval.remove(root + "/" + name) }
        }
        try fileWork { () throws(FileSystemError) in try TreeRemoval.remove(journalPath) }
        if rmdir(root) != 0 && errno != ENOENT {
            throw PublishError.fileSystem(
                "cannot delete the publish work folder", path: root, syscall: "rmdir", errno: errno)
        }
    }

    // MARK: - Small file primitives

    /// Writes `data` to `path` atomically (the `syncfs` before installing makes it durable).
    static func write(_ data: Data, to path: String) throws(PublishError) {
        try fileWork { () throws(FileSystemError) in try AtomicFile.write(data, to: path) }
    }

    /// SHA-256 of a file's bytes, or nil when it does not exist.
    static func sha256(of path: String) throws(PublishError) -> String? {
        guard FileSystem.exists(path) else { return nil }
        return try fileWork { () throws(FileSystemError) in try ContentTree.fingerprint(of: path).sha256 }
    }
}
