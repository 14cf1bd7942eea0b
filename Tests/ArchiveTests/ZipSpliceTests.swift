import Foundation
import Testing

@testable import Archive
@testable import FileKit

/// A spliced archive (the previous archive's unchanged entries copied in runs, the rest built
/// apart) is byte for byte the archive a fresh build makes, for every kind of change, in both end
/// record kinds (ZIP64 past 65,535 entries); what it cannot splice, it declines.
@Suite struct ZipSpliceTests {
    /// The folders and files below `root`, relative to it.
    func listing(_ root: String) throws -> (folders: [SafeRelativePath], files: [SafeRelativePath]) {
        var folders: [SafeRelativePath] = []
        var files: [SafeRelativePath] = []
        try DirectoryWalker.walk(root) { entry in
            switch entry {
            case .folder(let path): folders.append(path)
            case .file(let path, _): files.append(path)
            default: break
            }
        }
        return (folders, files)
    }

    /// Splices `new` from `old.zip` (files equal by bytes at the same path count as unchanged)
    /// and checks it against a fresh build; returns the entries copied.
    @discardableResult
    func spliceMatchesAFreshBuild(
        _ dir: String, moved: [SafeRelativePath: SafeRelativePath] = [:],
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> Int? {
        let (folders, files) = try listing(dir + "/new")
        let copied = try ZipWriter.splice(
            folder: dir + "/new", to: dir + "/spliced.zip", topLevelFolder: "RXCacheContent",
            previous: dir + "/old.zip", folders: folders, files: files,
            unchanged: { path in
                (try? readFile(dir + "/old/" + path.string)) == (try? readFile(dir + "/new/" + path.string))
            }, moved: moved)
        try ZipWriter.archive(folder: dir + "/new", to: dir + "/fresh.zip", topLevelFolder: "RXCacheContent")
        if copied != nil {
            #expect(
                try readFile(dir + "/spliced.zip") == (try readFile(dir + "/fresh.zip")),
                "spliced and fresh archives differ", sourceLocation: sourceLocation)
        }
        #expect(
            !FileManager.default.fileExists(atPath: dir + "/spliced.zip.fresh-\(getpid())"),
            "the archive of the changed entries is deleted", sourceLocation: sourceLocation)
        return copied
    }

    /// Entries are sorted by the bytes of their names (a folder's with its `/`), as `sorted()` of
    /// the names gives: siblings whose names go on with a byte below `/` (`docs.md`, `docs-old`,
    /// `a b`) come before the folder they extend. Fresh and spliced archives agree, and a folder
    /// still comes before what it holds.
    @Test func entriesAreSortedByTheBytesOfTheirNames() throws {
        try withTemporaryDirectory { dir in
            let files = [
                "docs/a.md", "docs.md", "docs-old/b.md", "a b/c.txt", "a/d.txt", "a/e f.txt", "a/e/g.txt", "z.txt",
                "é/x.txt", "e/y.txt",
            ]
            for (index, path) in files.enumerated() {
                try write(noise(100 + index, seed: UInt64(index)), to: dir + "/old/" + path)
            }
            try ZipWriter.archive(folder: dir + "/old", to: dir + "/old.zip", topLevelFolder: "RXCacheContent")
            for (index, path) in files.enumerated() {
                try write(
                    noise(100 + index, seed: UInt64(index) + (path == "docs.md" ? 50 : 0)), to: dir + "/new/" + path)
            }
            try spliceMatchesAFreshBuild(dir)
            let names = try ZipReader(path: dir + "/fresh.zip").entries().map(\.name)
            #expect(names.count == files.count + 8, "the files, their 7 folders and RXCacheContent/: \(names)")
            #expect(names == names.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }, "\(names)")
            #expect(names.firstIndex(of: "RXCacheContent/docs.md")! < names.firstIndex(of: "RXCacheContent/docs/")!)
            for (position, name) in names.enumerated() where name.hasSuffix("/") {
                #expect(!names[..<position].contains { $0.hasPrefix(name) }, "\(name) comes before what it holds")
            }
        }
    }

    @Test func everyKindOfChangeSplicesToTheFreshArchive() throws {
        try withTemporaryDirectory { dir in
            var old: [String: [UInt8]] = [:]
            for index in 0..<60 {
                old["f\(index % 4)/s\(index % 3)/file-\(index).bin"] = noise(index * 997 % 20_000, seed: UInt64(index))
            }
            old["empty.txt"] = []
            old["é/ünïcode name.txt"] = Array("unicode".utf8)
            for (path, bytes) in old { try write(bytes, to: dir + "/old/" + path) }
            try FileManager.default.createDirectory(
                atPath: dir + "/old/empty-folder", withIntermediateDirectories: true)
            try ZipWriter.archive(folder: dir + "/old", to: dir + "/old.zip", topLevelFolder: "RXCacheContent")

            // Edits (first entry, last entry, middle), a same-size edit, an added file and
            // folder, removed files and a removed folder, a move.
            var new = old
            new["f0/s0/file-0.bin"] = Array("first entry edited".utf8)
            new["é/ünïcode name.txt"] = Array("UNICODE".utf8)
            new["f1/s1/file-1.bin"] = noise(old["f1/s1/file-1.bin"]!.count, seed: 999)
            new["f2/s2/file-5.bin"] = Array("middle edited".utf8)
            new["added/deep/new.bin"] = noise(5_000, seed: 77)
            new["f3/s0/file-3.bin"] = nil
            new["f3/s1/file-7.bin"] = nil
            for path in new.keys where path.hasPrefix("f2/s1/") { new[path] = nil }
            let movedBytes = new.removeValue(forKey: "f1/s2/file-5.bin")!
            new["moved/file-5.bin"] = movedBytes
            for (path, bytes) in new { try write(bytes, to: dir + "/new/" + path) }
            try FileManager.default.createDirectory(
                atPath: dir + "/new/empty-folder", withIntermediateDirectories: true)
            let copied = try spliceMatchesAFreshBuild(
                dir,
                moved: [
                    try SafeRelativePath(validating: "moved/file-5.bin"): try SafeRelativePath(
                        validating: "f1/s2/file-5.bin")
                ])
            // Every old entry still in the new tree with its bytes (folders included) was copied.
            let kept = new.filter { old[$0.key] == $0.value }.count
            let (folders, _) = try listing(dir + "/new")
            let oldFolders = Set(try listing(dir + "/old").folders)
            #expect(copied == kept + folders.filter(oldFolders.contains).count + 1, "+1: RXCacheContent/")

            // Nothing changed, and everything changed.
            try FileManager.default.removeItem(atPath: dir + "/new")
            for (path, bytes) in old { try write(bytes, to: dir + "/new/" + path) }
            try FileManager.default.createDirectory(
                atPath: dir + "/new/empty-folder", withIntermediateDirectories: true)
            #expect(try spliceMatchesAFreshBuild(dir) == old.count + (try listing(dir + "/old").folders.count) + 1)
            try FileManager.default.removeItem(atPath: dir + "/new")
            for (path, bytes) in old { try write(bytes + [1], to: dir + "/new/" + path) }
            #expect(try spliceMatchesAFreshBuild(dir) == (try listing(dir + "/new").folders.count) + 1)
        }
    }

    /// Ten seconds of blocking work: on the cooperative pool (two threads here) it starved the
    /// loopback servers of the transport tests in the same process past their time limits, so it
    /// runs on the blocking-work pool. It reports by its result: `#expect` belongs to the test's task.
    @Test func anArchiveOfMoreThan65535EntriesSplicesWithItsZIP64EndRecords() async throws {
        let (isZIP64, copied, identical) = try await BlockingIOPool.shared.run { try Self.spliceAZIP64Archive() }
        #expect(isZIP64)
        #expect(copied == 66_000 - 2 + 66 + 1)
        #expect(identical, "spliced and fresh archives differ")
    }

    /// Builds a ZIP64 archive, changes three files, splices: whether the previous archive was
    /// ZIP64, the entries copied, and whether the splice equals a fresh build.
    static func spliceAZIP64Archive() throws -> (Bool, Int?, Bool) {
        try withTemporaryDirectory { dir in
            // 66,000 empty files and 66 folders: past the 16-bit entry count.
            for folder in 0..<66 {
                let path = dir + "/old/d\(folder)"
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
                for index in 0..<1_000 {
                    let fd = open(path + "/f\(index)", O_WRONLY | O_CREAT | O_EXCL, 0o644)
                    guard fd >= 0 else { throw POSIXError(.EIO) }
                    close(fd)
                }
            }
            try ZipWriter.archive(folder: dir + "/old", to: dir + "/old.zip", topLevelFolder: "RXCacheContent")
            let isZIP64 = SourceArchive(path: dir + "/old.zip")?.isZIP64 == true
            guard rename(dir + "/old", dir + "/new") == 0 else { throw POSIXError(.EIO) }
            try write(Array("changed".utf8), to: dir + "/new/d10/f5")
            guard unlink(dir + "/new/d20/f7") == 0 else { throw POSIXError(.EIO) }
            try write(Array("added".utf8), to: dir + "/new/d30/added")
            // Unchanged: everything but the three paths touched (the old tree is gone: by name).
            let touched: Set<String> = ["d10/f5", "d20/f7", "d30/added"]
            let (folders, files) = try Self().listing(dir + "/new")
            let copied = try ZipWriter.splice(
                folder: dir + "/new", to: dir + "/spliced.zip", topLevelFolder: "RXCacheContent",
                previous: dir + "/old.zip", folders: folders, files: files,
                unchanged: { !touched.contains($0.string) }, moved: [:])
            try ZipWriter.archive(folder: dir + "/new", to: dir + "/fresh.zip", topLevelFolder: "RXCacheContent")
            return (isZIP64, copied, try readFile(dir + "/spliced.zip") == (try readFile(dir + "/fresh.zip")))
        }
    }

    @Test func whatCannotBeSplicedIsDeclined() throws {
        try withTemporaryDirectory { dir in
            try write(Array("same".utf8), to: dir + "/new/a.txt")
            let files = [try SafeRelativePath(validating: "a.txt")]
            func splice(_ previous: String) throws -> Int? {
                try ZipWriter.splice(
                    folder: dir + "/new", to: dir + "/out.zip", topLevelFolder: "RXCacheContent",
                    previous: previous, folders: [], files: files, unchanged: { _ in true }, moved: [:])
            }
            // Not this writer's (no marker), missing, not a zip, truncated.
            let foreign = try ZipWriter(path: dir + "/foreign.zip")
            try foreign.addDirectory("RXCacheContent")
            try foreign.addFile("RXCacheContent/a.txt", contents: Array("same".utf8))
            try foreign.close()
            #expect(try splice(dir + "/foreign.zip") == nil)
            #expect(try splice(dir + "/missing.zip") == nil)
            try write(Array(repeating: 0x50, count: 4_096), to: dir + "/junk.zip")
            #expect(try splice(dir + "/junk.zip") == nil)
            try ZipWriter.archive(folder: dir + "/new", to: dir + "/good.zip", topLevelFolder: "RXCacheContent")
            let good = try readFile(dir + "/good.zip")
            try write(Array(good.dropFirst(10)), to: dir + "/shifted.zip")
            #expect(try splice(dir + "/shifted.zip") == nil, "blocks no longer where the directory says")
            #expect(try splice(dir + "/good.zip") == 2)
            #expect(try readFile(dir + "/out.zip") == good)
            #expect(!FileManager.default.fileExists(atPath: dir + "/out.zip.fresh-\(getpid())"))
        }
    }

    /// Another program cuts the previous archive short while the splice copies from it (a `cp`
    /// over the storage's archive during a publish): the splice fails naming the file, where a
    /// read of a memory map past the new end killed the process with `SIGBUS`.
    @Test func aPreviousArchiveCutShortMidSpliceFailsWithAMessageNotACrash() throws {
        try withTemporaryDirectory { dir in
            var files: [SafeRelativePath] = []
            for index in 0..<40 {
                let path = "f\(index % 4)/file-\(index).bin"
                try write(noise(30_000, seed: UInt64(index)), to: dir + "/new/" + path)
                files.append(try SafeRelativePath(validating: path))
            }
            let folders = (0..<4).map { try! SafeRelativePath(validating: "f\($0)") }
            try ZipWriter.archive(folder: dir + "/new", to: dir + "/old.zip", topLevelFolder: "RXCacheContent")
            let previous = dir + "/old.zip"
            var cut = false
            #expect {
                try ZipWriter.splice(
                    folder: dir + "/new", to: dir + "/out.zip", topLevelFolder: "RXCacheContent",
                    previous: previous, folders: folders, files: files,
                    unchanged: { _ in
                        // The directory was read; the copying has not started.
                        if !cut { cut = truncate(previous, 5_000) == 0 }
                        return true
                    }, moved: [:])
            } throws: { error in
                let text = "\(error)"
                return text.contains(previous) && text.contains("became shorter")
                    && text.contains("run the command again")
            }
            #expect(cut)
            #expect(!FileManager.default.fileExists(atPath: dir + "/out.zip"), "a failed splice leaves no archive")
        }
    }
}
