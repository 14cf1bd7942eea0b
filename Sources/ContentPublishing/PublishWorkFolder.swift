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
///
/// Once created or found, the folder is held open (``HeldFolder``) and every path below goes
/// through its descriptor: a neighbour who may rename entries of the storage folder and swaps
/// `.content-sync-publish` for a link (or a folder of their own) mid-publish has nothing written,
/// read or deleted there (an outside audit's finding: staging wrote through such a link).
struct PublishWorkFolder {
    let storage: String
    /// The folder, held open once ``create()`` made it or ``hold()`` found it.
    private(set) var held: HeldFolder?

    init(storage: String) {
        self.storage = storage
    }

    /// The folder's path as the operator knows it, for messages.
    var shownRoot: String { storage + "/" + PublishPaths.workFolderName }
    /// The path work goes through: the held folder's descriptor name, or ``shownRoot`` before it
    /// is held.
    var root: String { held?.path ?? shownRoot }
    var journalPath: String { root + "/journal.json" }
    /// The most bytes a journal holds (its steps are the fixed list of storage files).
    static let journalLimit = 1 << 20
    /// The journal's path as the operator knows it, for messages.
    var shownJournalPath: String { shownRoot + "/journal.json" }
    var stage: String { root + "/stage" }
    var kept: String { root + "/kept" }
    var twin: String { root + "/twin" }

    func staged(_ relative: String) -> String { stage + "/" + relative }
    func kept(_ relative: String) -> String { kept + "/" + relative }
    func destination(_ relative: String) -> String { storage + "/" + relative }

    var exists: Bool { FileSystem.exists(shownRoot) }

    /// Creates the folder, holds it, and creates `stage/` and `kept/` and their
    /// `RXCacheConfig/HistoryOfVersions/` in it. The folder must be new and this user's: one
    /// that was there, or that another user put at its name in the meantime, is refused.
    mutating func create() throws(PublishError) {
        guard mkdir(shownRoot, 0o755) == 0 else {
            guard errno == EEXIST else {
                throw PublishError.fileSystem(
                    "cannot create the publish work folder", path: shownRoot, syscall: "mkdir", errno: errno)
            }
            throw PublishError(
                code: .invalidStorage,
                message:
                    "\(shownRoot) appeared while the publish ran (something else made it, or put it back); a publish works only in a folder it made: delete it, then publish again"
            )
        }
        // A folder another user put at the name in the meantime is refused by the hold.
        try hold()
        for folder in [
            stage, stage + "/RXCacheConfig", stage + "/RXCacheConfig/HistoryOfVersions",
            kept, kept + "/RXCacheConfig", kept + "/RXCacheConfig/HistoryOfVersions",
        ] {
            try fileWork { () throws(FileSystemError) in try FileSystem.makeFolder(folder) }
        }
    }

    /// Holds the folder found at its name (opened without following a link), so that recovery
    /// reads and deletes only in it. A link or a file there is refused.
    ///
    /// Only a folder of this user is held: one another user made (a neighbour who may create
    /// names in a shared storage folder) holds their journal and their staged files, and recovery
    /// acted on them as its own (an outside audit: their status was installed and the real
    /// content swapped out). It is refused before anything in it is read.
    mutating func hold() throws(PublishError) {
        let found: HeldFolder?
        do {
            found = try HeldFolder(opening: PublishPaths.workFolderName, in: storage)
        } catch {
            guard error.errno == ELOOP || error.errno == ENOTDIR else { throw PublishError(error) }
            throw PublishError(
                code: .invalidStorage,
                message:
                    "\(shownRoot) is not a folder (a symlink or a file was put there); a publish never works through a link: delete it, then publish again"
            )
        }
        guard let found else {
            throw PublishError(
                code: .invalidStorage,
                message:
                    "\(shownRoot) was moved or deleted while the publish opened it (someone else renamed entries of the storage); delete what stands at that name now, if anything, then publish again"
            )
        }
        guard found.owner == geteuid() else {
            throw PublishError(
                code: .invalidStorage,
                message:
                    "\(shownRoot) belongs to another user (uid \(found.owner)), so it is not this publisher's work: if it is that user's interrupted publish, run the publish as that user to finish it; otherwise delete it, then publish again"
            )
        }
        held = found
    }

    /// Whether the folder at the storage's work-folder name is still the held one. The install
    /// and the roll-back go through that name (anchored from the storage): one swapped since it
    /// was held is not the folder this publish staged in.
    var isInPlace: Bool { held?.isStillInPlace ?? exists }

    /// `error` with the held folder's descriptor name written as the folder's path.
    func shown(_ error: PublishError) -> PublishError {
        guard let held else { return error }
        var shown = error
        shown.message = held.shown(error.message)
        shown.underlying = error.underlying.map { held.shown($0) }
        return shown
    }

    /// The journal, or nil when there is none. An unreadable journal is an error: guessing
    /// could delete the only copy of a replaced file.
    func readJournal() throws(PublishError) -> PublishJournal? {
        let data: Data
        switch SmallTextFile.regularFileBytes(journalPath, limit: Self.journalLimit) {
        case .success(let bytes?): data = Data(bytes)
        case .success(nil): return nil
        case .failure(let reason):
            throw PublishError(
                code: .invalidStorage,
                message:
                    "cannot read the publish journal \(shownJournalPath): it \(reason); an interrupted publish cannot be recovered from it: compare the storage with its cacheStatus.json, then delete \(shownRoot)"
            )
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
                    "\(shownJournalPath) is not a publish journal this publisher can read (\(error)); an interrupted publish cannot be recovered automatically: compare the storage with its cacheStatus.json, then delete \(shownRoot)",
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
    /// killed meanwhile still finds the journal and makes the same decision again. Only a held
    /// folder is deleted (one never held is held first, so a link at the name is refused):
    /// it is emptied through its descriptor, and its name removed only while it still leads to
    /// it (what was put in its place is left, and refused by the next publish).
    func remove() throws(PublishError) {
        guard held == nil else { return try removeHeld() }
        guard exists else { return }
        var folder = self
        try folder.hold()
        try folder.removeHeld()
    }

    private func removeHeld() throws(PublishError) {
        guard let held else { preconditionFailure("removeHeld() needs the folder held") }
        // Its own entries have ASCII names; below them (the snapshot) names go by raw bytes, since
        // a name that is not UTF-8 can be there (the scan then refused it).
        for name in try fileWork({ () throws(FileSystemError) in try DirectoryWalker.names(in: root) })
        where name != "journal.json" {
            try fileWork { () throws(FileSystemError) in try TreeRemoval.remove(root + "/" + name) }
        }
        try fileWork { () throws(FileSystemError) in try TreeRemoval.remove(journalPath) }
        _ = try fileWork { () throws(FileSystemError) in try held.removeName() }
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
