import Foundation

/// Runs the built `sync-agent` as a child process, waiting through its termination handler so
/// no cooperative thread blocks.
struct CommandResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

enum SyncAgentBinary {
    /// The binary sits beside the test bundle in the build folder.
    static var path: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("sync-agent").path
    }

    static func run(_ arguments: [String], scratch: String) async throws -> CommandResult {
        let id = UUID().uuidString
        let out = scratch + "/\(id).out"
        let err = scratch + "/\(id).err"
        _ = FileManager.default.createFile(atPath: out, contents: nil)
        _ = FileManager.default.createFile(atPath: err, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: out))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: err))
        process.standardInput = FileHandle.nullDevice
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do { try process.run() } catch { continuation.resume(throwing: error) }
        }
        return CommandResult(status: status,
                             stdout: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "",
                             stderr: (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
    }

    /// Starts `sync-agent serve`, returning the process and the URL it printed.
    static func serve(_ folder: String, scratch: String) async throws -> (Process, URL) {
        let out = scratch + "/serve.out"
        _ = FileManager.default.createFile(atPath: out, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = ["serve", folder, "--port", "0"]
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: out))
        process.standardError = FileHandle.nullDevice
        try process.run()
        for _ in 0..<500 {
            if let text = try? String(contentsOfFile: out, encoding: .utf8), let line = text.split(separator: "\n").first,
               let url = URL(string: String(line)) {
                return (process, url)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        kill(process.processIdentifier, SIGKILL)
        throw CocoaError(.fileReadUnknown)
    }
}

func withScratch<T>(_ body: (String) async throws -> T) async throws -> T {
    let path = NSTemporaryDirectory() + "sync-agent-tests-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try await body(path)
}
