internal import DateText
import Foundation
import Logging
import SyncDaemon
import Transport

/// How the agent's log lines look on stderr.
enum LogFormat: String, CaseIterable, Sendable {
    /// `2026-11-23T04:50:00Z info message key=value`, for people.
    case text
    /// `<6>message key=value`: the `sd-daemon(3)` priority prefix that journald reads from a
    /// service's stderr, so `journalctl -p warning` filters; journald adds the time itself.
    case journald
    /// One JSON object a line: `time`, `level`, `message` and the metadata, for log shippers.
    case json

    /// The format to use when none is asked for: journald's when stderr is the journal, text
    /// otherwise. systemd sets `$JOURNAL_STREAM` to the journal stream's `device:inode`; a
    /// process started from a service inherits the variable with stderr sent elsewhere (a pipe,
    /// a file), so it counts only when stderr is that stream (`stderr`: its `fstat`, nil to
    /// read descriptor 2's).
    static func automatic(
        _ environment: [String: String] = ProcessInfo.processInfo.environment,
        stderr: (device: UInt64, inode: UInt64)? = nil
    ) -> LogFormat {
        guard let value = environment["JOURNAL_STREAM"], !value.isEmpty else { return .text }
        let parts = value.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return .text }
        let actual =
            stderr
            ?? {
                var info = stat()
                return fstat(2, &info) == 0 ? (UInt64(info.st_dev), UInt64(info.st_ino)) : nil
            }()
        return actual.map { $0.device == device && $0.inode == inode } == true ? .journald : .text
    }
}

/// A swift-log handler writing one line per message to stderr in a ``LogFormat``. Never logs
/// secrets: callers pass none (tokens stay in the request adapter), and a URL's password or token
/// is redacted from the message and every metadata value whoever logged it (a hook, a library).
struct AgentLogHandler: LogHandler {
    var format: LogFormat
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { _, event in event }
        let line = Self.line(
            format: format, level: event.level, message: "\(event.message)", metadata: merged, date: Date())
        // Not FileHandle, which traps when stderr is a closed pipe: a log line must never stop
        // the agent.
        Console.standardError(line + "\n")
    }

    /// The syslog priority of a level (`sd-daemon(3)`): debug 7, info 6, notice 5, warning 4,
    /// error 3, critical 2.
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    /// One formatted line (no newline). Storages, servers and hooks put text into messages and
    /// metadata (a version, an error, a hook's output line), so no field may break the line: text
    /// and journald escape control characters in the message and in every key and value
    /// (``LogText``); JSON escapes them inside its strings.
    static func line(format: LogFormat, level: Logger.Level, message: String, metadata: Logger.Metadata, date: Date)
        -> String
    {
        let message = Redaction.text(message)
        let values = metadata.mapValues { Redaction.text("\($0)") }
        switch format {
        case .text, .journald:
            let pairs = values.sorted { $0.key < $1.key }.map {
                "\(LogText.field($0.key))=\(LogText.field($0.value))"
            }
            let text = ([LogText.escaped(message)] + pairs).joined(separator: " ")
            // journald: one entry per line, and journald adds the time itself.
            return format == .text
                ? "\(InternetDateTime.formatWholeSeconds(date)) \(level) \(text)" : "<\(priority(level))>\(text)"
        case .json:
            var object: [String: String] = [
                "time": InternetDateTime.formatWholeSeconds(date), "level": "\(level)", "message": message,
            ]
            for (key, value) in values where object[key] == nil { object[key] = value }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            guard let data = try? encoder.encode(object) else { return "{\"message\":\"unencodable log line\"}" }
            return escapingJSONLeftovers(String(decoding: data, as: UTF8.self))
        }
    }

    /// `json` with what JSON leaves raw in its strings written as `\uXXXX`: DEL, the C1 controls
    /// and U+2028/U+2029 (valid JSON, but a terminal's controls and a line break to JavaScript and
    /// some shippers). They can only be inside strings: JSON's own syntax is ASCII.
    static func escapingJSONLeftovers(_ json: String) -> String {
        guard json.unicodeScalars.contains(where: { $0.value >= 0x7F && LogText.needsEscape($0) }) else { return json }
        var escaped = String.UnicodeScalarView()
        for scalar in json.unicodeScalars {
            if scalar.value >= 0x7F, LogText.needsEscape(scalar) {
                escaped.append(contentsOf: String(format: "\\u%04X", scalar.value).unicodeScalars)
            } else {
                escaped.append(scalar)
            }
        }
        return String(escaped)
    }
}
