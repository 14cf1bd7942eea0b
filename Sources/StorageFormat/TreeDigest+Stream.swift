import FileKit
import Foundation

extension TreeDigest {
    /// One entry of a local folder, as ``stream(_:_:)`` hands it over.
    package enum StreamedEntry: Sendable, Equatable {
        /// A regular file: its fingerprint, read from its bytes, and its identity when it kept
        /// the one it was listed with throughout the reading (nil: it was written meanwhile, and
        /// its fingerprint must not be remembered under either).
        case file(SafeRelativePath, FileFingerprint, FileIdentity?)
        /// A folder, once everything below it is hashed: its digest, and the `ctime` its parent's
        /// listing gave it (nil for the root).
        case folder(SafeRelativePath, digest: String, changedNanoseconds: Int64?)
    }

    /// What ``stream(_:_:)`` found: the root's digest and the tree's shape.
    package struct Streamed: Sendable, Equatable {
        package var digest: String
        package var shape: TreeShape
    }

    /// The digest of the local folder `directory`, read in one walk that holds only the folders
    /// being walked (each one's entries, by name), never the tree: every file's bytes are hashed
    /// through the folder the walk holds open, and each entry goes to `emit` as soon as it is
    /// known (files as read, folders bottom-up), for the caller to write out in batches.
    ///
    /// Returns nil, having stopped early, at the first thing a content tree cannot hold (an
    /// ``Intruder``: a special file, an unsafe or undecodable name, two names that are one path)
    /// or a folder that vanished before it was entered. ``ContentTree/scanLocal(_:cache:ledger:)``
    /// then says what, and a repair may follow. An error `emit` throws ends the walk and is
    /// thrown as it is.
    package static func stream(_ directory: String, _ emit: (StreamedEntry) throws -> Void) throws -> Streamed? {
        /// A folder being walked or waiting to be: its `ctime` as listed, and its entries by
        /// name, a subfolder's nil until the walk leaves it.
        struct OpenFolder {
            var changed: Int64?
            var entries: [String: Entry?] = [:]
        }
        var open: [SafeRelativePath: OpenFolder] = [.root: OpenFolder(changed: nil)]
        var shape = TreeShape(folders: [], files: [])
        var rootDigest: String?
        /// Why the walk stopped early, when it did not fail on its own.
        final class Stop {
            var unclean = false
            var failure: (any Error)?
        }
        let stopped = Stop()
        let stop = FileSystemError(code: .changedUnderneath, operation: "stopped hashing", path: directory)
        func forward(_ entry: StreamedEntry) throws(FileSystemError) {
            do {
                try emit(entry)
            } catch {
                stopped.failure = error
                throw stop
            }
        }
        func refuse() throws(FileSystemError) -> Never {
            stopped.unclean = true
            throw stop
        }
        /// Adds `name` to `folder`'s entries, refusing a second entry of the same name (one lookup
        /// of the folder and one of the name: this runs for every file).
        func note(_ name: String, _ entry: Entry?, in folder: SafeRelativePath) throws(FileSystemError) {
            guard let slot = open.index(forKey: folder),
                open.values[slot].entries.updateValue(entry, forKey: name) == nil
            else { try refuse() }
        }
        // Called for each folder entered, after everything below it: its subfolders are done.
        func leave(_ folder: SafeRelativePath) throws(FileSystemError) {
            guard let left = open.removeValue(forKey: folder) else { try refuse() }
            var lines: [(name: String, entry: Entry)] = []
            lines.reserveCapacity(left.entries.count)
            for (name, entry) in left.entries {
                // A subfolder never left: it vanished (or turned into something else) before
                // the walk entered it.
                guard let entry else { try refuse() }
                lines.append((name, entry))
            }
            let digest = folderDigest(lines)
            try forward(.folder(folder, digest: digest, changedNanoseconds: left.changed))
            if folder.isRoot {
                rootDigest = digest
                return
            }
            guard open[folder.parent] != nil else { try refuse() }
            open[folder.parent]!.entries[folder.lastComponent!] = .some(.folder(digest: digest))
        }
        do {
            try DirectoryWalker.walkStamped(directory, sorted: true, leaving: leave) {
                entry, stamp, descriptor throws(FileSystemError) in
                switch entry {
                case .folder(let path):
                    guard let stamp else { try refuse() }
                    try note(path.lastComponent!, nil, in: path.parent)
                    // Its own entries; the placeholder above gets its digest when the walk leaves it.
                    open[path] = OpenFolder(changed: stamp.changedNanoseconds)
                    shape.add(folder: path)
                case .file(let path, let identity):
                    let digest = try FileDigest.sha256(
                        ofEntry: path.lastComponent!, in: descriptor, expecting: identity,
                        shownAs: path.absolute(in: directory))
                    let fingerprint = FileFingerprint(size: digest.size, sha256: digest.sha256)
                    try note(path.lastComponent!, .file(fingerprint), in: path.parent)
                    shape.add(file: path)
                    try forward(.file(path, fingerprint, digest.identity == identity ? identity : nil))
                case .special, .unsafeName, .undecodableName:
                    try refuse()
                }
            }
        } catch {
            if let failure = stopped.failure { throw failure }
            if stopped.unclean { return nil }
            throw error
        }
        guard let rootDigest else { return nil }
        return Streamed(digest: rootDigest, shape: shape)
    }
}
