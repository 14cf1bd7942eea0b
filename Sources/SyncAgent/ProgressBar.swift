import ContentSync
import Foundation
import Glibc
import SyncDaemon
import Synchronization

/// A one-line progress bar on stderr, redrawn at most ten times a second. Used only on a TTY.
///
/// The line always fits the terminal (its width is read at every draw, so a resized pane is
/// followed): an 80-column pane once collected 26 stale wrapped lines from a bar wider than
/// itself. It shows the rate and the time left once they mean something, and long paths lose
/// their middle to an ellipsis.
final class ProgressBar: Sendable {
    private struct Frame {
        var lastDraw: UInt64 = 0
        var drawn = false
        /// Where the rate is measured from: the phase, and its first sample (time, bytes).
        var phase: SyncProgress.Phase?
        var start: (time: UInt64, bytes: Int64) = (0, 0)
    }
    private let frame = Mutex(Frame())

    func update(_ progress: SyncProgress) {
        let now = DispatchTime.now().uptimeNanoseconds
        let rate = frame.withLock { frame -> Double?? in
            if frame.phase != progress.phase {
                frame.phase = progress.phase
                frame.start = (now, progress.bytesDone)
            }
            guard now - frame.lastDraw > 100_000_000 else { return .none }
            frame.lastDraw = now
            frame.drawn = true
            let seconds = Double(now - frame.start.time) / 1e9
            // A rate needs a second of history to mean anything.
            return .some(seconds >= 1 ? Double(progress.bytesDone - frame.start.bytes) / seconds : nil)
        }
        guard case .some(let bytesPerSecond) = rate else { return }
        Console.standardError(
            "\r\u{1B}[K" + Self.render(progress, columns: Self.terminalColumns(), bytesPerSecond: bytesPerSecond))
    }

    func finish() {
        if frame.withLock({ $0.drawn }) {
            Console.standardError("\r\u{1B}[K")
        }
    }

    /// The width of the terminal on stderr (80 when it cannot be read).
    static func terminalColumns() -> Int {
        var size = winsize()
        guard ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return 80 }
        return Int(size.ws_col)
    }

    /// The bar for `progress`, at most `columns - 1` characters (the last column would wrap on
    /// some terminals): phase, bar and percentage, bytes, rate and time left, files, and the
    /// current item, dropped from the right as room runs out (the item is shortened first).
    static func render(_ progress: SyncProgress, columns: Int = 80, bytesPerSecond: Double? = nil) -> String {
        let room = max(columns - 1, 10)
        let fraction: Double?
        if let total = progress.bytesTotal, total > 0 {
            fraction = min(1, Double(progress.bytesDone) / Double(total))
        } else if progress.filesTotal > 1 {
            fraction = Double(progress.filesDone) / Double(progress.filesTotal)
        } else {
            fraction = nil
        }
        var parts: [String] = [progress.phase.rawValue]
        if let fraction {
            let width = room >= 100 ? 28 : room >= 70 ? 20 : 10
            let filled = Int(min(1, max(0, fraction)) * Double(width))
            parts.append(
                "[" + String(repeating: "#", count: filled) + String(repeating: " ", count: width - filled) + "]"
                    + String(format: " %3.0f%%", fraction * 100))
        }
        // No "0 B" while nothing has moved, no "files 0/1".
        if progress.bytesDone > 0 || progress.bytesTotal != nil {
            parts.append(bytes(progress.bytesDone) + (progress.bytesTotal.map { "/" + bytes($0) } ?? ""))
        }
        if let bytesPerSecond, bytesPerSecond > 0 {
            var speed = bytes(Int64(bytesPerSecond)) + "/s"
            if let total = progress.bytesTotal, total > progress.bytesDone {
                speed += ", " + duration(Double(total - progress.bytesDone) / bytesPerSecond) + " left"
            }
            parts.append(speed)
        }
        if progress.filesTotal > 1 { parts.append("files \(progress.filesDone)/\(progress.filesTotal)") }
        var line = ""
        for part in parts {
            let candidate = line.isEmpty ? part : line + "  " + part
            guard candidate.count <= room else { break }
            line = candidate
        }
        if let item = progress.currentItem, !item.isEmpty {
            let left = room - line.count - 2
            if left >= 8 { line += "  " + ellipsized(item, to: left) }
        }
        return line
    }

    /// `text` cut to `width` characters by replacing its middle with "…" (a path keeps its
    /// start and its file name).
    static func ellipsized(_ text: String, to width: Int) -> String {
        guard text.count > width else { return text }
        guard width > 1 else { return "…" }
        let tail = (width - 1) * 2 / 3
        let head = width - 1 - tail
        return String(text.prefix(head)) + "…" + String(text.suffix(tail))
    }

    /// "42 s", "3 min 05 s", "1 h 02 min"; "over 100 h" past that (a rate of a byte a second
    /// against a declared size of exabytes makes estimates no `Int` holds).
    static func duration(_ seconds: Double) -> String {
        guard seconds < 360_000 else { return "over 100 h" }
        let whole = Int(max(0, seconds).rounded(.up))
        if whole < 60 { return "\(whole) s" }
        if whole < 3600 { return String(format: "%d min %02d s", whole / 60, whole % 60) }
        return String(format: "%d h %02d min", whole / 3600, whole % 3600 / 60)
    }

    static func bytes(_ count: Int64) -> String { ReportText.bytes(count) }
}
