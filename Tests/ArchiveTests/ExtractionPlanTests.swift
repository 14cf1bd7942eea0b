import Testing

@testable import Archive
@testable import FileKit

/// The naming, layout and limit rules, driven from central-directory records without I/O.
@Suite(.timeLimit(.minutes(3)))
struct ExtractionPlanTests {
    static func file(_ name: String, size: UInt64 = 1, mode: UInt32? = 0o100644) -> RawZipEntry {
        RawZipEntry(
            index: 0, name: name, declaredSize: size, isEncrypted: false, unixMode: mode,
            hasDOSFolderAttribute: false)
    }

    static func folder(_ name: String) -> RawZipEntry {
        RawZipEntry(
            index: 0, name: name, declaredSize: 0, isEncrypted: false, unixMode: 0o40755,
            hasDOSFolderAttribute: false)
    }

    static func plan(
        _ entries: [RawZipEntry], limit: Int64 = 1 << 30,
        configure: (inout ZipExtractionOptions) -> Void = { _ in }
    ) throws(ArchiveError) -> ExtractionPlan {
        var options = ZipExtractionOptions(maxTotalBytes: limit)
        configure(&options)
        let numbered = entries.enumerated().map { offset, entry in
            var entry = entry
            entry.index = UInt64(offset)
            return entry
        }
        return try ExtractionPlan(entries: numbered, options: options, archive: "test.zip")
    }

    struct LayoutCase: CustomTestStringConvertible, Sendable {
        var entries: [RawZipEntry]
        var files: [String]
        var folders: [String]
        var skipped: Int = 0
        var testDescription: String { entries.map(\.name).joined(separator: ", ") }
    }

    static let layouts: [LayoutCase] = [
        LayoutCase(
            entries: [file("RXCacheContent/a"), file("RXCacheContent/b/c")], files: ["a", "b/c"], folders: ["b"]),
        LayoutCase(
            entries: [folder("RXCacheContent/"), file("RXCacheContent/a"), folder("RXCacheContent/e/")],
            files: ["a"], folders: ["e"]),
        LayoutCase(
            entries: [file("RXCacheContent/a"), file("b")], files: ["RXCacheContent/a", "b"],
            folders: ["RXCacheContent"]),
        LayoutCase(entries: [file("RXCacheContent")], files: ["RXCacheContent"], folders: []),
        LayoutCase(entries: [file("Other/a")], files: ["Other/a"], folders: ["Other"]),
        LayoutCase(
            entries: [file("RXCacheContent/a"), file("__MACOSX/RXCacheContent/._a"), folder("__MACOSX/")],
            files: ["a"], folders: [], skipped: 2),
        LayoutCase(
            entries: [file("x/y/z"), folder("x/"), folder("q/r/")], files: ["x/y/z"],
            folders: ["q", "q/r", "x", "x/y"]),
        LayoutCase(entries: [file("dir", mode: 0o40755).with(size: 0)], files: [], folders: ["dir"]),
        LayoutCase(entries: [file("plain", mode: nil)], files: ["plain"], folders: []),
    ]

    @Test(arguments: layouts)
    func layoutFollowsStrippingAndSkippingRules(layout: LayoutCase) throws {
        let plan = try Self.plan(layout.entries)

        #expect(plan.files.map(\.path.string) == layout.files)
        #expect(plan.folders.map(\.string) == layout.folders)
        #expect(plan.skippedEntries == layout.skipped)
    }

    @Test func strippingCanBeTurnedOff() throws {
        let plan = try Self.plan([Self.file("RXCacheContent/a")]) { $0.stripTopLevelFolder = nil }

        #expect(plan.files.map(\.path.string) == ["RXCacheContent/a"])
    }

    @Test func skippedFolderNamesAreStillChecked() {
        let error = #expect(throws: ArchiveError.self) {
            try Self.plan([Self.file("__MACOSX/../../etc/passwd")])
        }
        #expect(error?.code == .unsafeEntryName)
    }

    @Test(arguments: [
        ([file("a"), file("a")], ArchiveError.Code.duplicateEntry),
        ([folder("a/"), folder("a/")], .duplicateEntry),
        ([file("RXCacheContent/a"), file("RXCacheContent/a/b")], .duplicateEntry),
        ([file("a", mode: 0o120777)], .forbiddenEntryType),
        ([file("a", mode: 0o020644)], .forbiddenEntryType),
        ([file("a", mode: 0o010644)], .forbiddenEntryType),
        ([file("a", size: 600), file("b", size: 500)], .sizeLimitExceeded),
        ([file("a", size: UInt64.max)], .sizeLimitExceeded),
        ([file("a", size: UInt64(Int64.max)), file("b", size: UInt64(Int64.max))], .sizeLimitExceeded),
        ([folder("a/").with(size: 10)], .corrupt),
        ([file("")], .unsafeEntryName),
        ([file("a/")].map { $0.with(size: 0) } + [file("C:\\x")], .unsafeEntryName),
        ([file("secret").encrypted()], .encryptedEntry),
    ])
    func badDirectoriesAreRefused(entries: [RawZipEntry], code: ArchiveError.Code) {
        let error = #expect(throws: ArchiveError.self) {
            try Self.plan(entries, limit: 1000)
        }
        #expect(error?.code == code)
        #expect(error?.message.contains("test.zip") == true)
    }

    @Test func declaredBytesAreSummedOverKeptFilesOnly() throws {
        let plan = try Self.plan(
            [
                Self.file("a", size: 400), Self.file("b/c", size: 600),
                Self.file("__MACOSX/big", size: 5000),
            ], limit: 1000)

        #expect(plan.declaredBytes == 1000)
    }
}

extension RawZipEntry {
    func with(size: UInt64) -> RawZipEntry {
        var copy = self
        copy.declaredSize = size
        return copy
    }

    func encrypted() -> RawZipEntry {
        var copy = self
        copy.isEncrypted = true
        return copy
    }
}
