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

    /// A hostile archive that lists a path many times, or a folder twice above many files, is
    /// refused as the whole plan refuses it, reading back only the few entries that decide it.
    @Test(arguments: [
        "a path listed many times", "a folder listed twice above many files", "case twins above many files",
    ])
    func theSecondReadingHoldsOnlyTheDecidingEntries(kind: String) {
        var entries: [RawZipEntry] = []
        func add(_ name: String) {
            let folder = name.hasSuffix("/")
            entries.append(
                RawZipEntry(
                    index: UInt64(entries.count), name: name, declaredSize: folder ? 0 : 10, isEncrypted: false,
                    unixMode: folder ? 0o40755 : 0o100644, hasDOSFolderAttribute: false))
        }
        switch kind {
        case "a path listed many times":
            for _ in 0..<5_000 { add("docs/same.txt") }
        case "a folder listed twice above many files":
            add("docs/")
            for index in 0..<2_500 { add("docs/f\(index).txt") }
            add("docs/")
            for index in 2_500..<5_000 { add("docs/sub/f\(index).txt") }
        default:
            for index in 0..<2_500 { add("Docs/f\(index).txt") }
            for index in 0..<2_500 { add("docs/g\(index).txt") }
        }
        let options = ZipExtractionOptions(maxTotalBytes: 1 << 30)
        var reread = 0
        let streamed = Result { () throws(ArchiveError) -> Void in
            var plan = StreamedPlan(options: options, archive: "test.zip")
            for entry in entries { try plan.add(entry) }
            _ = try plan.finish { wanted in
                let involved = entries.filter(wanted)
                reread = involved.count
                return involved
            }
        }
        guard case .failure(let whole) = Self.whole(entries, options) else {
            Issue.record("the whole plan accepts it")
            return
        }
        guard case .failure(let error) = streamed else {
            Issue.record("the streamed plan accepts it")
            return
        }
        #expect(error.message == whole.message)
        #expect(error.code == .duplicateEntry)
        #expect(reread > 0 && reread <= 4, "\(reread) entries read back")
    }
}
