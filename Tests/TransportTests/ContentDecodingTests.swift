import Foundation
import StorageServer
import Testing

@testable import Transport

/// A compressed body counts only when its compressed stream came to its end: whole HTTP framing
/// (a `Content-Length` that counts the short body) around a stream cut short is not a whole body.
@Suite(.timeLimit(.minutes(3)))
struct ContentDecodingTests {
    /// Text that compresses, with random lines so that equal bytes mean a real copy.
    static func text(lines: Int = 2_000) -> Data {
        var text = ""
        for _ in 0..<lines { text += "line \(UInt32.random(in: 0...999_999)) of the published document\n" }
        return Data(text.utf8)
    }

    /// The three shapes of one body: gzip from the system's `gzip -n` (a 10-byte header, no
    /// name), the raw deflate stream inside it, and that stream in a zlib wrapper.
    struct Coded {
        var plain: Data
        var gzip: Data
        var rawDeflate: Data { gzip.subdata(in: 10..<(gzip.count - 8)) }
        var zlib: Data {
            var a: UInt32 = 1
            var b: UInt32 = 0
            for byte in plain {
                a = (a + UInt32(byte)) % 65_521
                b = (b + a) % 65_521
            }
            let adler = b << 16 | a
            return Data([0x78, 0x9C]) + rawDeflate
                + Data([UInt8(adler >> 24), UInt8(adler >> 16 & 0xFF), UInt8(adler >> 8 & 0xFF), UInt8(adler & 0xFF)])
        }

        static func make(_ plain: Data = ContentDecodingTests.text()) async throws -> Coded {
            let gzip = try await GzipEncoding.compress(plain)
            try #require(gzip.prefix(4) == Data([0x1F, 0x8B, 8, 0]), "gzip -n wrote a header with flags")
            return Coded(plain: plain, gzip: gzip)
        }
    }

    /// Serves `body` as it is, under `Content-Encoding: coding`, with a `Content-Length` that counts it.
    private func fetch(_ body: Data, coding: String, status: Int = 200) async throws -> (
        data: Result<HTTPResponse, TransportError>, download: Result<HTTPResponse, TransportError>, file: Data
    ) {
        try await withServedFixture { server, fixture in
            server.injectFault(.status(status, headers: ["Content-Encoding": coding], body: body), forPath: "/a.txt")
            let transport = try makeTransport { $0.retry = .none }
            let url = server.url(for: "a.txt")
            let destination = fixture.outPath("a.txt")
            let data = await outcome { try await transport.data(for: HTTPRequest(url: url)) }
            let download = await outcome {
                try await transport.download(HTTPRequest(url: url), to: destination, options: DownloadOptions())
            }
            return (data, download, fileContents(destination))
        }
    }

    private func outcome(_ body: () async throws -> HTTPResponse) async -> Result<HTTPResponse, TransportError> {
        do {
            return .success(try await body())
        } catch let error as TransportError {
            return .failure(error)
        } catch {
            return .failure(TransportError(code: .network, message: "not a TransportError: \(error)", url: nil))
        }
    }

    @Test(arguments: ["gzip", "zlib", "raw deflate", "x-gzip", "two gzip members"])
    func everyFormOfAWholeBodyDecodesToItsBytes(form: String) async throws {
        let first = try await Coded.make()
        let second = try await Coded.make(Self.text(lines: 300))
        let (body, coding, expected): (Data, String, Data) =
            switch form {
            case "gzip": (first.gzip, "gzip", first.plain)
            case "zlib": (first.zlib, "deflate", first.plain)
            case "raw deflate": (first.rawDeflate, "deflate", first.plain)
            case "x-gzip": (first.gzip, "x-gzip", first.plain)
            default: (first.gzip + second.gzip, "gzip", first.plain + second.plain)
            }

        let fetched = try await fetch(body, coding: coding)

        #expect(try fetched.data.get().body == expected)
        #expect(try fetched.download.get().fileSize == Int64(expected.count))
        #expect(fetched.file == expected)
    }

    /// Each cut leaves HTTP framing that is whole: the server's `Content-Length` counts the short body.
    @Test(arguments: [
        ("gzip", "half"), ("gzip", "no trailer"), ("gzip", "no length in the trailer"),
        ("zlib", "half"), ("zlib", "no checksum"), ("raw deflate", "half"), ("raw deflate", "one byte"),
        ("gzip", "header only"),
    ])
    func aCompressedStreamCutShortIsRefusedForDataAndDownloads(form: String, cut: String) async throws {
        let coded = try await Coded.make()
        let whole =
            switch form {
            case "gzip": coded.gzip
            case "zlib": coded.zlib
            default: coded.rawDeflate
            }
        let kept =
            switch cut {
            case "half": whole.count / 2
            case "no trailer": whole.count - 8
            case "no length in the trailer": whole.count - 4
            case "no checksum": whole.count - 4
            case "one byte": 1
            default: 10
            }

        let fetched = try await fetch(whole.prefix(kept), coding: form == "gzip" ? "gzip" : "deflate")

        for result in [fetched.data, fetched.download] {
            #expect(throws: TransportError.self) { try result.get() }
            if case .failure(let error) = result {
                #expect(error.code == .invalidResponse)
                #expect(error.message.contains("stops before its end"), "\(error.message)")
                #expect(error.message.contains("\(kept) bytes came"), "\(error.message)")
            }
        }
    }

    @Test(arguments: ["a changed checksum", "garbage after the end", "bytes after a zlib stream", "not gzip at all"])
    func aBodyThatIsNotItsCodingIsRefused(damage: String) async throws {
        let coded = try await Coded.make()
        var gzip = coded.gzip
        let (body, coding): (Data, String)
        switch damage {
        case "a changed checksum":
            gzip[gzip.count - 6] ^= 0x01
            (body, coding) = (gzip, "gzip")
        case "garbage after the end":
            (body, coding) = (gzip + Data("trailing".utf8), "gzip")
        case "bytes after a zlib stream":
            (body, coding) = (coded.zlib + Data([0, 1, 2]), "deflate")
        default:
            (body, coding) = (coded.plain, "gzip")
        }

        let fetched = try await fetch(body, coding: coding)

        for result in [fetched.data, fetched.download] {
            #expect(throws: TransportError.self) { try result.get() }
            if case .failure(let error) = result {
                #expect(error.code == .invalidResponse)
                #expect(error.message.contains("Content-Encoding: \(coding)"), "\(error.message)")
            }
        }
    }

    @Test(arguments: ["br", "zstd", "gzip, gzip", "compress"])
    func aCodingThisClientDoesNotReadIsRefusedByName(coding: String) async throws {
        let fetched = try await fetch(randomBytes(300), coding: coding)

        for result in [fetched.data, fetched.download] {
            #expect(throws: TransportError.self) { try result.get() }
            if case .failure(let error) = result {
                #expect(error.code == .invalidResponse)
                #expect(error.message.contains("Content-Encoding: \(coding), which this client cannot decode"))
            }
        }
        #expect(fetched.file.isEmpty)
    }

    @Test func theOfferIsTheCodingsTheDecoderReads() async throws {
        try await withServedFixture { server, fixture in
            try fixture.serve("a.txt", Data("x".utf8))
            _ = try await makeTransport().data(for: HTTPRequest(url: server.url(for: "a.txt")))
            #expect(server.requests().map { $0.header("accept-encoding") } == ["gzip, deflate"])
        }
    }

    /// The decoder alone, fed one byte at a time: a deflate body's first byte is held until the
    /// second says zlib or raw, and a gzip member may end anywhere.
    @Test(arguments: ["gzip", "zlib", "raw deflate"])
    func theDecoderTakesAnyChunking(form: String) async throws {
        let coded = try await Coded.make(Self.text(lines: 200))
        let (body, coding): (Data, ContentDecoder.Coding) =
            switch form {
            case "gzip": (coded.gzip + coded.gzip, .gzip)
            case "zlib": (coded.zlib, .deflate)
            default: (coded.rawDeflate, .deflate)
            }
        let decoder = ContentDecoder(coding: coding)
        var decoded = Data()

        for index in body.indices {
            var byte = body[index]
            let outcome = withUnsafeBytes(of: &byte) { piece in
                decoder.decode(piece) {
                    decoded.append(contentsOf: $0)
                    return true
                }
            }
            guard case .decoded = outcome else {
                Issue.record("byte \(index) of \(form): \(outcome)")
                return
            }
            // Not whole before the last byte.
            if index < body.count - 1 && form != "gzip" { #expect(decoder.finish() != nil) }
        }

        #expect(decoder.finish() == nil)
        #expect(decoded == (form == "gzip" ? coded.plain + coded.plain : coded.plain))
    }

    /// A gzip stream of empty blocks (`00 00 00 ff ff`, forever from a hostile origin) decodes to
    /// nothing, so no limit on decoded bytes stops it: it is refused once its encoded bytes pass
    /// twice what they decoded to and 1 MiB, named as such, for data and downloads alike.
    @Test func aBodyOfEmptyBlocksIsRefusedWhileItStillComes() async throws {
        var body = Data([0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 0xFF])
        let block = Data([0, 0, 0, 0xFF, 0xFF])
        for _ in 0..<(3 << 20) / block.count { body += block }
        let (data, download, file) = try await fetch(body, coding: "gzip")
        for result in [data, download] {
            guard case .failure(let error) = result else {
                Issue.record("a body of empty blocks was taken")
                continue
            }
            #expect(error.code == .invalidResponse, "\(error)")
            #expect(error.message.contains("decoded to 0"), "\(error.message)")
        }
        #expect(file.isEmpty)
    }

    /// A chain of many tiny gzip members (appended log lines: about 2.5 encoded bytes a decoded
    /// one) is a body like any other, not an endless encoding.
    @Test func aChainOfTinyGzipMembersIsTaken() async throws {
        let line = Data("line 0001\n".utf8)
        let member = try await GzipEncoding.compress(line)
        var body = Data()
        for _ in 0..<150_000 { body += member }
        #expect(body.count > 2 * 150_000 * line.count + (1 << 20), "the members cost over twice their bytes")
        let (data, download, file) = try await fetch(body, coding: "gzip")
        if case .failure(let error) = data { Issue.record("\(error)") }
        if case .failure(let error) = download { Issue.record("\(error)") }
        #expect(file.count == 150_000 * line.count)
    }

    /// Folded header lines (obsolete line folding) join their field, and the fields of one name
    /// combine as usual, however many folds the head has (each fold once combined them all
    /// again: minutes of CPU for a hostile head).
    @Test func foldedLinesJoinTheirFieldOnce() async throws {
        let folds = (0..<2_000).map { " f\($0)" }
        let origin = try ScriptedOrigin { _ in
            ScriptedOrigin.Answer(
                headers: ["X-A: 1\r\n 2", "X-A: 3", "X-Many: start\r\n" + folds.joined(separator: "\r\n"), "X-B: b"],
                body: Data("ok".utf8))
        }
        let transport = try makeTransport { $0.retry = .none }
        let response = try await transport.data(for: HTTPRequest(url: origin.url("/h")))
        #expect(response.headers["x-a"] == "1 2, 3")
        #expect(response.headers["x-b"] == "b")
        #expect(response.headers["x-many"] == "start " + folds.map { String($0.dropFirst()) }.joined(separator: " "))
        origin.stop()
    }
}
