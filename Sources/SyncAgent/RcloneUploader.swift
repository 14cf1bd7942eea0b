import ContentPublishing
import Foundation
import ProcessKit

/// `publish --upload REMOTE:PATH`: each upload step is one `rclone` run, which must succeed
/// before the publisher starts the next.
///
/// - Always `copy`/`copyto`, never `sync` or `delete`: clients that are behind still need older
///   change lists and the files of older versions, so nothing on the remote is removed.
/// - How rclone tells an unchanged file, per step. rclone's default (size and time) and its
///   `--checksum` both fall back to the size alone on a remote without hashes or modification
///   times, such as plain WebDAV: measured with rclone 1.60 and `rclone serve webdav`, a status
///   that went from "1.2" to "1.3" at the same size was skipped and the remote kept the old one.
///   - the status and the update list: `--ignore-times`, always sent (two small files);
///   - the content, archive and manifest: `--checksum` when the remote has a hash (then exact),
///     else `--ignore-times`: every file is sent again, as a same-size edit would be missed;
///   - the change lists: `--checksum`, else `--size-only`: a published list never changes.
/// - No `--no-traverse`: the content step compares every file, and listing each folder of the
///   remote costs fewer requests than looking each file up.
/// - rclone's own configuration comes from its usual places (`RCLONE_CONFIG`,
///   `RCLONE_CONFIG_<NAME>_TYPE`, …), which the child inherits.
struct RcloneUploader: StorageUploading {
    /// The rclone program, an absolute path.
    var rclone: String
    /// Where the storage goes, `REMOTE:PATH` as given.
    var remote: String
    /// The remote has a hash in common with the local disk (which has them all).
    var remoteHasHashes: Bool
    /// Print nothing about the steps (`--quiet`).
    var quiet: Bool

    /// Finds rclone, and asks it what `remote` supports (`rclone backend features`), which also
    /// proves the remote is configured and reachable before anything is published.
    static func prepare(remote: String, rclone given: String, quiet: Bool) throws -> RcloneUploader {
        guard !remote.isEmpty else {
            throw CLIFailure(
                code: 6, message: "--upload is empty; pass an rclone remote and path, e.g. mybucket:storage")
        }
        let program = try locate(given)
        let uploader = RcloneUploader(rclone: program, remote: remote, remoteHasHashes: false, quiet: quiet)
        let run = try uploader.rclone(["backend", "features", remote], capturingOutput: true)
        guard run.status == 0 else {
            throw CLIFailure(
                code: 11,
                message:
                    "--upload \(remote): rclone cannot use this remote (`rclone backend features` exited with \(run.status): "
                    + run.lastLines
                    + "); configure it (`rclone config`, or RCLONE_CONFIG_<NAME>_TYPE and the remote's other variables) "
                    + "and run again; nothing was published")
        }
        var ready = uploader
        if let object = try? JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [String: Any],
            let hashes = object["Hashes"] as? [String]
        {
            ready.remoteHasHashes = !hashes.isEmpty
        }
        return ready
    }

    /// The absolute path of `given`: as it is when it names a path, else the first executable
    /// of that name on `PATH`.
    static func locate(_ given: String) throws -> String {
        if given.contains("/") {
            guard access(given, X_OK) == 0 else {
                throw CLIFailure(
                    code: 6,
                    message:
                        "--rclone \(given): \(String(cString: strerror(errno))); pass the rclone program, or install it with `apt-get install rclone`"
                )
            }
            return given
        }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for folder in path.split(separator: ":") where !folder.isEmpty {
            let candidate = "\(folder)/\(given)"
            var info = stat()
            if stat(candidate, &info) == 0, info.st_mode & S_IFMT == S_IFREG, access(candidate, X_OK) == 0 {
                return candidate
            }
        }
        throw CLIFailure(
            code: 6,
            message:
                "--upload needs rclone, and there is no '\(given)' on PATH; install it with `apt-get install rclone`, "
                + "or pass the program with --rclone PATH; nothing was published")
    }

    /// How rclone decides, in `step`, that a file on the remote is already the local one.
    func comparison(for step: StorageUploadStep) -> String {
        switch step.kind {
        case .updateList, .status: "--ignore-times"
        case .changeLists: remoteHasHashes ? "--checksum" : "--size-only"
        case .content: remoteHasHashes ? "--checksum" : "--ignore-times"
        }
    }

    /// The rclone arguments for `step`: `copyto` for one file, else a `copy` of the storage
    /// folder filtered to the step's paths, so every file keeps its storage-relative path.
    func arguments(for step: StorageUploadStep, from storage: String) -> [String] {
        let common = [comparison(for: step), "--use-json-log", "--stats-log-level", "NOTICE"]
        if step.paths.count == 1, let file = step.paths.first, !file.hasSuffix("/") {
            return ["copyto", storage + "/" + file, Self.join(remote, file)] + common
        }
        let filters = step.paths.flatMap { path in
            ["--include", "/" + Self.escapedForFilter(path) + (path.hasSuffix("/") ? "**" : "")]
        }
        return ["copy", storage, remote] + filters + common
    }

    func upload(_ step: StorageUploadStep, from storage: String) throws {
        let arguments = arguments(for: step, from: storage)
        let run = try rclone(arguments, capturingOutput: false)
        guard run.status == 0 else {
            throw RcloneFailure(
                command: "rclone \(arguments[0]) to \(remote)", status: run.status, lastLines: run.lastLines)
        }
        guard !quiet else { return }
        let stats = run.stats
        let copied =
            stats.map {
                "\($0.transfers) file(s) copied, \(ProgressBar.bytes($0.bytes)), in \(String(format: "%.1f", $0.seconds)) s"
            }
            ?? "done"
        let how =
            step.kind == .content
            ? (remoteHasHashes ? " (unchanged files skipped by hash)" : " (the remote has no hashes: every file sent)")
            : ""
        Console.print(
            "uploaded \(step) to \(remote) (\(step.number)/\(StorageUploadStep.order.count)): \(copied)\(how)")
    }

    /// `remote` and a storage-relative path, as one rclone path.
    static func join(_ remote: String, _ relative: String) -> String {
        remote.hasSuffix(":") || remote.hasSuffix("/") ? remote + relative : remote + "/" + relative
    }

    /// `path` with rclone's filter pattern characters escaped.
    static func escapedForFilter(_ path: String) -> String {
        var escaped = ""
        for character in path {
            if "*?[]{}\\".contains(character) { escaped.append("\\") }
            escaped.append(character)
        }
        return escaped
    }

    /// One finished rclone run: its exit status, its stdout (when captured) and its stderr log.
    struct Run {
        var status: Int32
        var output: String
        var log: String

        /// The log's last three messages, rclone's JSON log lines reduced to "object: message"
        /// and the statistics left out, joined for a one-line error.
        var lastLines: String {
            let lines = log.split(whereSeparator: \.isNewline).compactMap { line -> String? in
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                    return Self.withoutTimestamp(String(line))
                }
                guard object["stats"] == nil, let message = object["msg"] as? String else { return nil }
                return (object["object"] as? String).map { "\($0): \(message)" } ?? message
            }
            let last = lines.suffix(3)
            return last.isEmpty ? "no message" : last.map { "'\($0)'" }.joined(separator: " ")
        }

        /// rclone's plain log lines start with "2026/11/23 06:03:11 "; the message follows.
        static func withoutTimestamp(_ line: String) -> String {
            let parts = line.split(separator: " ", maxSplits: 2)
            guard parts.count == 3, parts[0].count == 10, parts[0].filter({ $0 == "/" }).count == 2, parts[1].count == 8
            else { return line }
            return String(parts[2])
        }

        /// What the run copied, from the statistics rclone logs when it ends.
        var stats: (transfers: Int, bytes: Int64, seconds: Double)? {
            for line in log.split(whereSeparator: \.isNewline).reversed() {
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                    let stats = object["stats"] as? [String: Any]
                else { continue }
                return (
                    (stats["transfers"] as? NSNumber)?.intValue ?? 0, (stats["bytes"] as? NSNumber)?.int64Value ?? 0,
                    (stats["elapsedTime"] as? NSNumber)?.doubleValue ?? 0
                )
            }
            return nil
        }
    }

    /// Runs rclone to its end (blocking: the caller is on the I/O pool), its stderr, and its
    /// stdout when asked, in temporary files.
    func rclone(_ arguments: [String], capturingOutput: Bool) throws -> Run {
        let base = NSTemporaryDirectory() + "sync-agent-rclone-\(getpid())-\(UUID().uuidString)"
        defer {
            unlink(base + ".out")
            unlink(base + ".err")
        }
        let child: ChildProcess
        do {
            child = try ChildProcess(
                rclone, arguments, stdout: capturingOutput ? base + ".out" : nil, stderr: base + ".err")
        } catch {
            throw CLIFailure(code: 6, message: "--rclone \(rclone): \(error); install it with `apt-get install rclone`")
        }
        let status = child.waitBlocking()
        return Run(
            status: status, output: (try? String(contentsOfFile: base + ".out", encoding: .utf8)) ?? "",
            log: (try? String(contentsOfFile: base + ".err", encoding: .utf8)) ?? "")
    }
}

/// An rclone run that failed: which, its exit status, and what it said last.
struct RcloneFailure: Error, CustomStringConvertible {
    /// "rclone copy to REMOTE:PATH".
    var command: String
    /// rclone's exit status (128 + the signal when one ended it).
    var status: Int32
    /// Its last log messages, quoted.
    var lastLines: String

    var description: String { "\(command) exited with \(status): \(lastLines)" }
}
