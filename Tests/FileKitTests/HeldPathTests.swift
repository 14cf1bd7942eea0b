import CLinux
import FileKit
import Foundation
import Testing

/// Below a held folder (`/proc/self/fd/N/…`), no path operation follows a link on the way: a
/// folder of the tree swapped for a link to elsewhere (by a neighbour, mid-run) fails the call
/// instead of leading out of the tree. Found by the outside audit: a repair wrote its downloads
/// through `next/d050` swapped for a link, and linked files of a swapped content folder.
@Suite("Paths below a held folder never follow a link on the way")
struct HeldPathTests {
    /// A tree `tree/` with `tree/real/f` and `tree/swapped` a link to `outside/`, which holds `f`.
    func plant(_ root: String) throws -> HeldFolder {
        try writeFile("inside", root + "/tree/real/f")
        try writeFile("outside", root + "/outside/f")
        try FileManager.default.createSymbolicLink(
            atPath: root + "/tree/swapped", withDestinationPath: root + "/outside")
        return try HeldFolder.content(root + "/tree")
    }

    @Test func everyKindOfCallRefusesALinkOnTheWay() async throws {
        try await withScratchFolder { root in
            let held = try plant(root)
            #expect(held.path.hasPrefix("/proc/self/fd/"), "the kernel names held folders here")
            let outsideBefore = try #require(FileIdentity(path: root + "/outside/f"))

            // Linked from: nothing outside becomes part of the tree.
            try FileManager.default.createDirectory(atPath: root + "/copy/swapped", withIntermediateDirectories: true)
            let linking = #expect(throws: FileSystemError.self) {
                try FileSystem.linkOrCopy([(held.path + "/swapped/f", root + "/copy/swapped/f")])
            }
            #expect(linking?.errno == ELOOP || linking?.errno == ENOTDIR)
            #expect(!FileManager.default.fileExists(atPath: root + "/copy/swapped/f"))
            // Deleted through: the file outside stays.
            #expect(throws: FileSystemError.self) { try FileSystem.removeTree(held.path + "/swapped/f") }
            // Created in: no folder appears outside.
            #expect(throws: FileSystemError.self) { try FileSystem.makeFolder(held.path + "/swapped/new") }
            #expect(!FileManager.default.fileExists(atPath: root + "/outside/new"))
            // Renamed into: nothing lands outside.
            try writeFile("moved", root + "/tree/real/m")
            #expect(throws: FileSystemError.self) {
                try FileSystem.rename(held.path + "/real/m", to: held.path + "/swapped/m", operation: "cannot move")
            }
            #expect(!FileManager.default.fileExists(atPath: root + "/outside/m"))
            // Reached by folder handles: no identity, no descriptor into the link's target.
            var handles = FolderHandles()
            #expect(handles.identity(of: held.path + "/swapped/f") == nil)
            #expect(handles.identity(of: held.path + "/real/f") == FileIdentity(path: root + "/tree/real/f"))
            // The same calls work below real folders.
            try FileSystem.linkOrCopy([(held.path + "/real/f", root + "/copy/f")])
            #expect(FileIdentity(path: root + "/copy/f") == FileIdentity(path: root + "/tree/real/f"))
            #expect(FileIdentity(path: root + "/outside/f") == outsideBefore)
            #expect(try String(contentsOfFile: root + "/outside/f", encoding: .utf8) == "outside")
        }
    }

    @Test func theLastNameIsLeftToTheCallAndALinkedHeldFolderIsRefused() async throws {
        try await withScratchFolder { root in
            let held = try plant(root)
            // `unlinkat` of the link itself removes the link, never its target.
            try FileSystem.removeTree(held.path + "/swapped")
            #expect(!FileManager.default.fileExists(atPath: root + "/tree/swapped"))
            #expect(FileManager.default.fileExists(atPath: root + "/outside/f"))
            // The content folder itself a link: refused when it is held.
            try FileManager.default.createSymbolicLink(atPath: root + "/alias", withDestinationPath: root + "/outside")
            #expect(throws: FileSystemError.self) { _ = try HeldFolder.content(root + "/alias") }
        }
    }

    /// The C walk the kernel's `openat2` stands in for (where it is refused): the same answers.
    @Test func theNameByNameWalkRefusesLinksAndParents() async throws {
        try await withScratchFolder { root in
            let held = try plant(root)
            let flags = clinux_o_path() | O_DIRECTORY | O_CLOEXEC
            for open in [clinux_open_beneath, clinux_open_beneath_by_name] {
                for path in ["real", "./real", "real/", ".//real"] {
                    let real = open(held.descriptor, path, flags)
                    #expect(real >= 0, "\(path)")
                    if real >= 0 { close(real) }
                }
                for path in ["swapped", "real/../swapped", "../tree", "/etc", "real/../../outside"] {
                    #expect(open(held.descriptor, path, flags) == -1, "\(path)")
                }
            }
        }
    }
}
