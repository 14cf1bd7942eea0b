import Foundation
import Synchronization
import Testing
import Transport

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// An app's own transport that answers the status file with `status` (`304 Not Modified` by
/// default) and no body, whether or not the request was conditional, and passes everything else
/// to libcurl.
final class NotModifiedStatusTransport: Transport {
    let base: CurlTransport
    let status: Int
    private let conditional = Mutex<[Bool]>([])
    init(status: Int = 304) throws {
        self.base = try CurlTransport()
        self.status = status
    }

    /// For each status request so far: whether it carried `If-None-Match`.
    var statusRequestsWereConditional: [Bool] { conditional.withLock { $0 } }

    func data(for request: HTTPRequest) async throws -> HTTPResponse {
        guard request.url.lastPathComponent == "cacheStatus.json" else { return try await base.data(for: request) }
        conditional.withLock { $0.append(request.headers["If-None-Match"] != nil) }
        return HTTPResponse(statusCode: status, url: request.url)
    }

    func download(_ request: HTTPRequest, to path: String, options: DownloadOptions) async throws -> HTTPResponse {
        try await base.download(request, to: path, options: options)
    }
}

/// A transport that answers a conditional request for the status file with a `304` naming
/// another entity tag than the one sent, and passes everything else (the unconditional
/// request too) to libcurl.
final class OtherTagNotModifiedTransport: Transport {
    let base: CurlTransport
    private let requests = Mutex<[Bool]>([])
    init() throws { self.base = try CurlTransport() }

    /// For each status request so far: whether it carried `If-None-Match`.
    var statusRequestsWereConditional: [Bool] { requests.withLock { $0 } }

    func data(for request: HTTPRequest) async throws -> HTTPResponse {
        guard request.url.lastPathComponent == "cacheStatus.json" else { return try await base.data(for: request) }
        let conditional = request.headers["If-None-Match"] != nil
        requests.withLock { $0.append(conditional) }
        guard conditional else { return try await base.data(for: request) }
        return HTTPResponse(statusCode: 304, headers: ["etag": "\"another-representation\""], url: request.url)
    }

    func download(_ request: HTTPRequest, to path: String, options: DownloadOptions) async throws -> HTTPResponse {
        try await base.download(request, to: path, options: options)
    }
}

/// An app's own transport that answers every content download with `status` and an empty file.
final class BodilessDownloadTransport: Transport {
    let base: CurlTransport
    let status: Int
    init(status: Int) throws {
        self.base = try CurlTransport()
        self.status = status
    }

    func data(for request: HTTPRequest) async throws -> HTTPResponse {
        try await base.data(for: request)
    }

    func download(_ request: HTTPRequest, to path: String, options: DownloadOptions) async throws -> HTTPResponse {
        guard request.url.path.contains("/RXCacheContent/") else {
            return try await base.download(request, to: path, options: options)
        }
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        return HTTPResponse(statusCode: status, url: request.url)
    }
}

/// A `304` is an answer only when a stored copy backs the ETag that was sent. libcurl's transport
/// refuses an unconditional one itself; the engine holds the same line for an app's transport.
@Suite("A 304 without a stored copy is refused, not read as an empty file", .timeLimit(.minutes(3)))
struct NotModifiedAnswerTests {
    /// RFC 9111 §4.3.4: a 304 whose entity tag is not the stored one's updates nothing. The
    /// engine took it as "up to date" and stayed on 1.0 while the storage published 1.2.
    @Test func a304NamingAnotherEntityTagFetchesTheStatusWhole() async throws {
        try await withSyncHarness { harness in
            try await harness.sync()
            try harness.expectTree(is: "1.0")
            harness.server.setRoot(ExampleStorageFixture.snapshot("1.2"))
            var configuration = harness.configuration()
            let transport = try OtherTagNotModifiedTransport()
            configuration.transport = transport
            let report = try await CacheManager(configuration: configuration).checkForUpdates()
            #expect(report.toVersion.text == "1.2")
            #expect(transport.statusRequestsWereConditional == [true, false])
            try harness.expectTree(is: "1.2")
        }
    }

    @Test func anUnconditional304IsANetworkFaultThatNamesIt() async throws {
        try await withSyncHarness { harness in
            var configuration = harness.configuration()
            let transport = try NotModifiedStatusTransport()
            configuration.transport = transport
            let error = await #expect(throws: SyncError.self) {
                try await CacheManager(configuration: configuration).checkForUpdates()
            }
            // An empty body read as the status would say the storage is invalid (exit 4).
            #expect(error?.code == .network, "\(String(describing: error))")
            #expect(error?.message.contains("304") == true, "\(String(describing: error))")
            #expect(error?.message.contains("cacheStatus.json") == true, "\(String(describing: error))")
            #expect(transport.statusRequestsWereConditional == [false])
            #expect(!FileManager.default.fileExists(atPath: harness.content + "/RXCacheContent"))

            // The same client with a well-behaved transport then syncs normally.
            try await harness.sync()
            try harness.expectTree(is: "1.0")
        }
    }

    @Test func a304ToAConditionalRequestReusesTheStoredCopy() async throws {
        try await withSyncHarness { harness in
            try await harness.sync()
            var configuration = harness.configuration()
            let transport = try NotModifiedStatusTransport()
            configuration.transport = transport
            let report = try await CacheManager(configuration: configuration).checkForUpdates()
            #expect(report.outcome == .upToDate)
            #expect(transport.statusRequestsWereConditional == [true])
            try harness.expectTree(is: "1.0")
        }
    }

    @Test(arguments: [304, 204])
    func aBodilessAnswerToADownloadIsANetworkFaultAndTheMirrorStays(status: Int) async throws {
        try await withSyncHarness { harness in
            try await harness.sync()
            harness.serve("1.1")
            var configuration = harness.configuration()
            configuration.transport = try BodilessDownloadTransport(status: status)
            let error = await #expect(throws: SyncError.self) {
                try await CacheManager(configuration: configuration).checkForUpdates()
            }
            // Read as an empty file, it failed the size check and blamed the storage (exit 4).
            #expect(error?.code == .network, "\(String(describing: error))")
            #expect(error?.message.contains("HTTP \(status)") == true, "\(String(describing: error))")
            try harness.expectTree(is: "1.0")
            try await harness.sync()
            try harness.expectTree(is: "1.1")
        }
    }

    @Test(arguments: [204, 206])
    func aStatusFileWithoutAWholeBodyIsANetworkFault(status: Int) async throws {
        try await withSyncHarness { harness in
            var configuration = harness.configuration()
            configuration.transport = try NotModifiedStatusTransport(status: status)
            let error = await #expect(throws: SyncError.self) {
                try await CacheManager(configuration: configuration).checkForUpdates()
            }
            #expect(error?.code == .network, "\(String(describing: error))")
            #expect(error?.message.contains("HTTP \(status)") == true, "\(String(describing: error))")
        }
    }
}
