import Foundation
import StorageServer
import Testing

@testable import Transport

/// Answers libcurl and the transport read differently must not pass as successes (an outside
/// audit): a status line libcurl takes and the transport does not skipped every check of the
/// response and dropped its body, yet ended as a 200; and a 416 that called a half file whole
/// contradicted the length of the answer its bytes came from.
@Suite(.timeLimit(.minutes(3)))
struct StatusLineAndResumeTests {
    @Test(arguments: ["http/1.1 200 OK", "Http/1.1 200 OK"])
    func aStatusLineLibcurlReadsAndTheTransportDoesNotIsRefused(line: String) async throws {
        let origin = try ScriptedOrigin { _ in
            var answer = ScriptedOrigin.Answer(body: Data("hello".utf8))
            answer.statusLine = line
            return answer
        }
        defer { origin.stop() }
        let transport = try makeTransport { $0.retry = .none }
        await #expect {
            _ = try await transport.data(for: HTTPRequest(url: origin.url("/a")))
        } throws: { error in
            let error = error as? TransportError
            return error?.code == .invalidResponse && error?.message.contains("status line") == true
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("status-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        await #expect(throws: TransportError.self) {
            _ = try await transport.download(
                HTTPRequest(url: origin.url("/a")), to: directory.path + "/a", options: DownloadOptions())
        }
    }

    /// The first answer declares 200 000 bytes and is cut at half; the resume is answered 416
    /// `bytes */100000` with the same tag. Calling the half file whole used to succeed.
    @Test func aResumeAnswered416WithAShorterLengthIsNotWhole() async throws {
        let body = randomBytes(200_000)
        let origin = try ScriptedOrigin { request in
            if request.header("range") == nil {
                return ScriptedOrigin.Answer(
                    headers: ["ETag: \"T\"", "Content-Length: 200000"], body: body.prefix(100_000), closes: true)
            }
            return ScriptedOrigin.Answer(status: 416, headers: ["ETag: \"T\"", "Content-Range: bytes */100000"])
        }
        defer { origin.stop() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("resume-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let transport = try makeTransport()
        let response = try? await transport.download(
            HTTPRequest(url: origin.url("/f")), to: directory.path + "/f", options: DownloadOptions())
        #expect(response == nil, "a half file passed as whole: \(response.map { "\($0.fileSize) bytes" } ?? "")")
        #expect(origin.requests.contains { $0.header("range") == "bytes=100000-" }, "the resume was asked")
    }

    /// A resume answered 206 with a shorter whole than the kept length: another entity under
    /// the same tag (a truncated file was installed). Refused, the partial file emptied.
    @Test func aResumeWhoseWholeDiffersFromTheKeptLengthIsRefused() async throws {
        let origin = try ScriptedOrigin { _ in
            ScriptedOrigin.Answer(
                status: 206, headers: ["ETag: \"T\"", "Content-Range: bytes 100000-100009/100010"],
                body: Data(repeating: 0x42, count: 10))
        }
        defer { origin.stop() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("short-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try randomBytes(100_000).write(to: directory.appendingPathComponent("f"))
        let options = DownloadOptions(resumeETag: "\"T\"", resumeLength: 200_000)
        await #expect(throws: TransportError.self) {
            _ = try await makeTransport { $0.retry = .none }.download(
                HTTPRequest(url: origin.url("/f")), to: directory.path + "/f", options: options)
        }
        let left = try Data(contentsOf: directory.appendingPathComponent("f"))
        #expect(left.isEmpty, "the partial file was emptied, so the next attempt fetches it whole")
    }

    /// The same across processes: the caller kept the whole length beside the tag
    /// (``DownloadOptions/resumeLength``), and a 416 calling the half file whole is not believed.
    @Test(arguments: [Int64?.some(200_000), nil])
    func aKeptLengthHoldsA416ToIt(kept: Int64?) async throws {
        let origin = try ScriptedOrigin { _ in
            ScriptedOrigin.Answer(status: 416, headers: ["ETag: \"T\"", "Content-Range: bytes */100000"])
        }
        defer { origin.stop() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("kept-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try randomBytes(100_000).write(to: directory.appendingPathComponent("f"))
        var options = DownloadOptions(resumeETag: "\"T\"")
        options.resumeLength = kept
        let response = try? await makeTransport { $0.retry = .none }.download(
            HTTPRequest(url: origin.url("/f")), to: directory.path + "/f", options: options)
        // Without a kept length nothing says the file is whole: it is not believed either.
        #expect(response == nil)
    }
}
