import Foundation
import Testing

@testable import Archive
@testable import FileKit

/// Archives a hostile storage could serve. Each is refused whole, before anything is written, and
/// nothing outside the destination changes.
@Suite(.timeLimit(.minutes(3)))
struct ZipHostileArchiveTests {
    /// Lays out `dir/outside/sentinel.txt` and an empty `dir/out/dest`, runs `extract`, and checks
    /// that the refusal carries `code`, the destination stays empty and nothing else changed.
    static func expectRefusal(
        _ code: ArchiveError.Code, in dir: String, archive: String,
        options: ZipExtractionOptions = .roomy,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> ArchiveError? {
        try write(Array("keep me".utf8), to: dir + "/outside/sentinel.txt")
        try makeFolder(dir + "/out/dest")
        let before = try snapshot(dir)

        let error = #expect(throws: ArchiveError.self, sourceLocation: sourceLocation) {
            try ZipExtractor.extract(archiveAt: archive, into: dir + "/out/dest", options: options)
        }

        #expect(error?.code == code, "\(String(describing: error))", sourceLocation: sourceLocation)
        #expect(try snapshot(dir) == before, sourceLocation: sourceLocation)
        return error
    }

    @Test(arguments: [
        "../evil.txt", "/abs.txt", "a\\..\\b", "a/../../x", "../outside/sentinel.txt",
        "ok/./x", "a//b", "tab\there", "../../../../../../tmp/evil",
    ])
    func zipSlipNamesRefuseTheWholeArchive(name: String) throws {
        try withTemporaryDirectory { dir in
            let writer = try ZipWriter(path: dir + "/evil.zip")
            try writer.addFile("fine.txt", contents: Array("fine".utf8))
            try writer.addRawEntry(name: name, contents: Array("pwned".utf8), unixMode: 0o100644)
            try writer.close()

            let error = try Self.expectRefusal(.unsafeEntryName, in: dir, archive: dir + "/evil.zip")

            #expect(error?.underlying is SafePathError)
            #expect(error?.message.contains(dir + "/evil.zip") == true)
            #expect(!FileManager.default.fileExists(atPath: "/abs.txt"))
            #expect(!FileManager.default.fileExists(atPath: "/tmp/evil"))
        }
    }

    @Test(arguments: [
        ("link", UInt32(S_IFLNK) | 0o777, "symbolic link"),
        ("dev/tty0", UInt32(S_IFCHR) | 0o644, "character device"),
        ("dev/sda", UInt32(S_IFBLK) | 0o644, "block device"),
        ("pipe", UInt32(S_IFIFO) | 0o644, "fifo"),
        ("sock", UInt32(S_IFSOCK) | 0o644, "socket"),
    ])
    func specialEntryTypesRefuseTheArchive(name: String, mode: UInt32, kind: String) throws {
        try withTemporaryDirectory { dir in
            let writer = try ZipWriter(path: dir + "/evil.zip")
            try writer.addFile("fine.txt", contents: Array("fine".utf8))
            try writer.addRawEntry(name: name, contents: Array("../outside/sentinel.txt".utf8), unixMode: mode)
            try writer.close()

            let error = try Self.expectRefusal(.forbiddenEntryType, in: dir, archive: dir + "/evil.zip")

            #expect(error?.message.contains("'\(name)' is a \(kind)") == true)
        }
    }

    @Test(.enabled(if: zipToolIsInstalled, "needs /usr/bin/zip"))
    func symlinksStoredByTheZipToolAreRefused() throws {
        try withTemporaryDirectory { dir in
            try write(Array("x".utf8), to: dir + "/src/real.txt")
            #expect(symlink("/etc/passwd", dir + "/src/link") == 0)
            #expect(try run("/usr/bin/zip", ["-q", "-y", "-r", dir + "/links.zip", "."], in: dir + "/src") == 0)

            let error = try Self.expectRefusal(.forbiddenEntryType, in: dir, archive: dir + "/links.zip")

            #expect(error?.message.contains("'link' is a symbolic link") == true)
        }
    }

    @Test(.enabled(if: zipToolIsInstalled, "needs /usr/bin/zip"))
    func encryptedEntriesAreRefused() throws {
        try withTemporaryDirectory { dir in
            try write(Array("secret".utf8), to: dir + "/src/secret.txt")
            #expect(
                try run("/usr/bin/zip", ["-q", "-P", "pw", dir + "/locked.zip", "secret.txt"], in: dir + "/src") == 0)

            _ = try Self.expectRefusal(.encryptedEntry, in: dir, archive: dir + "/locked.zip")
        }
    }

    @Test func aBombIsRefusedByItsDeclaredSizeBeforeWriting() throws {
        try withTemporaryDirectory { dir in
            let writer = try ZipWriter(path: dir + "/bomb.zip")
            try writer.addFile("small.txt", contents: Array("small".utf8))
            try writer.addFile("zeros.bin", contents: [UInt8](repeating: 0, count: 50_000_000))
            try writer.close()
            #expect(try readFile(dir + "/bomb.zip").count < 200_000)

            let error = try Self.expectRefusal(
                .sizeLimitExceeded, in: dir, archive: dir + "/bomb.zip",
                options: ZipExtractionOptions(maxTotalBytes: 1_000_000))

            #expect(error?.message.contains("50000005") == true)
        }
    }

    @Test func aHeaderThatUnderstatesTheSizeStopsAtTheByteLimit() throws {
        try withTemporaryDirectory { dir in
            let writer = try ZipWriter(path: dir + "/bomb.zip")
            try writer.addFile("zeros.bin", contents: [UInt8](repeating: 0, count: 50_000_000))
            try writer.close()
            var patcher = try ZipPatcher(path: dir + "/bomb.zip")
            patcher.setDeclaredSize(of: "zeros.bin", to: 1000)
            try patcher.save(to: dir + "/liar.zip")
            try makeFolder(dir + "/out")

            let error = #expect(throws: ArchiveError.self) {
                try ZipExtractor.extract(
                    archiveAt: dir + "/liar.zip", into: dir + "/out",
                    options: ZipExtractionOptions(maxTotalBytes: 100_000))
            }

            #expect(error?.code == .sizeLimitExceeded)
            #expect(try bytesOnDisk(dir + "/out") <= 100_000)
        }
    }

    @Test func aHeaderThatUnderstatesTheSizeIsCorruptEvenWithinTheLimit() throws {
        try withTemporaryDirectory { dir in
            let writer = try ZipWriter(path: dir + "/bomb.zip")
            try writer.addFile("zeros.bin", contents: [UInt8](repeating: 0, count: 50_000_000))
            try writer.close()
            var patcher = try ZipPatcher(path: dir + "/bomb.zip")
            patcher.setDeclaredSize(of: "zeros.bin", to: 1000)
            try patcher.save(to: dir + "/liar.zip")
            try makeFolder(dir + "/out")

            let error = #expect(throws: ArchiveError.self) {
                try ZipExtractor.extract(
                    archiveAt: dir + "/liar.zip", into: dir + "/out",
                    options: ZipExtractionOptions(maxTotalBytes: 1_000_000))
            }

            #expect(error?.code == .corrupt)
            #expect(error?.message.contains("declared 1000 bytes") == true)
            #expect(try bytesOnDisk(dir + "/out") <= 1000)
        }
    }

    @Test func aHeaderThatOverstatesTheSizeIsCorrupt() throws {
        try withTemporaryDirectory { dir in
            let writer = try ZipWriter(path: dir + "/a.zip")
            try writer.addFile("short.txt", contents: Array("only this".utf8))
            try writer.close()
            var patcher = try ZipPatcher(path: dir + "/a.zip")
            patcher.setDeclaredSize(of: "short.txt", to: 5000)
            try patcher.save(to: dir + "/liar.zip")
            try makeFolder(dir + "/out")

            let error = #expect(throws: ArchiveError.self) {
                try ZipExtractor.extract(archiveAt: dir + "/liar.zip", into: dir + "/out", options: .roomy)
            }

            #expect(error?.code == .corrupt)
        }
    }

    @Test func damagedDataFailsTheCRCCheckAsCorrupt() throws {
        try withTemporaryDirectory { dir in
            let writer = try ZipWriter(path: dir + "/a.zip")
            try writer.addRawEntry(name: "data.bin", contents: noise(10_000, seed: 3), unixMode: 0o100644)
            try writer.close()
            var patcher = try ZipPatcher(path: dir + "/a.zip")
            patcher.corruptData(of: "data.bin")
            try patcher.save(to: dir + "/bad.zip")
            try makeFolder(dir + "/out")

            let error = #expect(throws: ArchiveError.self) {
                try ZipExtractor.extract(archiveAt: dir + "/bad.zip", into: dir + "/out", options: .roomy)
            }

            #expect(error?.code == .corrupt)
            #expect(error?.message.contains("CRC") == true)
        }
    }

    @Test func aTruncatedArchiveIsCorruptAndAMissingOneCannotBeOpened() throws {
        try withTemporaryDirectory { dir in
            let writer = try ZipWriter(path: dir + "/a.zip")
            try writer.addFile("data.bin", contents: noise(10_000, seed: 4))
            try writer.close()
            try write(Array(try readFile(dir + "/a.zip").prefix(5000)), to: dir + "/cut.zip")
            try makeFolder(dir + "/out")

            let truncated = #expect(throws: ArchiveError.self) {
                try ZipExtractor.extract(archiveAt: dir + "/cut.zip", into: dir + "/out", options: .roomy)
            }
            let missing = #expect(throws: ArchiveError.self) {
                try ZipExtractor.extract(archiveAt: dir + "/nope.zip", into: dir + "/out", options: .roomy)
            }

            #expect(truncated?.code == .corrupt)
            #expect(missing?.code == .cannotOpen)
            #expect(missing?.message.contains(dir + "/nope.zip") == true)
            #expect(try snapshot(dir + "/out").isEmpty)
        }
    }

    @Test func twoEntriesWithOneNameAreRefused() throws {
        try withTemporaryDirectory { dir in
            let writer = try ZipWriter(path: dir + "/a.zip")
            try writer.addRawEntry(name: "same.txt", contents: Array("first".utf8), unixMode: 0o100644)
            try writer.addRawEntry(name: "SAME.txt", contents: Array("second".utf8), unixMode: 0o100644)
            try writer.close()
            var patcher = try ZipPatcher(path: dir + "/a.zip")
            patcher.rename("SAME.txt", to: Array("same.txt".utf8))
            try patcher.save(to: dir + "/dup.zip")
            #expect(try ZipPatcher(path: dir + "/dup.zip").names == ["same.txt", "same.txt"])

            let error = try Self.expectRefusal(.duplicateEntry, in: dir, archive: dir + "/dup.zip")

            #expect(error?.message.contains("'same.txt'") == true)
        }
    }

    @Test(arguments: [
        ["a", "a/"], ["a/", "a"], ["a", "a/b.txt"], ["a/b.txt", "a"],
        ["RXCacheContent/x", "RXCacheContent/x/"],
    ])
    func aNameUsedAsBothFileAndFolderIsRefused(names: [String]) throws {
        try withTemporaryDirectory { dir in
            let writer = try ZipWriter(path: dir + "/a.zip")
            for name in names {
                try writer.addRawEntry(
                    name: name, contents: name.hasSuffix("/") ? [] : Array("x".utf8),
                    unixMode: name.hasSuffix("/") ? 0o40755 : 0o100644)
            }
            try writer.close()

            _ = try Self.expectRefusal(.duplicateEntry, in: dir, archive: dir + "/a.zip")
        }
    }

    @Test func aNulByteInANameNeverReachesTheDisk() throws {
        try withTemporaryDirectory { dir in
            let writer = try ZipWriter(path: dir + "/a.zip")
            try writer.addRawEntry(name: "a_b.txt", contents: Array("x".utf8), unixMode: 0o100644)
            try writer.close()
            var patcher = try ZipPatcher(path: dir + "/a.zip")
            patcher.rename("a_b.txt", to: Array("a\0/../b".utf8))
            try patcher.save(to: dir + "/nul.zip")
            try makeFolder(dir + "/out")

            // libzip 1.7 turns a NUL in a name into a space before we see it, so the name cannot be
            // cut short at the NUL; the rest of the name is checked as usual.
            let error = #expect(throws: ArchiveError.self) {
                try ZipExtractor.extract(archiveAt: dir + "/nul.zip", into: dir + "/out", options: .roomy)
            }

            #expect(error?.code == .unsafeEntryName)
            #expect(try snapshot(dir + "/out").isEmpty)
        }
    }

    @Test func aFileInTheDestinationIsNeverOverwritten() throws {
        try withTemporaryDirectory { dir in
            let writer = try ZipWriter(path: dir + "/a.zip")
            try writer.addFile("a.txt", contents: Array("new".utf8))
            try writer.close()
            try write(Array("old".utf8), to: dir + "/out/a.txt")

            let error = #expect(throws: ArchiveError.self) {
                try ZipExtractor.extract(archiveAt: dir + "/a.zip", into: dir + "/out", options: .roomy)
            }

            #expect(error?.code == .invalidDestination)
            #expect(try snapshot(dir + "/out") == ["a.txt": .file(Array("old".utf8))])
        }
    }

    @Test func tooManyEntriesAreRefused() throws {
        try withTemporaryDirectory { dir in
            let writer = try ZipWriter(path: dir + "/a.zip")
            for index in 0..<11 { try writer.addFile("f\(index)", contents: []) }
            try writer.close()
            var options = ZipExtractionOptions.roomy
            options.maxEntries = 10

            let error = try Self.expectRefusal(.sizeLimitExceeded, in: dir, archive: dir + "/a.zip", options: options)
            #expect(error?.message.contains("11 entries, more than the limit of 10") == true)
            #expect(
                error?.message.contains("raise ZipExtractionOptions.maxEntries") == true, "the message names the fix")
        }
    }

    /// Issue 23's largest mirror: 1,000,000 files in folders of 100, with the top-level folder, is
    /// 1,010,101 entries, which the default limit of 1,000,000 refused.
    @Test func theDefaultLimitAdmitsAMillionFilesInFoldersOfAHundred() {
        #expect(ZipExtractionOptions(maxTotalBytes: 1).maxEntries >= 1_000_000 + 10_000 + 100 + 1)
    }
}
