import FileKit

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What an extraction will write, decided from the central directory alone before any byte is
/// written. Every rule that can refuse an archive by its names, types or declared sizes lives
/// here, so it is tested without I/O.
struct ExtractionPlan: Equatable {
    /// A regular file to inflate.
    struct File: Equatable {
        var index: UInt64
        /// The name in the archive, for messages.
        var archiveName: String
        /// Where it goes, relative to the destination (after stripping).
        var path: SafeRelativePath
        var declaredSize: Int64
    }

    /// Files in archive order.
    var files: [File]
    /// Every folder to create, listed or implied by a file's parents, parents before children.
    var folders: [SafeRelativePath]
    /// Entries under a skipped top-level folder.
    var skippedEntries: Int
    /// The sum of the files' declared sizes.
    var declaredBytes: Int64

    struct Kept {
        var entry: RawZipEntry
        var path: SafeRelativePath
        var isFolder: Bool
    }

    /// What becomes of one entry: kept (a file or folder to extract), skipped (under a skipped
    /// top-level folder, or the root folder itself), or refused, by the rules every entry is held to
    /// on its own. `archive` is only for messages.
    enum Verdict {
        case kept(Kept)
        case skipped
        case root
    }

    static func judge(_ entry: RawZipEntry, options: ZipExtractionOptions, archive: String) throws(ArchiveError)
        -> Verdict
    {
        let path: SafeRelativePath
        do {
            path = try SafeRelativePath(validating: entry.name)
        } catch {
            throw ArchiveError(
                code: .unsafeEntryName,
                message: "\(archive): entry \(error); refusing the whole archive", underlying: error)
        }
        let fileType = (entry.unixMode ?? 0) & UInt32(S_IFMT)
        let isFolder =
            entry.name.utf8.last == UInt8(ascii: "/") || fileType == UInt32(S_IFDIR) || entry.hasDOSFolderAttribute
        if path.isRoot {
            if isFolder { return .root }
            throw ArchiveError(
                code: .unsafeEntryName,
                message: "\(archive): entry #\(entry.index) has an empty name; refusing the whole archive")
        }
        if let top = path.components.first, options.skippedTopLevelFolders.contains(top) {
            return .skipped
        }
        if fileType != 0 && fileType != UInt32(S_IFREG) && fileType != UInt32(S_IFDIR) {
            throw ArchiveError(
                code: .forbiddenEntryType,
                message:
                    "\(archive): entry '\(entry.name)' is a \(Self.typeName(fileType)); only files and folders are allowed, refusing the archive"
            )
        }
        if entry.isEncrypted {
            throw ArchiveError(
                code: .encryptedEntry,
                message: "\(archive): entry '\(entry.name)' is encrypted; publish an unencrypted archive")
        }
        if isFolder && entry.declaredSize > 0 {
            throw ArchiveError(
                code: .corrupt,
                message:
                    "\(archive): folder entry '\(entry.name)' declares \(entry.declaredSize) bytes of data; download the archive again"
            )
        }
        return .kept(Kept(entry: entry, path: path, isFolder: isFolder))
    }

    /// Whether a kept entry lies under `top` as stripping it needs (a folder, or a file below it).
    static func strippable(_ item: Kept, top: String) -> Bool {
        item.path.components.first == top && (item.isFolder || item.path.components.count > 1)
    }

    /// Checks `entries` against `options` and decides the layout. `archive` is only for messages.
    init(entries: [RawZipEntry], options: ZipExtractionOptions, archive: String) throws(ArchiveError) {
        if entries.count > options.maxEntries {
            throw ArchiveError.tooManyEntries(archive, count: entries.count, options: options)
        }
        var kept: [Kept] = []
        var skipped = 0
        for entry in entries {
            switch try Self.judge(entry, options: options, archive: archive) {
            case .kept(let item): kept.append(item)
            case .skipped: skipped += 1
            case .root: continue
            }
        }

        if let top = options.stripTopLevelFolder, !kept.isEmpty, kept.allSatisfy({ Self.strippable($0, top: top) }) {
            let base = kept[0].path.ancestors.first ?? kept[0].path
            kept = kept.compactMap { item in
                var item = item
                item.path = item.path.rebased(from: base, onto: .root)
                return item.path.isRoot ? nil : item
            }
        }

        var seen: [SafeRelativePath: String] = [:]
        var folders = FolderSet()
        var files: [File] = []
        var declared: Int64 = 0
        for item in kept {
            if let earlier = seen[item.path] {
                throw ArchiveError(
                    code: .duplicateEntry,
                    message:
                        "\(archive): entries '\(earlier)' and '\(item.entry.name)' both extract to '\(item.path)'; refusing the archive"
                )
            }
            seen[item.path] = item.entry.name
            folders.insertAncestors(of: item.path)
            if item.isFolder {
                folders.insert(item.path)
                continue
            }
            declared = try Self.adding(item.entry.declaredSize, to: declared, options: options, archive: archive)
            files.append(
                File(
                    index: item.entry.index, archiveName: item.entry.name, path: item.path,
                    declaredSize: Int64(item.entry.declaredSize)))
        }
        for file in files where folders.contains(file.path) {
            throw ArchiveError(
                code: .duplicateEntry,
                message:
                    "\(archive): '\(file.path)' is both a file (entry '\(file.archiveName)') and a folder; refusing the archive"
            )
        }
        if let (first, second) = SafeRelativePath.caseCollision(in: Array(folders.members) + files.map(\.path)) {
            throw ArchiveError(
                code: .duplicateEntry,
                message:
                    "\(archive): '\(first)' and '\(second)' differ only in case, so they would be one path on case-insensitive file systems; refusing the archive (the publisher must rename one)"
            )
        }
        if declared > options.maxTotalBytes {
            throw Self.tooLarge(archive: archive, options: options, declared: declared)
        }

        self.files = files
        self.folders = folders.members.sorted()
        self.skippedEntries = skipped
        self.declaredBytes = declared
    }

    /// `sum` plus a file's declared `size`; refused when it no longer fits in 64 bits.
    static func adding(_ size: UInt64, to sum: Int64, options: ZipExtractionOptions, archive: String)
        throws(ArchiveError) -> Int64
    {
        guard size <= UInt64(Int64.max), case (let total, false) = sum.addingReportingOverflow(Int64(size)) else {
            throw tooLarge(archive: archive, options: options, declared: nil)
        }
        return total
    }

    static func tooLarge(archive: String, options: ZipExtractionOptions, declared: Int64?) -> ArchiveError {
        let amount = declared.map { "\($0) bytes" } ?? "more bytes than fit in 64 bits"
        return ArchiveError(
            code: .sizeLimitExceeded,
            message:
                "\(archive) declares \(amount) of files, more than the limit of \(options.maxTotalBytes); refusing the archive (raise maxTotalBytes if it is genuine)"
        )
    }

    private static func typeName(_ fileType: UInt32) -> String {
        switch fileType {
        case UInt32(S_IFLNK): "symbolic link"
        case UInt32(S_IFCHR): "character device"
        case UInt32(S_IFBLK): "block device"
        case UInt32(S_IFIFO): "fifo"
        case UInt32(S_IFSOCK): "socket"
        default: "file of unknown type 0o\(String(fileType, radix: 8))"
        }
    }
}
