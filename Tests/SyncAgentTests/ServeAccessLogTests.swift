import Foundation
import Testing

@testable import StorageServer
@testable import SyncAgent

/// `serve --access-log` and the warning for a folder that is not a storage.
@Suite("serve: an access log, and a warning when the folder is not a storage", .timeLimit(.minutes(3)))
struct ServeAccessLogTests {
    @Test("a sync through serve --access-log leaves one common-log line per request, revalidations visible")
    func accessLog() async throws {
        try await withScratch { scratch in
            let log = scratch + "/access.log"
            let (server, url) = try await SyncAgentBinary.serve(
                SyncAgentCLITests.exampleStorage + "/1.4", scratch: scratch,
                arguments: ["--access-log", log], stderr: scratch + "/serve.err")
            defer { server.send(SIGTERM) }
            for _ in 0..<2 {
                let sync = try await SyncAgentBinary.run(
                    [
                        "sync", "--base-url", url.absoluteString, "--dir", scratch + "/content",
                        "--state", scratch + "/state.sqlite", "--quiet",
                    ], scratch: scratch)
                #expect(sync.status == 0, "\(sync.stderr)")
            }
            try await Task.sleep(for: .milliseconds(100))
            let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")
            let status = lines.filter { $0.contains("\"GET /RXCacheConfig/cacheStatus.json HTTP/1.1\"") }
            #expect(status.count == 2, "\(lines)")
            #expect(
                status.first?.contains("\" 200 ") == true && status.last?.contains("\" 304 0 ") == true,
                "the second sync revalidates: \(status)")
            #expect(lines.allSatisfy { $0.hasPrefix("127.0.0.1 - - [") }, "\(lines)")
            #expect(lines.contains { $0.contains("RXCacheContent.zip") }, "the first sync restored from the archive")
            #expect(
                ((try? String(contentsOfFile: scratch + "/serve.err", encoding: .utf8)) ?? "").isEmpty,
                "a storage: no warning")
        }
    }

    @Test("a folder without RXCacheConfig/cacheStatus.json is served with a warning")
    func notAStorage() async throws {
        try await withScratch { scratch in
            try FileManager.default.createDirectory(atPath: scratch + "/plain", withIntermediateDirectories: true)
            let (server, _) = try await SyncAgentBinary.serve(
                scratch + "/plain", scratch: scratch, stderr: scratch + "/serve.err")
            server.send(SIGTERM)
            _ = await server.exitStatus()
            let warning = (try? String(contentsOfFile: scratch + "/serve.err", encoding: .utf8)) ?? ""
            #expect(warning.hasPrefix("warning: ") && warning.contains("RXCacheConfig/cacheStatus.json"), "\(warning)")
        }
    }

    @Test("the line escapes quotes and control characters")
    func lineFormat() {
        let record = RequestRecord(
            method: "GET", path: "/a b\n.json", headers: ["user-agent": "x\"y", "if-none-match": "\"e1\""], status: 304,
            bodyBytes: 0, fault: nil)
        let line = ServeCommand.accessLogLine(record, at: Date(timeIntervalSince1970: 0))
        #expect(
            line
                == #"127.0.0.1 - - [01/Jan/1970:00:00:00 +0000] "GET /a%20b%0A.json HTTP/1.1" 304 0 "-" "x\"y" inm="\"e1\"" range="-""#
        )
    }
}
