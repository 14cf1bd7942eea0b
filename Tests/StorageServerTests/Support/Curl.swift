import Foundation
import StorageServer

/// What one `curl` run produced: its exit code, the last response's status and headers, and the
/// body bytes it wrote.
struct CurlResult {
    var exitCode: Int32
    /// Status of the last response curl saw, 0 when it saw none.
    var status: Int
    /// Headers of the last response, keyed by lowercased name.
    var headers: [String: String]
    var body: Data
    var stderr: String
    /// Path of the file holding the body, for checksums.
    var bodyFile: URL
}

/// Runs the `curl` command-line tool against the server, writing headers and body to files in
/// `workDirectory`. The client is a separate process, so the server is tested over real sockets.
func curl(_ url: URL, _ arguments: [String] = [], in workDirectory: URL) async throws -> CurlResult {
    try await curl(url.absoluteString, arguments, in: workDirectory)
}

/// As `curl(_:_:in:)`, with the URL as a raw string so that `--path-as-is` can send `..`.
func curl(_ url: String, _ arguments: [String] = [], in workDirectory: URL) async throws -> CurlResult {
    let id = UUID().uuidString
    let headerFile = workDirectory.appendingPathComponent("curl-\(id).headers")
    let bodyFile = workDirectory.appendingPathComponent("curl-\(id).body")
    let stderrFile = workDirectory.appendingPathComponent("curl-\(id).stderr")
    let exitCode = try await runProcess(
        "curl",
        [
            "--silent", "--show-error", "--max-time", "30", "--dump-header", headerFile.path,
            "--output", bodyFile.path,
        ] + arguments + [url],
        stdout: nil,
        stderr: stderrFile
    )
    let headerText = (try? String(contentsOf: headerFile, encoding: .utf8)) ?? ""
    let (status, headers) = parseLastResponse(headerText)
    return CurlResult(
        exitCode: exitCode,
        status: status,
        headers: headers,
        body: (try? Data(contentsOf: bodyFile)) ?? Data(),
        stderr: (try? String(contentsOf: stderrFile, encoding: .utf8)) ?? "",
        bodyFile: bodyFile
    )
}

/// The status and headers of the last response block in a `--dump-header` file (redirects write
/// several blocks).
private func parseLastResponse(_ text: String) -> (Int, [String: String]) {
    let blocks = text.components(separatedBy: "\r\n\r\n").filter { $0.hasPrefix("HTTP/") }
    guard let block = blocks.last else { return (0, [:]) }
    let lines = block.components(separatedBy: "\r\n")
    let statusParts = lines[0].split(separator: " ")
    let status = statusParts.count > 1 ? Int(statusParts[1]) ?? 0 : 0
    var headers: [String: String] = [:]
    for line in lines.dropFirst() {
        guard let colon = line.firstIndex(of: ":") else { continue }
        let name = line[..<colon].lowercased()
        headers[name] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
    return (status, headers)
}

/// The lowercase hex SHA-256 of `file`, computed by `sha256sum`.
func sha256sum(_ file: URL, in workDirectory: URL) async throws -> String {
    let output = workDirectory.appendingPathComponent("sha256-\(UUID().uuidString).txt")
    let code = try await runProcess("sha256sum", [file.path], stdout: output, stderr: nil)
    guard code == 0 else { throw ProcessFailure(command: "sha256sum \(file.path)", exitCode: code) }
    let text = try String(contentsOf: output, encoding: .utf8)
    return String(text.prefix { !$0.isWhitespace })
}

struct ProcessFailure: Error, CustomStringConvertible {
    var command: String
    var exitCode: Int32
    var description: String { "\(command) exited with \(exitCode)" }
}

/// Runs a tool found on PATH and returns its exit status. Waits through `terminationHandler`,
/// never `waitUntilExit()`, which would block a thread of the two-thread cooperative pool.
func runProcess(_ tool: String, _ arguments: [String], stdout: URL?, stderr: URL?) async throws -> Int32 {
    try await ChildProcess.run("/usr/bin/env", [tool] + arguments, stdout: stdout?.path, stderr: stderr?.path)
}
