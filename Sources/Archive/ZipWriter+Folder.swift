internal import CLinux
import FileKit

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension ZipWriter {
    /// Sorts entries the way an archive lists them: by the UTF-8 bytes of their names, a
    /// folder's name ending in `/` (so `docs.md` comes before `docs/`, as `sorted()` of the
    /// names gives, and a folder still comes before what it holds). ``archive(folder:to:topLevelFolder:reusing:)``
    /// and the splice share it, so a spliced archive is the one a fresh build writes.
    static func sortByEntryName(_ items: inout [(path: SafeRelativePath, isFolder: Bool)]) {
        let keys = items.map { $0.path.string + ($0.isFolder ? "/" : "") }
        let order = keys.indices.sorted { keys[$0].utf8.lexicographicallyPrecedes(keys[$1].utf8) }
        items = order.map { items[$0] }
    }

    /// Zips the tree under `folder` into `zipPath` deterministically: paths sorted, a folder entry
    /// for every folder (so empty folders survive), all under `topLevelFolder/` when given (e.g.
    /// `"RXCacheContent"`). Symlinks and other special files are refused, not followed.
    ///
    /// With `reusing`, a file whose bytes the previous archive holds (at the same path, or at the
    /// old path of a move) with the same CRC-32 and size is copied from it still compressed, which
    /// makes publishing a version that changed little nearly as fast as hashing it. The bytes are the same as a fresh build's:
    /// only archives carrying this writer's marker (its comment, naming the zlib) are reused.
    /// Returns the number of entries copied from the previous archive.
    @discardableResult
    public static func archive(
        folder: String, to zipPath: String, topLevelFolder: String?,
        reusing: ArchiveReuse? = nil
    ) throws(ArchiveError) -> Int {
        let base: SafeRelativePath
        do {
            base = try SafeRelativePath(validating: topLevelFolder ?? "")
        } catch {
            throw ArchiveError(code: .unsafeEntryName, message: "top-level folder \(error)", underlying: error)
        }
        var tree: [(path: SafeRelativePath, isFolder: Bool)] = []
        try collect(folder: folder, relative: .root, into: &tree)
        ZipWriter.sortByEntryName(&tree)

        let previous = reusing.flatMap { PreviousArchive(path: $0.previousArchive) }
        let writer = try ZipWriter(path: zipPath)
        try writer.setComment(PreviousArchive.marker)
        var copied = 0
        for ancestor in base.ancestors + (base.isRoot ? [] : [base]) {
            try writer.addDirectory(ancestor.string)
        }
        for item in tree {
            let reused = try writer.add(
                item.path, isFolder: item.isFolder, of: folder, under: base, from: previous,
                at: reusing?.sources[item.path])
            if reused { copied += 1 }
        }
        try writer.close()
        return copied
    }

    /// Adds the folder or file `path` of `folder` as the entry `base/path`: a file whose bytes
    /// `previous` holds at `base/old` (same CRC-32 and size) is copied from it as it is; others
    /// are deflated, or stored when ``DeflateProbe`` finds deflate does not shrink them. Returns
    /// whether the entry was copied.
    func add(
        _ path: SafeRelativePath, isFolder: Bool, of folder: String, under base: SafeRelativePath,
        from previous: PreviousArchive?, at old: SafeRelativePath?
    ) throws(ArchiveError) -> Bool {
        let name = base.appending(path).string
        let source = path.absolute(in: folder)
        if isFolder {
            try addDirectory(name)
        } else if let previous, let old, let facts = PreviousArchive.crc32(ofFile: source),
            let entry = previous.reusableEntry(named: base.appending(old).string, crc: facts.crc, size: facts.size)
        {
            try addCopiedFile(name, from: previous, index: entry.index, deflated: entry.deflated)
            return true
        } else {
            try addProbedFile(name, fromPath: source)
        }
        return false
    }

    /// Lists everything under `folder/relative`, depth first, without following symlinks.
    private static func collect(
        folder: String, relative: SafeRelativePath,
        into tree: inout [(path: SafeRelativePath, isFolder: Bool)]
    ) throws(ArchiveError) {
        let directory = relative.absolute(in: folder)
        guard let stream = opendir(directory) else {
            let code = clinux_errno()
            throw ArchiveError(
                code: .cannotOpen,
                message:
                    "cannot list \(directory): \(ArchiveError.systemMessage(code)); check that the folder exists and is readable",
                errno: code)
        }
        var names: [String] = []
        while let entry = readdir(stream) {
            guard let name = String(validating: DirectoryEntryName.bytes(entry), as: UTF8.self) else {
                closedir(stream)
                throw ArchiveError(
                    code: .unsafeEntryName,
                    message: "\(directory) holds a name that is not valid UTF-8; rename it")
            }
            if name != "." && name != ".." { names.append(name) }
        }
        // Closed before going deeper: one open folder at a time, however deep the tree (a
        // stream held per level ran out of descriptors on a tree 1,800 levels deep).
        closedir(stream)
        for name in names {
            let child: SafeRelativePath
            do {
                child = relative.appending(try SafeRelativePath(validating: name))
            } catch {
                throw ArchiveError(
                    code: .unsafeEntryName,
                    message: "\(directory): \(error); rename it", underlying: error)
            }
            let childPath = child.absolute(in: folder)
            var info = stat()
            guard lstat(childPath, &info) == 0 else {
                let code = clinux_errno()
                throw ArchiveError(
                    code: .cannotOpen,
                    message: "cannot read \(childPath): \(ArchiveError.systemMessage(code))", errno: code)
            }
            switch info.st_mode & S_IFMT {
            case S_IFDIR:
                tree.append((child, true))
                try collect(folder: folder, relative: child, into: &tree)
            case S_IFREG:
                tree.append((child, false))
            default:
                throw ArchiveError(
                    code: .forbiddenEntryType,
                    message:
                        "\(childPath) is not a regular file or folder (a symlink, device, fifo or socket); replace it with a copy or remove it"
                )
            }
        }
    }
}
