import FileKit
import Foundation
import Testing

@testable import ItemCache

/// A relative cache folder is the working folder's: a bare name used to crash in Foundation
/// (SIGILL, taking the parent of a one-component path) instead of opening.
@Suite("A relative cache folder")
struct RelativeFolderTests {
    @Test("a bare folder name opens, stores and reads, as the working folder's")
    func bareName() async throws {
        let name = "item-cache-relative-\(UUID().uuidString.prefix(8))"
        let absolute = FileManager.default.currentDirectoryPath + "/" + name
        defer { try? FileManager.default.removeItem(atPath: absolute) }
        let store = try ItemStore(configuration: CacheConfiguration(folder: name))
        #expect(store.configuration.folder == FileSystem.absolutePath(absolute))
        let key = try CacheKey.custom("k")
        try await store.store(Data("v".utf8), for: key)
        #expect(try await store.item(for: key)?.item.data == Data("v".utf8))
        try await store.close()
        var isFolder: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: absolute, isDirectory: &isFolder) && isFolder.boolValue)
    }
}
