import ContentPublishing
import FileKit
import Foundation
import StorageFormat

/// The committed ExampleStorage: one storage snapshot per version, and the expected tree.
enum ExampleStorageFixture {
    static let root: String = {
        // Tests/ContentSyncTests/Support/ExampleStorageFixture.swift → repository root.
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<4 { url.deleteLastPathComponent() }
        return url.appendingPathComponent("ExampleStorage").path
    }()

    static var versions: [String] {
        let data = FileManager.default.contents(atPath: root + "/versions.json")!
        let object = try! JSONSerialization.jsonObject(with: data) as! [String: Any]
        return object["versions"] as! [String]
    }

    static func snapshot(_ version: String) -> URL {
        URL(fileURLWithPath: root + "/versions/" + version)
    }

    static func minimalVersion(of version: String) -> String {
        let data = FileManager.default.contents(atPath: root + "/versions/\(version)/RXCacheConfig/cacheStatus.json")!
        let object = try! JSONSerialization.jsonObject(with: data) as! [String: Any]
        return "\(object["minimalCacheVersion"]!)"
    }

    /// The expected tree of a version.
    static func manifest(_ version: String) -> TreeSnapshot {
        let data = FileManager.default.contents(atPath: root + "/manifests/\(version).json")!
        let object = try! JSONSerialization.jsonObject(with: data) as! [String: Any]
        let folders = Set(object["folders"] as! [String])
        var files: [String: String] = [:]
        for (path, info) in object["files"] as! [String: [String: Any]] {
            files[path] = info["sha256"] as? String
        }
        return TreeSnapshot(folders: folders, files: files)
    }
}
