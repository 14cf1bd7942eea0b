import FileKit
import Foundation

extension ContentTree {
    /// A local folder as it is: its content tree, and everything in it that content cannot be
    /// (``Intruder``s), instead of refusing the folder for them. This is how the client reads a
    /// mirror, where such entries are drift to report and remove.
    /// `ledger`: records of files to trust by their stamps, and where the stamps found are noted.
    /// `cache`: fingerprints to take instead of reading a file of that identity, and where the
    /// files read are remembered; with `readingEvery`, every file is read all the same (and
    /// remembered, over what the cache had): `verify`, whose repair then trusts what it read.
    /// `unreadableIsDrift`: a file that may not be read (`EACCES`, `EPERM`: a mirror's file made
    /// mode 000) is an ``Intruder/Kind/unreadable`` intruder, which a repair replaces, instead of
    /// failing the scan (the client's reading of its mirror; a publisher refuses it).
    package static func scanLocal(
        _ directory: String, cache: FingerprintCache? = nil, ledger: StampLedger? = nil, readingEvery: Bool = false,
        unreadableIsDrift: Bool = false
    )
        throws(FileSystemError) -> (tree: ContentTree, intruders: [Intruder])
    {
        var tree = ContentTree(folders: [], files: [:])
        var intruders: [Intruder] = []
        try DirectoryWalker.walkStamped(directory) { entry, stamp, folder throws(FileSystemError) in
            switch entry {
            case .folder(let path), .file(let path, _):
                if tree.folders.contains(path) || tree.files[path] != nil {
                    intruders.append(
                        Intruder(folder: path.parent, name: Array(path.lastComponent!.utf8), kind: .normalizationTwin))
                    return
                }
            default:
                break
            }
            switch entry {
            case .folder(let path):
                tree.folders.insert(path)
            case .file(let path, let identity):
                if let ledger, let stamp, let recorded = ledger.see(path.string, stamp) {
                    // Not put in `cache`: whoever needs this file's bytes asks the ledger's records.
                    tree.files[path] = recorded
                } else if !readingEvery, let known = cache?.lookup(identity) {
                    tree.files[path] = known
                } else {
                    // Through the folder the walk holds open, and only if it is still the file listed.
                    let digest: (size: Int64, sha256: String, identity: FileIdentity)
                    do throws(FileSystemError) {
                        digest = try FileDigest.sha256(
                            ofEntry: path.lastComponent!, in: folder, expecting: identity,
                            shownAs: path.absolute(in: directory))
                    } catch  where unreadableIsDrift && (error.errno == EACCES || error.errno == EPERM) {
                        intruders.append(
                            Intruder(
                                folder: path.parent, name: Array(path.lastComponent!.utf8), kind: .unreadable,
                                detail: String(cString: strerror(error.errno!))))
                        return
                    }
                    let fingerprint = FileFingerprint(size: digest.size, sha256: digest.sha256)
                    // Remembered under the identity after the reading: a file written meanwhile is
                    // not remembered under its new identity with bytes of the old.
                    if digest.identity == identity { cache?.insert(fingerprint, for: identity) }
                    tree.files[path] = fingerprint
                }
            case .special(let path, let mode):
                intruders.append(
                    Intruder(
                        folder: path.parent, name: Array(path.lastComponent!.utf8), kind: Intruder.kind(ofMode: mode)))
            case .unsafeName(let name, let folder, let error):
                intruders.append(
                    Intruder(folder: folder, name: Array(name.utf8), kind: .unsafeName, detail: "\(error)"))
            case .undecodableName(let name, let folder):
                intruders.append(Intruder(folder: folder, name: name, kind: .undecodableName))
            }
        }
        return (tree, intruders)
    }

    /// Size and SHA-256 of one file, read in 1 MiB chunks.
    public static func fingerprint(of path: String) throws(FileSystemError) -> FileFingerprint {
        let digest = try FileDigest.sha256(ofFileAt: path)
        return FileFingerprint(size: digest.size, sha256: digest.sha256)
    }

    /// Size and SHA-256 of the open file `descriptor`, from its first byte.
    package static func fingerprint(ofDescriptor descriptor: Int32, shownAs path: String) throws(FileSystemError)
        -> FileFingerprint
    {
        let digest = try FileDigest.sha256(ofDescriptor: descriptor, shownAs: path)
        return FileFingerprint(size: digest.size, sha256: digest.sha256)
    }
}
