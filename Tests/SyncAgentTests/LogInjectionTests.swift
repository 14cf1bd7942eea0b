import Foundation
import Logging
import StorageServer
import SyncDaemon
import Testing

@testable import SyncAgent

/// Text a storage, a server or a hook controls reaches log lines, systemd's STATUS= and the CLI's
/// one-line errors; a newline in it must not forge a line of its own, nor an escape sequence
/// reach a terminal.
@Suite("Control characters from a storage cannot forge a log line, a STATUS= or a CLI line", .timeLimit(.minutes(3)))
struct LogInjectionTests {
    static let date = Date(timeIntervalSince1970: 1_795_000_000)
    /// A version a hostile storage publishes: a newline forging a critical line, a carriage
    /// return, a terminal escape, a line separator, a C1 CSI and DEL.
    static let hostileVersion = "1.2\nlevel=critical forged=1\r\u{1B}[2J\u{2028}end\u{9B}\u{7F}"

    @Test(
        "LogText.escaped",
        arguments: [
            ("plain text, ünïcödé ✓", "plain text, ünïcödé ✓"),
            ("a\nb\rc\td", #"a\nb\rc\td"#),
            ("\u{0}\u{1B}[31m\u{7F}", #"\u{0}\u{1B}[31m\u{7F}"#),
            ("x\u{85}y\u{9B}z", #"x\u{85}y\u{9B}z"#),
            ("p\u{2028}q\u{2029}r", #"p\u{2028}q\u{2029}r"#),
            ("\r\n", #"\r\n"#),
        ])
    func escaped(input: String, expected: String) {
        #expect(LogText.escaped(input) == expected)
    }

    @Test(
        "text and journald escape the message and every key and value; JSON stays one object a line",
        arguments: [LogFormat.text, .journald, .json])
    func everyField(format: LogFormat) throws {
        let line = AgentLogHandler.line(
            format: format, level: .error, message: "check failed: '\(Self.hostileVersion)'",
            metadata: ["from": "\(Self.hostileVersion)", "key\nlevel=critical": "v", "hook": "ok"], date: Self.date)
        #expect(
            !line.unicodeScalars.contains { LogText.needsEscape($0) },
            "a raw control character in \(line.debugDescription)")
        switch format {
        case .text:
            #expect(
                line.hasPrefix(
                    "2026-11-18T11:06:40Z error check failed: '1.2\\nlevel=critical forged=1\\r\\u{1B}[2J\\u{2028}end\\u{9B}\\u{7F}'"
                ), "\(line)")
            #expect(
                line.contains(#" "key\nlevel=critical"=v"#) && line.contains(#" from="1.2\nlevel=critical forged=1"#)
                    && line.contains(" hook=ok "), "\(line)")
            // A value cannot forge fields of its own: spaces, `=` and quotes are quoted.
            let forged = AgentLogHandler.line(
                format: .text, level: .info, message: "m",
                metadata: ["storage": "x storage=fake level=critical", "q": #"a\" b"#, "e": ""], date: Self.date)
            #expect(forged.hasSuffix(#" e="" q="a\\\" b" storage="x storage=fake level=critical""#), "\(forged)")
        case .journald:
            #expect(line.hasPrefix(#"<3>check failed: '1.2\nlevel=critical"#), "\(line)")
        case .json:
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String])
            #expect(
                object["from"] == Self.hostileVersion && object["key\nlevel=critical"] == "v",
                "the values survive, escaped: \(line)")
            #expect(line.contains(#"\u2028"#) && line.contains(#"\u009B"#), "\(line)")
        }
    }

    /// A copy of ExampleStorage 1.2 whose status publishes ``hostileVersion``.
    static func hostileStorage(_ scratch: String) throws -> URL {
        let folder = scratch + "/hostile"
        try FileManager.default.copyItem(atPath: SyncAgentCLITests.exampleStorage + "/1.2", toPath: folder)
        let status = folder + "/RXCacheConfig/cacheStatus.json"
        let escaped = String(decoding: try JSONEncoder().encode(Self.hostileVersion), as: UTF8.self)
        let text = try String(contentsOfFile: status, encoding: .utf8)
            .replacingOccurrences(of: #""actualCacheVersion" : "1.2""#, with: #""actualCacheVersion" : "# + escaped)
        #expect(text.contains("level=critical"))
        try text.write(toFile: status, atomically: true, encoding: .utf8)
        return URL(fileURLWithPath: folder)
    }

    @Test(
        "watch against a storage whose version holds a newline: one line per entry in the log, one line per STATUS=",
        arguments: ["text", "journald"])
    func watchLogAndStatus(format: String) async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: try Self.hostileStorage(scratch)) { server in
                let systemd = try FakeNotifySocket(name: scratch + "/notify.sock")
                defer { systemd.close() }
                let process = try SyncAgentBinary.watch(
                    server, scratch: scratch, ["--interval", "60", "--log-format", format],
                    environment: ["NOTIFY_SOCKET": scratch + "/notify.sock"])
                async let exitStatus = process.exitStatus()
                let log = { (try? String(contentsOfFile: scratch + "/watch.log", encoding: .utf8)) ?? "" }
                var waited = 0
                while !(log().contains("check failed")
                    && systemd.messages.contains { $0.hasPrefix("STATUS=check failed") }), waited < 300
                {
                    try await Task.sleep(for: .milliseconds(50))
                    waited += 1
                }
                process.send(SIGTERM)
                #expect(await exitStatus == 0)
                let text = log()
                let failed = try #require(text.split(separator: "\n").first { $0.contains("check failed") }, "\(text)")
                #expect(failed.contains(#"1.2\nlevel=critical forged=1\r\u{1B}[2J\u{2028}end"#), "\(failed)")
                let start = try Regex(
                    format == "text"
                        ? #"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ (debug|info|notice|warning|error|critical) "# : #"<[2-7]>"#)
                for line in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast() {
                    #expect(
                        line.prefixMatch(of: start) != nil,
                        "a line the agent did not start:\n\(line)\n--- log:\n\(text)")
                }
                #expect(
                    !text.unicodeScalars.contains { $0 != "\n" && LogText.needsEscape($0) },
                    "a raw control character in the log")
                let messages = systemd.messages
                #expect(
                    messages.contains { $0.hasPrefix("STATUS=check failed") && $0.contains(#"\nlevel=critical"#) },
                    "\(messages)")
                for message in messages {
                    #expect(
                        !message.unicodeScalars.contains { LogText.needsEscape($0) },
                        "one KEY=value a datagram: \(message.debugDescription)")
                }
            }
        }
    }

    @Test("sync's failure is one line on stderr, and status shows one fact a line")
    func syncAndStatus() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: try Self.hostileStorage(scratch)) { server in
                let folder = ["--dir", scratch + "/content", "--state", scratch + "/state.sqlite"]
                let sync = try await SyncAgentBinary.run(
                    ["sync", "--base-url", server.baseURL!.absoluteString] + folder, scratch: scratch)
                // The CLI's line joins a message's lines with spaces (a config file's problems) and escapes the rest.
                #expect(
                    sync.status == 4 && sync.stderr.contains(#"'1.2 level=critical forged=1\r\u{1B}[2J\u{2028}end"#),
                    "\(sync.stderr)")
                #expect(
                    sync.stderr.hasSuffix("\n")
                        && sync.stderr.dropLast().unicodeScalars.allSatisfy { !LogText.needsEscape($0) },
                    "one line: \(sync.stderr.debugDescription)")
                let status = try await SyncAgentBinary.run(["status"] + folder, scratch: scratch)
                #expect(
                    status.stdout.contains(#"last error:   "#) && status.stdout.contains(#"\nlevel=critical"#),
                    "\(status.stdout)")
                for line in status.stdout.split(separator: "\n") {
                    #expect(
                        line.prefixMatch(of: #/[a-z ]+: /#) != nil,
                        "a line status did not write: \(line.debugDescription)")
                }
                let check = try await SyncAgentBinary.run(["status", "--check"] + folder, scratch: scratch)
                #expect(
                    check.status == 9 && check.stderr.split(separator: "\n").count == 1,
                    "\(check.stderr.debugDescription)")
            }
        }
    }
}
