import Foundation
import ProcessKit
import Synchronization

/// Gzip-compresses bytes with the system's `gzip`, for ``Fault/gzipEncoded``.
///
/// A child process rather than a linked zlib: the server has no zlib dependency, every test
/// machine has `gzip`, and what the client decodes is then a real gzip stream, not one written
/// by the code under test's own assumptions.
public enum GzipEncoding {
    /// `data` compressed by `gzip -c -n` (`-n`: no name or time stamp, so equal input gives
    /// equal output and a stable `ETag`).
    public static func compress(_ data: Data) async throws -> Data {
        let scratch = FileManager.default.temporaryDirectory
            .appendingPathComponent("StorageServer-gzip-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let input = scratch.appendingPathComponent("body")
        let output = scratch.appendingPathComponent("body.gz")
        try data.write(to: input)
        let status = try await ChildProcess.run("/usr/bin/env", ["gzip", "-c", "-n", input.path], stdout: output.path)
        guard status == 0 else {
            throw Failure(message: "gzip -c -n exited with \(status); install gzip to use Fault.gzipEncoded")
        }
        return try Data(contentsOf: output)
    }

    /// ``compress(_:)`` for a thread that may block (a connection's): waits for it.
    static func compressWaiting(_ data: Data) throws -> Data {
        let outcome = Mutex<Result<Data, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task {
            let result: Result<Data, any Error>
            do {
                result = .success(try await compress(data))
            } catch {
                result = .failure(error)
            }
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        return try outcome.withLock { $0! }.get()
    }

    /// `gzip` did not run or failed; the handler answers 500 with this message.
    struct Failure: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }
}
