import Testing

@testable import Archive
@testable import FileKit

/// `StreamedPlan` (the plan of an archive read window by window) judges every archive as
/// `ExtractionPlan` judges it whole: the same files and folders where they land, or the same
/// refusal word for word.
@Suite(.timeLimit(.minutes(3)))
struct StreamedPlanTests {
    struct Outcome: Equatable {
        var files: [String]
        var folders: [String]
        var skipped: Int
        var declared: Int64
    }

    static func whole(_ entries: [RawZipEntry], _ options: ZipExtractionOptions) -> Result<Outcome, ArchiveError> {
        Result { () throws(ArchiveError) -> Outcome in
            let plan = try ExtractionPlan(entries: entries, options: options, archive: "test.zip")
            return Outcome(
                files: plan.files.map(\.path.string), folders: plan.folders.map(\.string),
                skipped: plan.skippedEntries, declared: plan.declaredBytes)
        }
    }

    static func streamed(_ entries: [RawZipEntry], _ options: ZipExtractionOptions) -> Result<Outcome, ArchiveError> {
        Result { () throws(ArchiveError) -> Outcome in
            var plan = StreamedPlan(options: options, archive: "test.zip")
            for entry in entries { try plan.add(entry) }
            let folders = try plan.finish { wanted in entries.filter(wanted) }
            let files = try plan.files(of: entries)
            #expect(files.count == plan.fileCount)
            return Outcome(
                files: files.map(\.path.string), folders: folders.map(\.string), skipped: plan.skippedEntries,
                declared: plan.declaredBytes)
        }
    }

    struct Generator {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        mutating func pick<T>(_ values: [T]) -> T { values[next(values.count)] }
    }

    /// Random small archives, many of them with duplicates, case twins, files under files,
    /// skipped and stripped folders, bad names and sizes past the limit.
    static func archive(seed: Int) -> (entries: [RawZipEntry], options: ZipExtractionOptions) {
        var random = Generator(state: UInt64(seed) &* 7 &+ 3)
        var entries: [RawZipEntry] = []
        for index in 0..<(1 + random.next(12)) {
            var name: String
            if !entries.isEmpty && random.next(6) == 0 {
                name = random.pick(entries).name // the same name again
            } else {
                var parts: [String] = []
                if random.next(3) > 0 {
                    parts.append(random.pick(["RXCacheContent", "rxcachecontent", "docs", "Docs", "__MACOSX"]))
                }
                for _ in 0..<random.next(3) { parts.append(random.pick(["a", "A", "b", "x", "X"])) }
                if parts.isEmpty { parts.append(random.pick(["x", "X", "y"])) }
                name = parts.joined(separator: "/")
                if random.next(25) == 0 { name = random.pick(["../up", "", "a//b", "/abs"]) }
            }
            let folder = name.hasSuffix("/") || random.next(4) == 0
            if folder && !name.hasSuffix("/") && !name.isEmpty { name += "/" }
            entries.append(
                RawZipEntry(
                    index: UInt64(index), name: name, declaredSize: folder ? 0 : UInt64(random.next(400)),
                    isEncrypted: random.next(60) == 0, unixMode: folder ? 0o40755 : 0o100644,
                    hasDOSFolderAttribute: false))
        }
        var options = ZipExtractionOptions(maxTotalBytes: random.next(5) == 0 ? 300 : 1 << 30)
        if random.next(4) == 0 { options.stripTopLevelFolder = nil }
        return (entries, options)
    }

    @Test func theStreamedPlanJudgesEveryArchiveAsTheWholePlan() {
        var refused = 0
        var accepted = 0
        for seed in 0..<2000 {
            let (entries, options) = Self.archive(seed: seed)
            switch (Self.whole(entries, options), Self.streamed(entries, options)) {
            case (.success(let one), .success(let two)):
                #expect(one == two, "seed \(seed): \(entries.map(\.name))")
                accepted += 1
            case (.failure(let one), .failure(let two)):
                #expect(one.code == two.code && one.message == two.message, "seed \(seed): \(one) / \(two)")
                refused += 1
            case (let one, let two):
                Issue.record("seed \(seed): \(entries.map(\.name)): whole \(one), streamed \(two)")
            }
        }
        #expect(refused > 200 && accepted > 200, "refused \(refused), accepted \(accepted)")
    }
}
