import ContentPublishing
import ContentSyncFuzzing
import FileKit
import Foundation
import StorageFormat
import Testing

/// Replays the committed fuzz corpus (`Fuzz/corpus/`, grown by `make fuzz`) and every JSON file of
/// ExampleStorage through the fuzz checks: an input that once crashed a parser or broke a path
/// rule stays fixed.
@Suite("The fuzz corpus replays without a crash")
struct FuzzCorpusTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test func theCommittedCorpusReplays() throws {
        let corpus = Self.repository.appendingPathComponent("Fuzz/corpus").path
        let count = try FuzzChecks.replay([corpus])
        #expect(count >= 50, "the corpus at \(corpus) holds only \(count) inputs")
    }

    @Test func everyExampleStorageDocumentReplays() throws {
        let count = try FuzzChecks.replay([
            Self.repository.appendingPathComponent("ExampleStorage/versions/1.4/RXCacheConfig").path
        ])
        #expect(count >= 5)
    }
}
