import Foundation
import Testing

/// `--help` text is wrapped by the argument parser only, never at the source's line breaks:
/// hard-wrapped text wrapped again at 80 columns leaves short lines in mid-sentence.
@Suite("--help is not hard-wrapped mid-sentence", .timeLimit(.minutes(3)))
struct HelpTextTests {
    static let commands: [[String]] = [
        [], ["sync"], ["watch"], ["check-config"], ["status"], ["serve"], ["publish"], ["verify"], ["keygen"],
        ["forget-keys"], ["reset"], ["cache"], ["cache", "get"], ["cache", "ls"], ["cache", "rm"], ["cache", "purge"],
        ["cache", "stats"], ["image"],
    ]

    /// The list above covers every subcommand `sync-agent --help` names: a new one is checked too.
    @Test func everySubcommandIsChecked() async throws {
        try await withScratch { scratch in
            let help = try await SyncAgentBinary.run(["--help"], scratch: scratch)
            let lines = help.stdout.components(separatedBy: "\n")
            guard let start = lines.firstIndex(of: "SUBCOMMANDS:") else {
                Issue.record("no SUBCOMMANDS in: \(help.stdout)")
                return
            }
            let names = lines[(start + 1)...].compactMap { line -> String? in
                guard line.hasPrefix("  "), !line.hasPrefix("   ") else { return nil }
                return line.split(separator: " ").first.map(String.init)
            }.filter { $0 != "See" }
            #expect(names.count >= 10, "\(names)")
            for name in names { #expect(Self.commands.contains([name]), "\(name) --help is not checked") }
        }
    }

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
                    #expect(!line.hasSuffix("\\"), "a source line continuation shows: \"\(line)\"")
                }
            }
        }
    }
}
