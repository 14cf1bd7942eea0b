import Foundation
import StorageServer
import Testing

/// A storage document saved as UTF-16 (PowerShell's `Out-File` did so before PowerShell 6, with
/// a byte order mark) is refused naming its encoding and the fix; the mirror keeps its version.
@Suite("sync-agent names a storage document's wrong encoding", .timeLimit(.minutes(3)))
struct DocumentEncodingCLITests {
    @Test(arguments: [String.Encoding.utf16LittleEndian, .utf16BigEndian, .utf16, .utf32LittleEndian])
    func aDocumentInUTF16IsRefusedNamingTheEncoding(encoding: String.Encoding) async throws {
        try await withScratch { scratch in
            let storage = scratch + "/storage"
            try FileManager.default.copyItem(atPath: SyncAgentCLITests.exampleStorage + "/1.2", toPath: storage)
            let status = storage + "/RXCacheConfig/cacheStatus.json"
            let text = try String(contentsOfFile: status, encoding: .utf8)
            try await withStorageServer(root: URL(fileURLWithPath: storage)) { server in
                let arguments = [
                    "sync", "--base-url", server.baseURL!.absoluteString, "--dir", scratch + "/content", "--state",
                    scratch + "/state.sqlite",
                ]
                try FileManager.default.removeItem(atPath: status)
                try #require(text.data(using: encoding)).write(to: URL(fileURLWithPath: status))
                let refused = try await SyncAgentBinary.run(arguments, scratch: scratch)
                #expect(refused.status == 4, "\(refused.stderr)")
                let named = ["UTF-16LE", "UTF-16BE", "UTF-32LE"].filter {
                    refused.stderr.contains("the text is \($0), not UTF-8")
                }
                #expect(named.count == 1, "\(refused.stderr)")
                #expect(refused.stderr.contains("cacheStatus.json: invalid JSON at byte 0"), "\(refused.stderr)")
                #expect(refused.stderr.contains("save it as UTF-8"), "\(refused.stderr)")
                #expect(!FileManager.default.fileExists(atPath: scratch + "/content"))
                // Saved as UTF-8 again, it syncs.
                try FileManager.default.removeItem(atPath: status)
                try text.write(toFile: status, atomically: true, encoding: .utf8)
                let synced = try await SyncAgentBinary.run(arguments, scratch: scratch)
                #expect(synced.status == 0, "\(synced.stderr)")
            }
        }
    }
}
