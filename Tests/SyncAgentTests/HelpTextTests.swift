import Foundation
import Testing

/// `--help` text is wrapped by the argument parser only, never at the source's line breaks:
/// hard-wrapped text wrapped again at 80 columns leaves short lines in mid-sentence.
@Suite("--help is not hard-wrapped mid-sentence", .timeLimit(.minutes(3)))
struct HelpTextTests {
    static let commands: [[String]] = [
        [], ["sync"], ["watch"], ["status"], ["serve"], ["publish"], ["verify"], ["keygen"], ["forget-keys"],
        ["reset"], ["cache"], ["cache", "get"], ["cache", "ls"], ["cache", "rm"], ["cache", "purge"],
        ["cache", "stats"],
    ]

    @Test("every discussion paragraph's lines run to the wrap width, except each paragraph's last", arguments: commands)
    func paragraphsAreWrappedOnce(command: [String]) async throws {
        try await withScratch { scratch in
            let help = try await SyncAgentBinary.run(command + ["--help"], scratch: scratch)
            #expect(help.status == 0)
            // The discussion: from the line after OVERVIEW's paragraph to USAGE.
            let lines = help.stdout.components(separatedBy: "\n")
            guard let usage = lines.firstIndex(where: { $0.hasPrefix("USAGE:") }),
                let overviewEnd = lines.firstIndex(of: ""), overviewEnd < usage
            else { return }
            let paragraphs = lines[(overviewEnd + 1)..<usage].split(separator: "", omittingEmptySubsequences: true)
            for paragraph in paragraphs {
                for (line, next) in zip(paragraph, paragraph.dropFirst()) {
                    // A wrapped line leaves less room than the next word needs.
                    let nextWord = next.split(separator: " ").first.map(String.init) ?? ""
                    #expect(
                        line.count + 1 + nextWord.count >= 80 || line.hasPrefix(" ") || next.hasPrefix(" ")
                            || next.hasPrefix("-"),
                        "\(command.joined(separator: " ")) --help breaks early: \"\(line)\" / \"\(next)\"")
                }
            }
        }
    }
}
