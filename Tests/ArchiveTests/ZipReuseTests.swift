import Testing

@testable import Archive
@testable import FileKit

/// Copying unchanged deflated entries from the previous archive gives the bytes a fresh build
/// would, and never copies an entry whose bytes differ.
@Suite struct ZipReuseTests {
    func folder(_ files: [String: [UInt8]], at root: String) throws {
        for (path, contents) in files { try write(contents, to: root + "/" + path) }
    }

    @Test func unchangedEntriesAreCopiedAndTheArchiveIsTheSameAsAFreshOne() throws {
        try withTemporaryDirectory { dir in
            let big = noise(300_000, seed: 1)
            try folder(
                ["a.txt": Array("one".utf8), "sub/b.bin": big, "sub/c.txt": Array("three".utf8)], at: dir + "/old")
            try folder(
                ["a.txt": Array("ONE, changed".utf8), "sub/b.bin": big, "sub/c.txt": Array("three".utf8)],
                at: dir + "/new")
            try ZipWriter.archive(folder: dir + "/old", to: dir + "/old.zip", topLevelFolder: "RXCacheContent")
            // a.txt is claimed unchanged but is not: its CRC differs, so it is compressed again.
            var sources: [SafeRelativePath: SafeRelativePath] = [:]
            for name in ["a.txt", "sub/b.bin", "sub/c.txt"] {
                sources[try SafeRelativePath(validating: name)] = try SafeRelativePath(validating: name)
            }
            let copied = try ZipWriter.archive(
                folder: dir + "/new", to: dir + "/reused.zip", topLevelFolder: "RXCacheContent",
                reusing: ArchiveReuse(previousArchive: dir + "/old.zip", sources: sources))
            let fresh = try ZipWriter.archive(
                folder: dir + "/new", to: dir + "/fresh.zip", topLevelFolder: "RXCacheContent")
            #expect(copied == 2)
            #expect(fresh == 0)
            #expect(try readFile(dir + "/reused.zip") == (try readFile(dir + "/fresh.zip")))
        }
    }

    @Test func aMovedFileIsCopiedFromItsOldEntry() throws {
        try withTemporaryDirectory { dir in
            let big = noise(200_000, seed: 2)
            try folder(["photos/a.bin": big], at: dir + "/old")
            try folder(["pictures/a.bin": big], at: dir + "/new")
            try ZipWriter.archive(folder: dir + "/old", to: dir + "/old.zip", topLevelFolder: "RXCacheContent")
            let copied = try ZipWriter.archive(
                folder: dir + "/new", to: dir + "/moved.zip", topLevelFolder: "RXCacheContent",
                reusing: ArchiveReuse(
                    previousArchive: dir + "/old.zip",
                    sources: [
                        try SafeRelativePath(validating: "pictures/a.bin"):
                            try SafeRelativePath(validating: "photos/a.bin")
                    ]))
            try ZipWriter.archive(folder: dir + "/new", to: dir + "/fresh.zip", topLevelFolder: "RXCacheContent")
            #expect(copied == 1)
            #expect(try readFile(dir + "/moved.zip") == (try readFile(dir + "/fresh.zip")))
        }
    }

    @Test func anArchiveThisWriterDidNotMakeIsNeverCopiedFrom() throws {
        try withTemporaryDirectory { dir in
            try folder(["a.txt": Array("same".utf8)], at: dir + "/content")
            // Same entry name, CRC and size, but written without the writer's marker.
            let foreign = try ZipWriter(path: dir + "/foreign.zip")
            try foreign.addDirectory("RXCacheContent")
            try foreign.addFile("RXCacheContent/a.txt", contents: Array("same".utf8))
            try foreign.close()
            let copied = try ZipWriter.archive(
                folder: dir + "/content", to: dir + "/out.zip", topLevelFolder: "RXCacheContent",
                reusing: ArchiveReuse(
                    previousArchive: dir + "/foreign.zip",
                    sources: [try SafeRelativePath(validating: "a.txt"): try SafeRelativePath(validating: "a.txt")]))
            #expect(copied == 0)
        }
    }
}
