import FileKit
import Foundation
import StorageServer
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

/// `ItemLoader(configuration:)` starts its own libcurl transport on the first HTTP request only.
@Suite("A loader's own transport starts when it is first needed")
struct LazyTransportTests {
    @Test("file URLs never start it; the first HTTP request does; close ends it")
    func startsOnFirstHTTPRequest() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let file = folder + "-value.txt"
        try Data("from a file".utf8).write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        let origin = try StorageServerScripted.origin()
        defer { origin.stop() }
        let loader = try ItemLoader(configuration: CacheConfiguration(folder: folder))
        let own = try #require(loader.ownedTransport)
        #expect(try await loader.item(for: URL(fileURLWithPath: file)).data == Data("from a file".utf8))
        #expect(!own.isStarted)
        #expect(try await loader.item(for: origin.url("/v")).data == Data("over http".utf8))
        #expect(own.isStarted)
        try await loader.close()
    }
}

/// A scripted origin answering every path with the same body.
enum StorageServerScripted {
    static func origin() throws -> ScriptedOrigin {
        try ScriptedOrigin { _ in
            ScriptedOrigin.Answer(headers: ["Cache-Control: max-age=60"], body: Data("over http".utf8))
        }
    }
}
