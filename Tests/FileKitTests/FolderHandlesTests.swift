import FileKit
import Foundation
import Testing

/// Many links and stats of a tree, each folder opened once for the files that follow in it.
@Suite("FolderHandles reach files relative to their folder, as their paths would")
struct FolderHandlesTests {
    @Test func manyPairsLinkAcrossFoldersKeepExistingTargetsAndShareInodes() async throws {
        try await withScratchFolder { root in
            var pairs: [(source: String, target: String)] = []
            for folder in ["a", "a/b", "c"] {
                for index in 0..<3 {
                    let name = "\(folder)/f\(index)"
                    try writeFile("bytes of \(name)", root + "/src/" + name)
                    try FileManager.default.createDirectory(
                        atPath: root + "/dst/" + folder, withIntermediateDirectories: true)
                    pairs.append((root + "/src/" + name, root + "/dst/" + name))
                }
            }
            // One target exists already with other bytes: kept, as linkOrCopy keeps it.
            try writeFile("already there", root + "/dst/c/f1")
            try FileSystem.linkOrCopy(pairs)
            var handles = FolderHandles()
            for (source, target) in pairs {
                let found = handles.identity(of: target)
                let linked = try #require(found)
                if target.hasSuffix("c/f1") {
                    #expect(try String(contentsOfFile: target, encoding: .utf8) == "already there")
                } else {
                    #expect(linked == FileIdentity(path: source))
                }
            }
        }
    }

    @Test func aMissingFolderFailsNamingThePathAndALaterPairStillWorks() async throws {
        try await withScratchFolder { root in
            try writeFile("x", root + "/src/f")
            try FileManager.default.createDirectory(atPath: root + "/dst", withIntermediateDirectories: true)
            let error = #expect(throws: FileSystemError.self) {
                try FileSystem.linkOrCopy([(root + "/src/f", root + "/missing/f")])
            }
            #expect(error?.code == .notFound)
            #expect(error?.description.contains(root + "/missing/f") == true)
            try FileSystem.linkOrCopy([(root + "/src/f", root + "/dst/f")])
            #expect(FileIdentity(path: root + "/dst/f") == FileIdentity(path: root + "/src/f"))
        }
    }

    /// A symlink named as the file is not followed: its identity is none (it is not a regular
    /// file), and linking it links the symlink itself, never the file it points to.
    @Test func aSymlinkInTheNamesPlaceIsNeverFollowed() async throws {
        try await withScratchFolder { root in
            try writeFile("outside", root + "/outside")
            try FileManager.default.createDirectory(atPath: root + "/src", withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: root + "/dst", withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: root + "/src/f", withDestinationPath: root + "/outside")
            var handles = FolderHandles()
            let link = handles.identity(of: root + "/src/f")
            let outside = handles.identity(of: root + "/outside")
            #expect(link == nil)
            #expect(outside == FileIdentity(path: root + "/outside"))
            try FileSystem.linkOrCopy([(root + "/src/f", root + "/dst/f")])
            let attributes = try FileManager.default.attributesOfItem(atPath: root + "/dst/f")
            #expect(attributes[.type] as? FileAttributeType == .typeSymbolicLink)
            let linked = handles.identity(of: root + "/dst/f")
            #expect(linked == nil)
        }
    }

    /// The folder held open is the one the path named when it was opened: a folder swapped for a
    /// symlink afterwards is not followed by later names in it.
    @Test func theHeldFolderIsTheOneOpenedNotWhatReplacesItsPath() async throws {
        try await withScratchFolder { root in
            try writeFile("first", root + "/d/f")
            try writeFile("elsewhere", root + "/elsewhere/g")
            var handles = FolderHandles()
            let first = handles.identity(of: root + "/d/f")
            let before = try #require(first)
            try FileManager.default.moveItem(atPath: root + "/d", toPath: root + "/moved")
            try FileManager.default.createSymbolicLink(atPath: root + "/d", withDestinationPath: root + "/elsewhere")
            // Still the moved folder's file, and the symlinked folder's file is not found in it.
            let again = handles.identity(of: root + "/d/f")
            let other = handles.identity(of: root + "/d/g")
            #expect(again == before)
            #expect(other == nil)
        }
    }
}
