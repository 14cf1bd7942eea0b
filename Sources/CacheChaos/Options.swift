import Foundation
import ToolSupport

/// Writes one line to stdout with a single `write(2)`, unbuffered: a parent reading the file
/// after a SIGKILL sees every step that finished.
func emit(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    bytes.withUnsafeBytes { raw in
        var offset = 0
        while offset < raw.count {
            let written = write(1, raw.baseAddress! + offset, raw.count - offset)
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }
}

extension ToolOptions {
    /// `--limit BYTES`: the folder's disk limit to set, or nil to keep the folder's.
    func limit() throws -> Int64? {
        has("limit") ? Int64(try int("limit", 0)) : nil
    }
}
