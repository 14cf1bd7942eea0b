import ContentSync
import Foundation
import Testing

@testable import SyncAgent

/// The progress bar fits the terminal, drops noise, shows rate and time left, and shortens paths.
@Suite("The progress bar: fits any width, no noise, rate and ETA, ellipsized paths")
struct ProgressBarTests {
    static func progress(
        _ phase: SyncProgress.Phase, done: Int64, total: Int64?, files: Int = 0, of filesTotal: Int = 0,
        item: String? = nil
    ) -> SyncProgress {
        var progress = SyncProgress(phase: phase)
        progress.bytesDone = done
        progress.bytesTotal = total
        progress.filesDone = files
        progress.filesTotal = filesTotal
        progress.currentItem = item
        return progress
    }

    @Test(
        "every width from 20 to 200 columns gets a line shorter than the terminal",
        arguments: Array(stride(from: 20, through: 200, by: 7)))
    func fits(columns: Int) {
        let long = "assets/" + String(repeating: "very-long-folder-name/", count: 8) + "final-file-name.json"
        let line = ProgressBar.render(
            Self.progress(
                .downloadingFiles, done: 123_456_789, total: 987_654_321, files: 1_234, of: 5_678, item: long),
            columns: columns, bytesPerSecond: 12_345_678)
        #expect(line.count <= columns - 1, "\(line.count) > \(columns - 1): \(line)")
        #expect(line.hasPrefix("downloadingFiles"))
    }

    /// A storage that declares exabytes and trickles a byte a second, or counts more files done
    /// than it announced: a line, never a trap.
    @Test func absurdTotalsAndRatesStillMakeALine() {
        let slow = ProgressBar.render(
            Self.progress(.downloadingArchive, done: 1, total: .max), columns: 120, bytesPerSecond: 0.5)
        #expect(slow.contains("over 100 h left"), "\(slow)")
        let over = ProgressBar.render(Self.progress(.downloadingFiles, done: 0, total: nil, files: 9, of: 3))
        #expect(over.contains("[" + String(repeating: "#", count: 10)), "\(over)")
    }

    @Test("no '0 B' while nothing moved, no 'files 0/1'; rate and time left once measured")
    func noNoise() {
        #expect(ProgressBar.render(Self.progress(.checking, done: 0, total: nil, files: 0, of: 1)) == "checking")
        let line = ProgressBar.render(
            Self.progress(.downloadingArchive, done: 50 << 20, total: 100 << 20), columns: 120,
            bytesPerSecond: Double(10 << 20))
        #expect(line.contains("50.0 MB/100.0 MB"), "\(line)")
        #expect(line.contains("10.0 MB/s, 5 s left"), "\(line)")
        #expect(line.contains(" 50%"), "\(line)")
    }

    @Test(
        "in an 80-column pane (and down to 50) the rate and the time left stay; the bar gives way",
        arguments: [80, 72, 60, 50])
    func rateFitsNarrowPanes(_ columns: Int) {
        let line = ProgressBar.render(
            Self.progress(.downloadingArchive, done: 1 << 20, total: 2 << 20, item: "RXCacheContent.zip"),
            columns: columns, bytesPerSecond: 322_048)
        #expect(line.count <= columns - 1, "\(line.count) > \(columns - 1): \(line)")
        #expect(line.hasPrefix("downloadingArchive"), "\(line)")
        #expect(line.contains("314.5 KB/s, 4 s left"), "\(line)")
        #expect(line.contains(" 50%"), "\(line)")
        if columns >= 72 {
            #expect(line.contains("1.0 MB/2.0 MB"), "\(line)")
            #expect(line.contains("[#"), "\(line)")
        }
    }

    @Test(
        "long paths keep their start and their file name",
        arguments: [
            ("short/path.json", 40, "short/path.json"),
            ("a/very/long/path/to/some/deeply/nested/file.json", 20, "a/very/…ed/file.json"),
        ])
    func ellipsis(text: String, width: Int, expected: String) {
        let cut = ProgressBar.ellipsized(text, to: width)
        #expect(cut.count <= width)
        #expect(cut == expected, "\(cut)")
    }

    @Test(
        "durations",
        arguments: [
            (0.2, "1 s"), (59, "59 s"), (61, "1 min 01 s"), (3_725, "1 h 02 min"), (359_999, "99 h 59 min"),
            (360_000, "over 100 h"), (1.8e19, "over 100 h"), (.infinity, "over 100 h"), (.nan, "over 100 h"),
            (-3, "0 s"),
        ])
    func durations(seconds: Double, expected: String) {
        #expect(ProgressBar.duration(seconds) == expected)
    }
}
