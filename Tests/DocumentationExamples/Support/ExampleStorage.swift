import Foundation
import StorageServer
import Synchronization
import Testing

/// The committed ExampleStorage (one published storage per version) and the tree each version
/// should leave in a client's folder. A small copy of ContentSyncTests' fixture: the guide's
/// examples use the public API only.
enum ExampleStorage {
    static let root: String = {
        // Tests/DocumentationExamples/Support/ExampleStorage.swift → repository root.
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<4 { url.deleteLastPathComponent() }
        return url.appendingPathComponent("ExampleStorage").path
    }()

    /// The storage as published at `version`: what a host serves.
    static func snapshot(_ version: String) -> URL {
        URL(fileURLWithPath: root + "/versions/" + version)
    }

    /// Every folder and file a client folder holds at `version` (from `manifests/<version>.json`).
    static func expectedTree(_ version: String) -> (folders: Set<String>, files: Set<String>) {
        let data = FileManager.default.contents(atPath: root + "/manifests/\(version).json")!
        let object = try! JSONSerialization.jsonObject(with: data) as! [String: Any]
        return (Set(object["folders"] as! [String]), Set((object["files"] as! [String: Any]).keys))
    }

    /// Checks that `folder` holds exactly `version`'s tree, each file with the published bytes.
    static func expectTree(_ folder: String, is version: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let expected = expectedTree(version)
        var folders: Set<String> = []
        var files: Set<String> = []
        let enumerator = FileManager.default.enumerator(atPath: folder)
        while let relative = enumerator?.nextObject() as? String {
            var isFolder: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: folder + "/" + relative, isDirectory: &isFolder)
            if isFolder.boolValue { folders.insert(relative) } else { files.insert(relative) }
        }
        #expect(folders == expected.folders, "folders differ from \(version)", sourceLocation: sourceLocation)
        #expect(files == expected.files, "files differ from \(version)", sourceLocation: sourceLocation)
        for file in files.intersection(expected.files) {
            let published = FileManager.default.contents(atPath: snapshot(version).path + "/RXCacheContent/" + file)
            #expect(
                FileManager.default.contents(atPath: folder + "/" + file) == published,
                "\(file) differs from \(version)",
                sourceLocation: sourceLocation)
        }
    }
}

/// A loopback host serving ExampleStorage, and a scratch folder for the app's files.
struct ExampleHost {
    let server: StorageServer
    /// A fresh folder, deleted afterwards: where the app keeps its content and state.
    let appSupport: String

    /// The storage URL an app configures.
    var storageURL: URL { server.baseURL! }

    /// Publishes `version`: the host serves that snapshot from the next request on.
    func publish(_ version: String) {
        server.setRoot(ExampleStorage.snapshot(version))
    }

    /// Storage-relative content paths the host answered with a body since the log was reset.
    func contentDownloads() -> [String] {
        server.requests().filter { $0.path.hasPrefix("/RXCacheContent/") && ($0.status == 200 || $0.status == 206) }
            .map { String($0.path.dropFirst("/RXCacheContent/".count)) }
    }
}

/// Serves `version` of ExampleStorage (or `root`) on loopback and runs `body` with a fresh
/// scratch folder.
func withExampleHost<T>(
    serving version: String = "1.0", root: URL? = nil,
    _ body: (ExampleHost) async throws -> T
) async throws -> T {
    let scratch = NSTemporaryDirectory() + "docs-examples-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: scratch) }
    return try await withStorageServer(root: root ?? ExampleStorage.snapshot(version)) { server in
        try await body(ExampleHost(server: server, appSupport: scratch))
    }
}

/// A copy of a snapshot in `scratch`, for a test that damages the storage.
func copyOfSnapshot(_ version: String, in scratch: String) throws -> URL {
    let destination = scratch + "/storage-" + version
    try FileManager.default.copyItem(atPath: ExampleStorage.snapshot(version).path, toPath: destination)
    return URL(fileURLWithPath: destination)
}

/// A flag an example's connection policy reads, flipped by the test.
final class Flag: Sendable {
    private let stored: Mutex<Bool>

    init(_ value: Bool) { stored = Mutex(value) }

    var value: Bool {
        get { stored.withLock { $0 } }
        set { stored.withLock { $0 = newValue } }
    }
}
