import Foundation
import Logging
import StorageServer
import Testing

@testable import SyncAgent

/// The daemon's log lines: journald priorities, JSON objects, and the lines an operator needs.
@Suite(
    "watch's logs: text, journald priority prefixes, JSON lines; start, update and finish lines",
    .timeLimit(.minutes(3)))
struct LogFormatTests {
    static let date = Date(timeIntervalSince1970: 1_795_000_000)

    @Test(
        "one line per format",
        arguments: [
            (LogFormat.journald, Logger.Level.info, "<6>checked dir=/srv/m"),
            (.journald, .warning, "<4>checked dir=/srv/m"),
            (.journald, .critical, "<2>checked dir=/srv/m"),
            (.journald, .debug, "<7>checked dir=/srv/m"),
            (.json, .error, #"{"dir":"/srv/m","level":"error","message":"checked","time":"2026-11-18T11:06:40Z"}"#),
            (.text, .notice, "2026-11-18T11:06:40Z notice checked dir=/srv/m"),
        ])
    func lines(format: LogFormat, level: Logger.Level, expected: String) {
        #expect(
            AgentLogHandler.line(
                format: format, level: level, message: "checked", metadata: ["dir": "/srv/m"], date: Self.date)
                == expected)
    }

    @Test("journald lines never span lines; the default follows $JOURNAL_STREAM")
    func journaldDetails() {
        #expect(
            AgentLogHandler.line(
                format: .journald, level: .error, message: "a\nb", metadata: ["k": "c\rd"], date: Self.date)
                == #"<3>a\nb k=c\rd"#)
        #expect(LogFormat.automatic(["JOURNAL_STREAM": "8:12345"]) == .journald)
        #expect(LogFormat.automatic([:]) == .text)
    }

    @Test(
        "--log-format json: a start line, an update-started line with the plan, the finish summary, each a JSON object")
    func daemonLines() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: URL(fileURLWithPath: SyncAgentCLITests.exampleStorage + "/1.2")) {
                server in
                let log = scratch + "/watch.log"
                let process = try SyncAgentBinary.watch(
                    server, scratch: scratch, ["--interval", "60", "--log-format", "json"])
                async let exitStatus = process.exitStatus()
                var lines: [[String: String]] = []
                for _ in 0..<200 {
                    let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                    lines = text.split(separator: "\n").compactMap {
                        try? JSONDecoder().decode([String: String].self, from: Data($0.utf8))
                    }
                    if lines.contains(where: { $0["message"]?.contains("1.2") == true }) { break }
                    try await Task.sleep(for: .milliseconds(50))
                }
                process.send(SIGTERM)
                #expect(await exitStatus == 0)
                let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                #expect(
                    text.split(separator: "\n").allSatisfy { $0.hasPrefix("{") },
                    "every line is a JSON object:\n\(text)")
                let start = try #require(lines.first)
                #expect(
                    start["message"] == "starting" && start["level"] == "info" && start["dir"] == scratch + "/content")
                let update = try #require(lines.first { $0["message"] == "update started" }, "\(lines)")
                #expect(update["from"] == "nothing" && Int(update["files"] ?? "") != nil)
                #expect(update["to"] == "1.2", "the start line names the version being installed: \(update)")
                #expect(
                    lines.contains { $0["message"]?.contains("1.2") == true }, "the finish summary names the version")
            }
        }
    }
}
