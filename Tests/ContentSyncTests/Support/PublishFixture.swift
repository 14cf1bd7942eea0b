import Foundation

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// Publishes ExampleStorage's contents with `Publisher`, as a publisher would.
enum PublishFixture {
    static let base = URL(string: "https://publish.invalid/store/")!

    /// ExampleStorage's content of `version`, with the empty folders a git checkout drops.
    static func materializeContent(_ version: String, at path: String) throws {
        try FileManager.default.copyItem(
            atPath: ExampleStorageFixture.snapshot(version).path + "/RXCacheContent", toPath: path)
        for folder in ExampleStorageFixture.manifest(version).folders {
            try FileManager.default.createDirectory(atPath: path + "/" + folder, withIntermediateDirectories: true)
        }
    }

    static func publish(
        _ version: String, storage: String, scratch: String, initialize: Bool = false, minimal: String? = nil
    ) throws -> PublishReport {
        let content = scratch + "/content-\(version)"
        if !FileManager.default.fileExists(atPath: content) { try materializeContent(version, at: content) }
        var options = PublishOptions(
            storage: storage, content: content, version: v(version), minimal: minimal.map(v), baseURL: Self.base)
        options.initialize = initialize
        return try Publisher.publish(options)
    }

}
