import FileKit

/// ``ExtractionPlan``'s checks over an archive read window by window (``ArchiveOpener``), holding
/// about 8 bytes per entry instead of every entry's name and path (at 1,000,000 files the whole
/// plan held about 430 MiB).
///
/// Each entry is judged on its own as it is read (``ExtractionPlan/judge(_:options:archive:)``:
/// names, types, encryption, sizes), in archive order as before. What needs the whole archive is
/// kept small:
/// - the folders (listed or implied: about one per hundred files in a real tree);
/// - a hash of each file's and each folder's path, case-folded. Two equal hashes mean two paths
///   that are one (a duplicate, a file that is also a folder, or two that differ only in case), or
///   a hash collision. Then the archive is read again for the entries those paths involve, and
///   ``ExtractionPlan`` judges them, so the refusal names the same entries with the same words as
///   when it judged the whole archive (a collision alone refuses nothing);
/// - whether every entry lies under the folder to strip, and the declared sizes' sum.
struct StreamedPlan {
    let options: ZipExtractionOptions
    let archive: String
    private(set) var fileCount = 0
    private(set) var skippedEntries = 0
    private(set) var declaredBytes: Int64 = 0
    /// Whether the top-level folder is stripped; decided by ``finish(rereading:)``.
    private(set) var strips = false
    private var hashes: [Int] = []
    private var explicitFolders: Set<SafeRelativePath> = []
    private var folders = FolderSet()
    private var allStrippable = true
    private var anyKept = false

    init(options: ZipExtractionOptions, archive: String) {
        self.options = options
        self.archive = archive
    }

    private static func folded(_ path: SafeRelativePath) -> Int {
        path.string.lowercased().hashValue
    }

    /// Judges the next entry in archive order.
    mutating func add(_ entry: RawZipEntry) throws(ArchiveError) {
        let item: ExtractionPlan.Kept
        switch try ExtractionPlan.judge(entry, options: options, archive: archive) {
        case .kept(let kept): item = kept
        case .skipped:
            skippedEntries += 1
            return
        case .root: return
        }
        anyKept = true
        if let top = options.stripTopLevelFolder, allStrippable {
            allStrippable = ExtractionPlan.strippable(item, top: top)
        }
        folders.insertAncestors(of: item.path)
        if item.isFolder {
            folders.insert(item.path)
            // A folder listed twice: its second entry counts as a path of its own (the first
            // counts with the folders, at the end).
            if !explicitFolders.insert(item.path).inserted { hashes.append(Self.folded(item.path)) }
            return
        }
        declaredBytes = try ExtractionPlan.adding(
            item.entry.declaredSize, to: declaredBytes, options: options, archive: archive)
        fileCount += 1
        hashes.append(Self.folded(item.path))
    }

    /// Ends the judging. `rereading` reads the archive again and returns, in archive order, the
    /// entries the predicate wants. Returns the folders to create, parents first, as they land.
    mutating func finish(
        rereading: (_ wanted: (RawZipEntry) -> Bool) throws(ArchiveError) -> [RawZipEntry]
    ) throws(ArchiveError) -> [SafeRelativePath] {
        strips = options.stripTopLevelFolder != nil && anyKept && allStrippable
        for folder in folders.members { hashes.append(Self.folded(folder)) }
        hashes.sort()
        var shared = Set<Int>()
        for index in hashes.indices.dropFirst() where hashes[index] == hashes[index - 1] {
            shared.insert(hashes[index])
        }
        hashes = []
        if !shared.isEmpty {
            // Only the entries that can change the verdict, so a hostile archive (a path listed a
            // million times, or a folder listed twice above a million files) costs no more than a
            // few: the first two entries of each path whose hash is shared (the whole plan refuses
            // at the second), and the first entry below each such folder (which makes it one).
            // Every other path's hash is its own, so it can collide with nothing.
            var entriesOf: [SafeRelativePath: Int] = [:]
            var witnessed: Set<SafeRelativePath> = []
            let involved = try rereading { entry in
                guard let path = try? SafeRelativePath(validating: entry.name), !path.isRoot else { return false }
                var wanted = false
                if shared.contains(Self.folded(path)), entriesOf[path, default: 0] < 2 {
                    entriesOf[path, default: 0] += 1
                    wanted = true
                }
                for ancestor in path.ancestors where shared.contains(Self.folded(ancestor)) {
                    if witnessed.insert(ancestor).inserted { wanted = true }
                }
                return wanted
            }
            var exact = options
            exact.stripTopLevelFolder = strips ? options.stripTopLevelFolder : nil
            _ = try ExtractionPlan(entries: involved, options: exact, archive: archive)
        }
        if declaredBytes > options.maxTotalBytes {
            throw ExtractionPlan.tooLarge(archive: archive, options: options, declared: declaredBytes)
        }
        return folders.members.compactMap(landed).filter { !$0.isRoot }.sorted()
    }

    /// Where a kept path lands: without the stripped top-level folder when it is stripped.
    private func landed(_ path: SafeRelativePath) -> SafeRelativePath? {
        guard strips, let top = options.stripTopLevelFolder, let base = try? SafeRelativePath(validating: top) else {
            return path
        }
        return path.isWithin(base) ? path.rebased(from: base, onto: .root) : path
    }

    /// The files of `entries` (a window's, judged already) to inflate, where they land.
    func files(of entries: [RawZipEntry]) throws(ArchiveError) -> [ExtractionPlan.File] {
        var files: [ExtractionPlan.File] = []
        for entry in entries {
            guard case .kept(let item) = try ExtractionPlan.judge(entry, options: options, archive: archive),
                !item.isFolder, let path = landed(item.path)
            else { continue }
            files.append(
                ExtractionPlan.File(
                    index: entry.index, archiveName: entry.name, path: path, declaredSize: Int64(entry.declaredSize)))
        }
        return files
    }
}
