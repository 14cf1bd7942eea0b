import ContentPublishing
import FileKit
import Foundation
import StorageFormat

/// Edits a published storage the way a hostile or careless publisher would, keeping its
/// integrity data consistent where the test says so.
enum StorageEditing {
    /// Reads `cacheStatus.json`, lets `edit` change it, and writes it back.
    static func editStatus(_ storage: String, _ edit: (inout [String: Any]) -> Void) throws {
        let path = storage + "/RXCacheConfig/cacheStatus.json"
        var status =
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as! [String: Any]
        edit(&status)
        try JSONSerialization.data(
            withJSONObject: status, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        )
        .write(to: URL(fileURLWithPath: path))
    }

    /// Recomputes the SHA-256 and size of the archive, the content manifest, the update list and
    /// every change list in the status's integrity block, as a hostile publisher who controls the
    /// whole storage would: what the client then refuses, it refuses for another reason than a
    /// hash mismatch.
    static func reseal(_ storage: String) throws {
        func facts(_ relative: String) -> [String: Any] {
            let data = FileManager.default.contents(atPath: storage + "/" + relative) ?? Data()
            return ["sha256": SHA256Hex.of(data), "size": data.count]
        }
        // A status damaged past parsing has nothing to reseal.
        let statusPath = storage + "/RXCacheConfig/cacheStatus.json"
        guard let data = FileManager.default.contents(atPath: statusPath),
            let parsed = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            parsed["integrity"] != nil
        else { return }
        try editStatus(storage) { status in
            guard var integrity = status["integrity"] as? [String: Any] else { return }
            integrity["archive"] = facts("RXCacheContent.zip")
            integrity["updateList"] = facts("RXCacheConfig/listOfURLsToUpdatesByVersion.json")
            if var manifest = integrity["contentManifest"] as? [String: Any] {
                manifest.merge(facts("RXCacheConfig/contentManifest.json")) { _, new in new }
                integrity["contentManifest"] = manifest
            }
            if let lists = integrity["changeLists"] as? [String: Any] {
                var resealed: [String: Any] = [:]
                for url in lists.keys {
                    let name = url.components(separatedBy: "/").last!
                    resealed[url] = facts("RXCacheConfig/HistoryOfVersions/" + name)
                }
                integrity["changeLists"] = resealed
            }
            status["integrity"] = integrity
        }
    }

    /// Replaces the update list's URLs.
    static func writeUpdateList(_ storage: String, _ urls: [String]) throws {
        try JSONSerialization.data(
            withJSONObject: ["updatesByVersions": urls], options: [.prettyPrinted, .withoutEscapingSlashes]
        )
        .write(to: URL(fileURLWithPath: storage + "/RXCacheConfig/listOfURLsToUpdatesByVersion.json"))
    }

    /// Drops the integrity extension, as a storage published by hand would be.
    static func stripIntegrity(_ storage: String) throws {
        try editStatus(storage) { $0["integrity"] = nil }
    }
}
