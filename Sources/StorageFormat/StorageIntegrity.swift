import FileKit
import Foundation

/// The integrity extension of `cacheStatus.json` (`"integrity": {…}`): what every published
/// file must hash to. Clients that ignore unknown keys never see it; this client verifies
/// everything it names.
public struct StorageIntegrity: Sendable, Equatable {
    /// The Merkle digest of the version's whole content (``TreeDigest``).
    public var treeDigest: String?
    /// The size and SHA-256 the version's zip archive must have.
    public var archive: FileFingerprint?
    /// The size and SHA-256 `listOfURLsToUpdatesByVersion.json` must have.
    public var updateList: FileFingerprint?
    /// The per-version manifest of every path's hash, used to repair drift.
    public var contentManifestURL: URL?
    /// The size and SHA-256 the manifest at ``contentManifestURL`` must have.
    public var contentManifest: FileFingerprint?
    /// Change lists by their (rebased) URL.
    public var changeLists: [URL: FileFingerprint]

    package static func parse(_ value: JSONValue, name: String, statusURL: URL, layout: StorageLayout)
        throws(StorageFormatError) -> StorageIntegrity
    {
        func fail(_ what: String) -> StorageFormatError {
            StorageFormatError(
                code: .invalidStatus,
                message: "\(name): \"integrity\" \(what); the publisher must fix it (or drop the block)")
        }
        guard case .object = value else { throw fail("must be an object") }
        func fingerprint(_ item: JSONValue?, _ key: String) throws(StorageFormatError) -> FileFingerprint? {
            guard let item else { return nil }
            guard case .string(let hash)? = item["sha256"], hash.count == 64, hash.allSatisfy(\.isHexDigit),
                let size = item["size"]?.scalarText.flatMap({ Int64($0) }), size >= 0
            else {
                throw fail("\(key) needs \"sha256\" (64 hex digits) and \"size\"")
            }
            return FileFingerprint(size: size, sha256: hash.lowercased())
        }
        var integrity = StorageIntegrity(changeLists: [:])
        if let digest = value["treeDigest"] {
            guard case .string(let text) = digest, text.count == 64, text.allSatisfy(\.isHexDigit) else {
                throw fail("treeDigest must be 64 hex digits")
            }
            integrity.treeDigest = text.lowercased()
        }
        integrity.archive = try fingerprint(value["archive"], "archive")
        integrity.updateList = try fingerprint(value["updateList"], "updateList")
        if let manifest = value["contentManifest"] {
            integrity.contentManifest = try fingerprint(manifest, "contentManifest")
            guard case .string(let text)? = manifest["url"], let url = layout.resolve(text, relativeTo: statusURL)
            else {
                throw fail("contentManifest needs a \"url\"")
            }
            integrity.contentManifestURL = url
        }
        if let lists = value["changeLists"] {
            guard case .object(let members) = lists else {
                throw fail("changeLists must be an object of URL → {sha256, size}")
            }
            for (key, item) in members {
                guard let url = layout.resolve(key, relativeTo: statusURL) else {
                    throw fail("changeLists key '\(key)' is not a URL")
                }
                integrity.changeLists[url] = try fingerprint(item, "changeLists[\(key)]")
            }
        }
        return integrity
    }

    /// Checks bytes against a fingerprint; the error names the file and both hashes.
    package static func verify(_ data: Data, against expected: FileFingerprint?, what: String)
        throws(StorageFormatError)
    {
        guard let expected else { return }
        let actual = FileFingerprint(size: Int64(data.count), sha256: FileDigest.sha256(data))
        try verify(actual, against: expected, what: what)
    }

    package static func verify(_ actual: FileFingerprint, against expected: FileFingerprint?, what: String)
        throws(StorageFormatError)
    {
        guard let expected, actual != expected else { return }
        throw StorageFormatError(
            code: .integrity,
            message:
                "\(what) does not match the storage's integrity data (expected \(expected.size) bytes, sha256 \(expected.sha256.prefix(12))…; "
                + "got \(actual.size) bytes, sha256 \(actual.sha256.prefix(12))…); it was changed or is stale: refusing it. Republish the storage or try again later"
        )
    }
}
