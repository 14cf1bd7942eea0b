import ContentSync
import Foundation
import Synchronization

/// A one-line progress bar on stderr, redrawn at most ten times a second. Used only on a TTY.
final class ProgressBar: Sendable {
    private struct Frame {
        var lastDraw: UInt64 = 0
        var drawn = false
    }
    private let frame = Mutex(Frame())

    func update(_ progress: SyncProgress) {
        let now = DispatchTime.now().uptimeNanoseconds
        let shouldDraw = frame.withLock { frame -> Bool in
            guard now - frame.lastDraw > 100_000_000 else { return false }
            frame.lastDraw = now
            frame.drawn = true
            return true
        }
        guard shouldDraw else { return }
        Console.standardError("\r\u{1B}[K" + Self.render(progress))
    }

    func finish() {
        if frame.withLock({ $0.drawn }) {
            Console.standardError("\r\u{1B}[K")
        }
    }

    static func render(_ progress: SyncProgress, width: Int = 28) -> String {
        let fraction: Double?
        if let total = progress.bytesTotal, total > 0 {
            fraction = min(1, Double(progress.bytesDone) / Double(total))
        } else if progress.filesTotal > 0 {
            fraction = Double(progress.filesDone) / Double(progress.filesTotal)
        } else {
            fraction = nil
        }
        var line = "\(progress.phase.rawValue) "
        if let fraction {
            let filled = Int(fraction * Double(width))
            line += "[" + String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled) + "] "
            line += String(format: "%3.0f%% ", fraction * 100)
        }
        line += Self.bytes(progress.bytesDone)
        if let total = progress.bytesTotal { line += "/" + Self.bytes(total) }
        if progress.filesTotal > 0 { line += "  files \(progress.filesDone)/\(progress.filesTotal)" }
        if let item = progress.currentItem { line += "  " + String(item.suffix(40)) }
        return line
    }

    static func bytes(_ count: Int64) -> String {
        if count < 1024 { return "\(count) B" }
        if count < 1 << 20 { return String(format: "%.1f KB", Double(count) / 1024) }
        if count < 1 << 30 { return String(format: "%.1f MB", Double(count) / 1_048_576) }
        return String(format: "%.2f GB", Double(count) / 1_073_741_824)
    }
}
