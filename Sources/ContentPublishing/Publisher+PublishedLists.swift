import FileKit
import Foundation
import StorageFormat

extension Publisher {
    /// Refuses to publish over a status that carries this signing key's signature and does not
    /// verify with it (its expiry aside): someone who may write the storage changed it after it
    /// was signed, its integrity block too, so that ``checkPublishedLists(_:storage:version:)``
    /// would trust their lists, and the new signature would vouch for them (an outside audit).
    /// A status signed by another key, or unsigned, cannot be checked so: the first signed
    /// publish, or one after a key change, trusts the storage as it is (docs/security.md).
    /// Returns whether it verified (false: the status carries no signature of this key, and
    /// its lists are taken as they are; the front end warns).
    static func checkOwnSignature(of data: Data, at path: String, signer: StorageWriter.Signer) throws(PublishError)
        -> Bool
    {
        guard signatureKeyID(ofStatus: data) == signer.key.keyID, let status = try? JSONValue.parse(data) else {
            return false
        }
        do {
            try StatusSignature.verify(
                status, trustedKeys: [signer.key.key.publicKey], now: .distantPast, name: path)
        } catch {
            throw PublishError(
                code: .invalidStorage,
                message:
                    "\(path) does not verify with the signing key that signed it: it was changed after it was signed, so publishing would vouch for what was changed; put back the published status (e.g. git checkout), then publish again",
                underlying: error)
        }
        return true
    }

    /// Refuses to publish over a change list or update list that differs from the one the
    /// current status vouches for (its integrity block's SHA-256 and size).
    ///
    /// The next status hashes every list again and, with a key, signs them: a list a neighbour
    /// edited in the storage (a `../` path, a hostile URL) would come out vouched for, and
    /// clients that trust the key would take it (an outside audit found such a list signed again
    /// and every client one version behind failing for good). Lists the status does not name
    /// (an older publisher's, or a storage without integrity data) are not checked.
    ///
    /// Returns the change lists it checked, by storage path, with the fingerprints the status
    /// records: the new status takes them as they are instead of hashing the files again (which
    /// would also vouch for a file changed between the check and the status).
    static func checkPublishedLists(_ integrity: StorageIntegrity?, storage: String, version: CacheVersion)
        throws(PublishError) -> [String: FileFingerprint]
    {
        guard let integrity else { return [:] }
        var checked: [String: FileFingerprint] = [:]
        var published: [(relative: String, fingerprint: FileFingerprint)] = integrity.changeLists.map {
            ("RXCacheConfig/HistoryOfVersions/" + $0.key.lastPathComponent, $0.value)
        }
        if let updateList = integrity.updateList { published.append((StorageLayout.updateListPath, updateList)) }
        for (relative, fingerprint) in published.sorted(by: { $0.relative < $1.relative }) {
            let path = storage + "/" + relative
            guard FileSystem.status(of: path).map({ $0.st_mode & S_IFMT == S_IFREG }) == true else {
                // The update list gone, or something else in its place, is named by the steps
                // that need it. A change list gone would stay named by the update list but not
                // by the new status's integrity data, which every client that trusts the key
                // then refuses for good.
                guard relative != StorageLayout.updateListPath else { continue }
                throw PublishError(
                    code: .invalidStorage,
                    message:
                        "\(path), which version \(version) published, is missing or not a file, but the update list still names it: put back the published copy (e.g. git checkout), then publish again"
                )
            }
            let found = try fileWork { () throws(FileSystemError) in try ContentTree.fingerprint(of: path) }
            guard found != fingerprint else {
                if relative != StorageLayout.updateListPath { checked[relative] = fingerprint }
                continue
            }
            throw PublishError(
                code: .invalidStorage,
                message:
                    "\(path) is not the file version \(version) published (its SHA-256 or size differs from what \(StorageLayout.statusPath) records), so publishing would vouch for a list someone changed: put back the published copy (e.g. git checkout), then publish again"
            )
        }
        return checked
    }
}
