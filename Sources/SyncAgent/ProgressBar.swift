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
    /// current item. As room runs out the item is shortened, then goes; the bar narrows, then
    /// goes; then the files, the bytes, and last the rate and time left.
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
        // The facts, most wanted first: the rate and the time left, the bytes, the files. What
        // does not fit goes from the end; the bar takes the room left (at most 28 wide, gone
        // under 5), and the current item what is left after it. `place` is where a fact stands
        // on the line: bytes, rate, files.
        var facts: [(place: Int, text: String)] = []
        if let bytesPerSecond, bytesPerSecond > 0 {
            var speed = bytes(Int64(bytesPerSecond)) + "/s"
            if let total = progress.bytesTotal, total > progress.bytesDone {
                speed += ", " + duration(Double(total - progress.bytesDone) / bytesPerSecond) + " left"
            }
            facts.append((1, speed))
        }
        // No "0 B" while nothing has moved, no "files 0/1".
        if progress.bytesDone > 0 || progress.bytesTotal != nil {
            facts.append((0, bytes(progress.bytesDone) + (progress.bytesTotal.map { "/" + bytes($0) } ?? "")))
        }
        if progress.filesTotal > 1 { facts.append((2, "files \(progress.filesDone)/\(progress.filesTotal)")) }
        let percent = fraction.map { String(format: " %3.0f%%", $0 * 100) } ?? ""
        let shown = { (kept: [(place: Int, text: String)]) in kept.sorted { $0.place < $1.place }.map(\.text) }
        var kept = facts
        // The line without a bar: the phase, the percent (" 50%"), the facts.
        let bare = { (kept: [(place: Int, text: String)]) in
            progress.phase.rawValue.count + percent.count
                + shown(kept).map { 2 + $0.count }.reduce(0, +)
        }
        while !kept.isEmpty && bare(kept) > room { kept.removeLast() }
        // A bar costs its width and "  [", "]".
        let bar = fraction == nil ? 0 : min(28, room - bare(kept) - 4)
        var line = progress.phase.rawValue
        if let fraction {
            if bar >= 5 {
                let filled = Int(min(1, max(0, fraction)) * Double(bar))
                line +=
                    "  [" + String(repeating: "#", count: filled) + String(repeating: " ", count: bar - filled) + "]"
            }
            line += percent
        }
        for fact in shown(kept) where line.count + 2 + fact.count <= room { line += "  " + fact }
        if line.count > room { line = String(line.prefix(room)) }
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
