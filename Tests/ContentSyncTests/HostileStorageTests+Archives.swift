import Archive
import Foundation
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// Archives no publisher should produce. A 1.0 client is below 1.3's minimal version, so it must
/// restore from the archive: every case checks that 1.0 stays intact.
extension HostileStorageTests {
    func expectArchiveRefused(code: SyncError.Code, mentioning text: String, _ entries: [RawZip.Entry]) async throws {
        try await expectRefused(from: "1.0", damaged: "1.3", code: code, mentioning: text) { storage in
            try RawZip(entries: [RawZip.Entry("RXCacheContent/ok.txt", "fine")] + entries).bytes()
                .write(to: URL(fileURLWithPath: storage + "/RXCacheContent.zip"))
        }
    }

    @Test(arguments: [
        (0o020644 as UInt32, "character device"), (0o060644, "block device"), (0o010644, "fifo"), (0o140644, "socket"),
    ])
    func aSpecialFileEntryIsRefused(mode: UInt32, kind: String) async throws {
        try await expectArchiveRefused(
            code: .archive, mentioning: kind, [RawZip.Entry("RXCacheContent/dev", "", mode: mode)])
    }

    @Test func twoEntriesWithTheSameNameAreRefused() async throws {
        try await expectArchiveRefused(
            code: .archive, mentioning: "both extract to",
            [RawZip.Entry("RXCacheContent/a.txt", "one"), RawZip.Entry("RXCacheContent/a.txt", "two")])
    }

    @Test func namesThatDifferOnlyInCaseAreRefused() async throws {
        try await expectArchiveRefused(
            code: .archive, mentioning: "only in case",
            [RawZip.Entry("RXCacheContent/Docs/Read.md", "one"), RawZip.Entry("RXCacheContent/docs/read.md", "two")])
    }

    @Test func namesThatDifferOnlyInUnicodeNormalizationAreRefused() async throws {
        try await expectArchiveRefused(
            code: .archive, mentioning: "both extract to",
            [
                RawZip.Entry("RXCacheContent/cr\u{E8}me.json", "nfc"),
                RawZip.Entry("RXCacheContent/cre\u{300}me.json", "nfd"),
            ])
    }

    @Test func aNameThatIsNotUTF8IsRefused() async throws {
        try await expectArchiveRefused(
            code: .unsafePath, mentioning: "UTF-8",
            [
                RawZip.Entry(
                    rawName: Array("RXCacheContent/caf".utf8) + [0xE9] + Array(".txt".utf8), data: Array("x".utf8),
                    flags: 0)
            ])
    }

    @Test func aBackslashTraversalNameIsRefused() async throws {
        try await expectArchiveRefused(
            code: .unsafePath, mentioning: "RXCacheContent.zip",
            [RawZip.Entry("RXCacheContent\\..\\..\\evil.txt", "gotcha")])
    }

    @Test func entriesThatShareTheirBytesAreRefused() async throws {
        var second = RawZip.Entry("RXCacheContent/b.txt", "same")
        second.sharesLocalHeaderOf = 1
        try await expectArchiveRefused(
            code: .archive, mentioning: "overlap", [RawZip.Entry("RXCacheContent/a.txt", "same"), second])
    }

    @Test func anEncryptedEntryIsRefused() async throws {
        var secret = RawZip.Entry("RXCacheContent/secret.txt", "xxxxxxxxxxxxxxxxxxxx")
        secret.flags |= 1
        try await expectArchiveRefused(code: .archive, mentioning: "RXCacheContent.zip", [secret])
    }

    @Test func anEntryLargerThanItDeclaresIsRefused() async throws {
        var liar = RawZip.Entry("RXCacheContent/liar.txt", String(repeating: "x", count: 4096))
        liar.declaredSize = 10
        try await expectArchiveRefused(code: .archive, mentioning: "liar.txt", [liar])
    }

    @Test func anHTMLPageServedAsTheArchiveIsRefused() async throws {
        try await expectRefused(from: "1.0", damaged: "1.3", code: .archive, mentioning: "RXCacheContent.zip") {
            storage in
            try Data("<html><body>Rate limit exceeded</body></html>".utf8).write(
                to: URL(fileURLWithPath: storage + "/RXCacheContent.zip"))
        }
    }

    @Test func aTruncatedArchiveIsRefused() async throws {
        try await expectRefused(from: "1.0", damaged: "1.3", code: .archive, mentioning: "RXCacheContent.zip") {
            storage in
            let path = storage + "/RXCacheContent.zip"
            let whole = try Data(contentsOf: URL(fileURLWithPath: path))
            try whole.prefix(whole.count / 2).write(to: URL(fileURLWithPath: path))
        }
    }
}
