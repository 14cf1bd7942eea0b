internal import CLinux
internal import CZip
import FileKit

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Writes zip archives deterministically: entries in call order, every entry dated 1980-01-01 00:00
/// (the DOS epoch), files `0644` and folders `0755`, whatever the source files' own dates and modes.
/// Archiving the same content twice gives identical bytes.
///
/// libzip writes everything at ``close()``: `addFile(_:contents:)` keeps a copy of the bytes until
/// then, and `addFile(_:fromPath:)` reads the file then, streaming it, so the file must stay in
/// place until `close()` returns. Not thread-safe; use one writer from one thread at a time.
public final class ZipWriter {
    private var handle: OpaquePointer?
    private let path: String
    private var entryCount = 0
    private var files: Set<SafeRelativePath> = []
    private var folders = FolderSet()
    /// Archives whose entries are copied: libzip reads them at `close()`.
    private var retained: [PreviousArchive] = []
    /// Made at the first file whose compression is decided by its bytes.
    private lazy var probe = DeflateProbe()

    /// The DOS date for 1980-01-01 (day 1, month 1, year 0 since 1980); the DOS time is 00:00:00.
    private static let dosDate: UInt16 = (0 << 9) | (1 << 5) | 1

    /// Creates the archive at `path`, replacing any file there when ``close()`` succeeds.
    public init(path: String) throws(ArchiveError) {
        var code: Int32 = 0
        guard let handle = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &code) else {
            var error = zip_error_t()
            zip_error_init_with_code(&error, code)
            defer { zip_error_fini(&error) }
            let systemCode = zip_error_code_system(&error)
            throw ArchiveError(
                code: .cannotOpen,
                message:
                    "cannot create archive \(path) (\(String(cString: zip_error_strerror(&error)))); check that its folder exists and is writable",
                errno: systemCode != 0 ? systemCode : nil)
        }
        self.handle = handle
        self.path = path
    }

    deinit {
        if let handle { zip_discard(handle) }
    }

    /// Adds a file holding `contents`, deflated unless `compress` is false.
    public func addFile(_ name: String, contents: [UInt8], compress: Bool = true) throws(ArchiveError) {
        let handle = try openHandle()
        let entryPath = try checkedFileName(name)
        let source = try bufferSource(handle, contents, entry: name)
        let index = try add(handle, name: entryPath.string, source: source)
        files.insert(entryPath)
        folders.insertAncestors(of: entryPath)
        try setAttributes(
            handle, index: index, name: name, opsys: UInt8(ZIP_OPSYS_UNIX),
            attributes: (UInt32(S_IFREG) | 0o644) << 16, compress: compress)
    }

    /// Adds a file read from `fromPath` at ``close()``, streaming it, deflated unless `compress` is false.
    public func addFile(_ name: String, fromPath: String, compress: Bool = true) throws(ArchiveError) {
        try addFile(name, fromPath: fromPath) { _ in compress }
    }

    /// Adds a file read from `fromPath` at ``close()``, deflated when ``DeflateProbe`` finds that
    /// worth it, else stored.
    func addProbedFile(_ name: String, fromPath: String) throws(ArchiveError) {
        try addFile(name, fromPath: fromPath) { size in probe.worthDeflating(path: fromPath, size: size) }
    }

    private func addFile(_ name: String, fromPath: String, compress: (Int64) -> Bool) throws(ArchiveError) {
        let handle = try openHandle()
        let entryPath = try checkedFileName(name)
        var info = stat()
        guard stat(fromPath, &info) == 0 else {
            let code = clinux_errno()
            // libzip reads the file by its path, which the system limits to PATH_MAX in all.
            let remedy =
                code == ENAMETOOLONG
                ? "its path is \(fromPath.utf8.count) bytes, over the system's \(PATH_MAX - 1): move the storage (its work folder holds the copy) to a shorter path, or shorten the content's deepest paths"
                : "check that it exists"
            throw ArchiveError(
                code: .cannotOpen,
                message:
                    "cannot add \(fromPath) as '\(name)' to \(path): \(ArchiveError.systemMessage(code)); \(remedy)",
                errno: code)
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw ArchiveError(
                code: .forbiddenEntryType,
                message: "cannot add \(fromPath) as '\(name)' to \(path): it is not a regular file")
        }
        let deflated = compress(Int64(info.st_size))
        guard let source = zip_source_file(handle, fromPath, 0, -1) else {
            throw ArchiveError(
                code: .cannotOpen,
                message: "cannot add \(fromPath) as '\(name)' to \(path) (\(lastError)); check that it is readable")
        }
        let index = try add(handle, name: entryPath.string, source: source)
        files.insert(entryPath)
        folders.insertAncestors(of: entryPath)
        try setAttributes(
            handle, index: index, name: name, opsys: UInt8(ZIP_OPSYS_UNIX),
            attributes: (UInt32(S_IFREG) | 0o644) << 16, compress: deflated)
    }

    /// Adds entry `index` of `previous` as file `name`, copying its bytes (deflated or stored, as
    /// `deflated` says) without inflating them (libzip's `ZIP_FL_COMPRESSED`). Only for archives
    /// this writer made with the same rules and zlib (see
    /// ``archive(folder:to:topLevelFolder:reusing:)``), so that the result is the bytes a fresh
    /// build would give.
    func addCopiedFile(_ name: String, from previous: PreviousArchive, index: UInt64, deflated: Bool)
        throws(ArchiveError)
    {
        let handle = try openHandle()
        let entryPath = try checkedFileName(name)
        guard let source = zip_source_zip(handle, previous.handle, index, zip_flags_t(ZIP_FL_COMPRESSED), 0, -1) else {
            throw writeError("copying '\(name)' from \(previous.path)")
        }
        let added = try add(handle, name: entryPath.string, source: source)
        retained.append(previous)
        files.insert(entryPath)
        folders.insertAncestors(of: entryPath)
        try setAttributes(
            handle, index: added, name: name, opsys: UInt8(ZIP_OPSYS_UNIX),
            attributes: (UInt32(S_IFREG) | 0o644) << 16, compress: deflated)
    }

    /// Sets the archive comment.
    func setComment(_ text: String) throws(ArchiveError) {
        let handle = try openHandle()
        let bytes = Array(text.utf8)
        guard zip_set_archive_comment(handle, bytes.map { CChar(bitPattern: $0) }, UInt16(bytes.count)) == 0 else {
            throw writeError("setting the archive comment")
        }
    }

    /// Adds a folder entry (stored as `name/`), so the folder exists after extraction even when empty.
    public func addDirectory(_ name: String) throws(ArchiveError) {
        let handle = try openHandle()
        let folder = try checkedName(name)
        guard !folder.isRoot else {
            throw ArchiveError(code: .unsafeEntryName, message: "\(path): a folder entry needs a non-empty name")
        }
        if folders.contains(folder) || files.contains(folder)
            || folders.fileAbove(folder, isFile: files.contains) != nil
        {
            throw duplicate(name)
        }
        let index = zip_dir_add(handle, folder.string, zip_flags_t(ZIP_FL_ENC_UTF_8))
        guard index >= 0 else { throw writeError("adding folder '\(name)'") }
        entryCount += 1
        folders.insert(folder)
        // 0x10 is the MS-DOS folder attribute, for tools that ignore the Unix mode.
        try setAttributes(
            handle, index: UInt64(index), name: name, opsys: UInt8(ZIP_OPSYS_UNIX),
            attributes: (UInt32(S_IFDIR) | 0o755) << 16 | 0x10, compress: false)
    }

    /// Adds an entry with an unchecked name and the given Unix mode (type bits included), stored
    /// uncompressed. `unixMode` nil records no Unix mode at all (MS-DOS host).
    ///
    /// For hostile test fixtures only: it lets tests make zip-slip names, symlinks and devices.
    public func addRawEntry(name: String, contents: [UInt8], unixMode: UInt32?) throws(ArchiveError) {
        let handle = try openHandle()
        let source = try bufferSource(handle, contents, entry: name)
        let index = try add(handle, name: name, source: source)
        if let unixMode {
            try setAttributes(
                handle, index: index, name: name, opsys: UInt8(ZIP_OPSYS_UNIX),
                attributes: unixMode << 16, compress: false)
        } else {
            try setAttributes(
                handle, index: index, name: name, opsys: UInt8(ZIP_OPSYS_DOS),
                attributes: 0, compress: false)
        }
    }

    /// Writes the archive. The writer cannot be used afterwards.
    public func close() throws(ArchiveError) {
        let handle = try openHandle()
        guard zip_close(handle) == 0 else {
            let error = writeError("writing the archive")
            zip_discard(handle)
            self.handle = nil
            throw error
        }
        self.handle = nil
        // libzip writes no file at all for an archive without entries; write the 22-byte
        // end-of-central-directory record that every reader accepts as an empty archive.
        if entryCount == 0 {
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw ArchiveError.io("creating empty archive \(path)", errno: clinux_errno()) }
            defer { closeDescriptor(fd) }
            let record: [UInt8] = [0x50, 0x4B, 0x05, 0x06] + [UInt8](repeating: 0, count: 18)
            if let code = record.withUnsafeBytes({ FileWriting.system.writeAll(fd, $0) }) {
                throw ArchiveError.io("writing empty archive \(path)", errno: code)
            }
        }
    }

    private func openHandle() throws(ArchiveError) -> OpaquePointer {
        guard let handle else {
            throw ArchiveError(code: .io, message: "\(path) is already closed; make a new ZipWriter")
        }
        return handle
    }

    private func checkedName(_ name: String) throws(ArchiveError) -> SafeRelativePath {
        do {
            return try SafeRelativePath(validating: name)
        } catch {
            throw ArchiveError(code: .unsafeEntryName, message: "\(path): entry \(error)", underlying: error)
        }
    }

    private func checkedFileName(_ name: String) throws(ArchiveError) -> SafeRelativePath {
        let file = try checkedName(name)
        if file.isRoot || name.utf8.last == UInt8(ascii: "/") {
            throw ArchiveError(
                code: .unsafeEntryName,
                message: "\(path): file entry '\(name)' needs a name that does not end in '/'")
        }
        if files.contains(file) || folders.contains(file) || folders.fileAbove(file, isFile: files.contains) != nil {
            throw duplicate(name)
        }
        return file
    }

    private func duplicate(_ name: String) -> ArchiveError {
        ArchiveError(
            code: .duplicateEntry,
            message: "\(path): '\(name)' collides with an entry already added; add each name once")
    }

    private func bufferSource(
        _ handle: OpaquePointer, _ contents: [UInt8],
        entry: String
    ) throws(ArchiveError) -> OpaquePointer {
        // libzip reads the bytes at close(), so it gets its own malloc'd copy and frees it (freep = 1).
        let copy = malloc(max(contents.count, 1))!
        contents.withUnsafeBytes { bytes in
            if let base = bytes.baseAddress { copy.copyMemory(from: base, byteCount: bytes.count) }
        }
        guard let source = zip_source_buffer(handle, copy, UInt64(contents.count), 1) else {
            free(copy)
            throw writeError("adding '\(entry)'")
        }
        return source
    }

    private func add(_ handle: OpaquePointer, name: String, source: OpaquePointer) throws(ArchiveError) -> UInt64 {
        let index = zip_file_add(handle, name, source, zip_flags_t(ZIP_FL_ENC_UTF_8))
        guard index >= 0 else {
            zip_source_free(source)
            if zip_error_code_zip(zip_get_error(handle)) == ZIP_ER_EXISTS { throw duplicate(name) }
            throw writeError("adding '\(name)'")
        }
        entryCount += 1
        return UInt64(index)
    }

    private func setAttributes(
        _ handle: OpaquePointer, index: UInt64, name: String, opsys: UInt8,
        attributes: UInt32, compress: Bool
    ) throws(ArchiveError) {
        let method = compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE
        guard zip_file_set_dostime(handle, index, 0, Self.dosDate, 0) == 0,
            zip_file_set_external_attributes(handle, index, 0, opsys, attributes) == 0,
            zip_set_file_compression(handle, index, method, 0) == 0
        else {
            throw writeError("setting the attributes of '\(name)'")
        }
    }

    private var lastError: String {
        handle.map { String(cString: zip_strerror($0)) } ?? "closed"
    }

    private func writeError(_ action: String) -> ArchiveError {
        guard let handle else { return ArchiveError(code: .io, message: "\(path): \(action) failed") }
        let error = zip_get_error(handle)
        let systemCode = zip_error_code_system(error)
        let text = String(cString: zip_error_strerror(error))
        return ArchiveError(
            code: .io, message: "\(path): \(action) failed (\(text)); check free space and permissions, then retry",
            errno: zip_error_system_type(error) == ZIP_ET_SYS && systemCode != 0 ? systemCode : nil)
    }
}

/// close(2), reachable from inside ``ZipWriter`` whose own `close()` shadows it.
private func closeDescriptor(_ fd: Int32) {
    close(fd)
}
