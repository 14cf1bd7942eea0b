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
        // Only when stderr is the stream the variable names (systemd's device:inode): a process
        // a service started inherits the variable with stderr sent to a pipe or a file.
        #expect(LogFormat.automatic(["JOURNAL_STREAM": "8:12345"], stderr: (8, 12345)) == .journald)
        #expect(LogFormat.automatic(["JOURNAL_STREAM": "8:12345"], stderr: (8, 99)) == .text)
        #expect(LogFormat.automatic(["JOURNAL_STREAM": "8:12345"], stderr: (9, 12345)) == .text)
        #expect(LogFormat.automatic(["JOURNAL_STREAM": "junk"], stderr: (8, 12345)) == .text)
        #expect(LogFormat.automatic([:]) == .text)
    }

    @Test("an update that downloads nothing (renames only) has its update-started line too")
    func anUpdateOfRenamesIsAnnounced() async throws {
        try await withScratch { scratch in
            let storage = scratch + "/storage"
            try FileManager.default.createDirectory(atPath: storage, withIntermediateDirectories: true)
            try await withStorageServer(root: URL(fileURLWithPath: storage)) { server in
                func publish(_ version: String, _ files: [String: String], initialize: Bool = false) async throws {
                    let content = scratch + "/content-\(version)"
                    for (path, text) in files {
                        let url = URL(fileURLWithPath: content + "/" + path)
                        try FileManager.default.createDirectory(
                            at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
                        try Data(text.utf8).write(to: url)
                    }
                    let result = try await SyncAgentBinary.run(
                        [
                            "publish", "--storage", storage, "--content", content, "--version", version,
                            "--base-url", server.baseURL!.absoluteString,
                        ] + (initialize ? ["--init"] : []), scratch: scratch)
                    #expect(result.status == 0, "\(result.stderr)")
                }
                let text = String(repeating: "same bytes, another name\n", count: 40)
                try await publish("1.0", ["docs/a.txt": text, "keep.txt": "kept"], initialize: true)
                let process = try SyncAgentBinary.watch(
                    server, scratch: scratch, ["--interval", "1", "--log-format", "json"])
                async let exitStatus = process.exitStatus()
                var stopped = false
                defer { if !stopped { process.send(SIGKILL) } }
                func lines() -> [[String: String]] {
                    ((try? String(contentsOfFile: scratch + "/watch.log", encoding: .utf8)) ?? "").split(
                        separator: "\n"
                    ).compactMap { try? JSONDecoder().decode([String: String].self, from: Data($0.utf8)) }
                }
                func waitFor(_ what: String, _ found: ([String: String]) -> Bool) async throws {
                    for _ in 0..<400 where !lines().contains(where: found) {
                        try await Task.sleep(for: .milliseconds(50))
                    }
                    let seen = lines().contains(where: found)
                    #expect(seen, "\(what):\n\(lines())")
                }
                try await waitFor("the restore") { $0["message"]?.hasPrefix("restored 1.0") == true }
                try await publish("1.1", ["docs/b.txt": text, "keep.txt": "kept"])
                try await waitFor("the replay") { $0["message"]?.hasPrefix("updated 1.0 → 1.1") == true }
                process.send(SIGTERM)
                #expect(await exitStatus == 0)
                stopped = true
                let all = lines()
                let replay = try #require(all.firstIndex { $0["message"]?.hasPrefix("updated 1.0 → 1.1") == true })
                let started = try #require(
                    all.lastIndex { $0["message"] == "update started" && $0["to"] == "1.1" },
                    "the replay of renames is announced:\n\(all)")
                #expect(started < replay)
                #expect(all[started]["from"] == "1.0", "\(all[started])")
                #expect(all[replay]["message"]?.contains("0 file(s) downloaded") == true, "\(all[replay])")
                #expect(FileManager.default.fileExists(atPath: scratch + "/content/docs/b.txt"))
            }
        }
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
