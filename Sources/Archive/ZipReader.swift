internal import CZip

/// One entry of an archive as its central directory describes it, before any checks.
struct RawZipEntry: Sendable, Equatable {
    /// Index in the archive, for `zip_fopen_index`.
    var index: UInt64
    /// The name as libzip decodes it (UTF-8, or CP437 converted to UTF-8).
    var name: String
    /// The inflated size the header declares.
    var declaredSize: UInt64
    /// True when the entry needs a password.
    var isEncrypted: Bool
    /// The Unix `st_mode` from the external attributes, when the creator was a Unix system.
    var unixMode: UInt32?
    /// True when the MS-DOS attributes mark a folder.
    var hasDOSFolderAttribute: Bool
}

/// A read-only libzip handle on a whole archive or on one window of its central directory
/// (``CentralDirectoryWindows``). Not thread-safe (nor is `zip_t`): each worker opens its own.
final class ZipReader {
    private let handle: OpaquePointer
    /// The archive's path, for messages.
    let path: String
    /// The index in the whole archive of this handle's first entry (0 unless a window).
    let firstIndex: UInt64

    /// Opens `path` read-only; a missing file is `cannotOpen`, a damaged one `corrupt`.
    init(path: String) throws(ArchiveError) {
        var code: Int32 = 0
        guard let handle = zip_open(path, ZIP_RDONLY, &code) else {
            throw Self.openError(path: path, zipCode: code)
        }
        self.handle = handle
        self.path = path
        self.firstIndex = 0
    }

    /// Opens one window of the archive at `path`, whose first entry is the archive's
    /// `firstIndex`; with `checkConsistency`, under libzip's stricter checks, which
    /// ``checkConsistency(path:)`` runs on a whole archive.
    init(window: WindowSource, path: String, firstIndex: UInt64, checkConsistency: Bool = false) throws(ArchiveError) {
        guard let source = window.makeSource() else {
            throw ArchiveError(code: .io, message: "cannot read archive \(path) (out of memory); retry")
        }
        var error = zip_error_t()
        zip_error_init(&error)
        defer { zip_error_fini(&error) }
        let flags = ZIP_RDONLY | (checkConsistency ? ZIP_CHECKCONS : 0)
        guard let handle = zip_open_from_source(source, flags, &error) else {
            zip_source_free(source)
            let code = zip_error_code_zip(&error)
            if checkConsistency, code == ZIP_ER_INCONS || code == ZIP_ER_EXISTS { throw Self.inconsistent(path) }
            throw Self.openError(path: path, zipCode: code)
        }
        self.handle = handle
        self.path = path
        self.firstIndex = firstIndex
    }

    deinit {
        zip_discard(handle)
    }

    /// Opens `path` with libzip's stricter checks (every local header agrees with the central
    /// directory, entries do not overlap) and closes it again. Run after the names passed
    /// ``ExtractionPlan``, whose messages are more precise for duplicate names.
    static func checkConsistency(path: String) throws(ArchiveError) {
        var code: Int32 = 0
        guard let handle = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &code) else {
            if code == ZIP_ER_INCONS || code == ZIP_ER_EXISTS { throw inconsistent(path) }
            throw openError(path: path, zipCode: code)
        }
        zip_discard(handle)
    }

    private static func inconsistent(_ path: String) -> ArchiveError {
        ArchiveError(
            code: .corrupt,
            message:
                "\(path) is inconsistent: its entries overlap, or their local headers disagree with the central directory; refusing the archive. Download it again, or rebuild it with a standard zip tool"
        )
    }

    /// The number of entries in the central directory.
    var entryCount: Int {
        Int(zip_get_num_entries(handle, 0))
    }

    /// Reads the central-directory record of this handle's entry `local` (its index in the whole
    /// archive is `firstIndex + local`, which messages and the result carry).
    func entry(at local: UInt64) throws(ArchiveError) -> RawZipEntry {
        let index = firstIndex + local
        var stat = zip_stat_t()
        zip_stat_init(&stat)
        guard zip_stat_index(handle, local, 0, &stat) == 0, let cName = stat.name else {
            throw ArchiveError(
                code: .corrupt,
                message: "\(path): entry #\(index) cannot be read (\(lastError)); download the archive again")
        }
        // The raw bytes must be UTF-8: guessing CP437, as libzip would, gives names that the
        // storage's change lists and manifest do not use.
        guard let rawName = zip_get_name(handle, local, zip_flags_t(ZIP_FL_ENC_RAW)) else {
            throw ArchiveError(
                code: .corrupt,
                message: "\(path): entry #\(index) has an unreadable name (\(lastError)); download the archive again")
        }
        guard String(validatingCString: rawName) != nil else {
            throw ArchiveError(
                code: .unsafeEntryName,
                message:
                    "\(path): entry #\(index) has a name that is not UTF-8 ('\(String(cString: cName))' if read as CP437); refusing the whole archive. Publish it with UTF-8 names"
            )
        }
        let name = String(cString: cName)
        var opsys: UInt8 = 0
        var attributes: UInt32 = 0
        guard zip_file_get_external_attributes(handle, local, 0, &opsys, &attributes) == 0 else {
            throw ArchiveError(
                code: .corrupt,
                message: "\(path): entry '\(name)' has unreadable attributes (\(lastError)); download the archive again"
            )
        }
        let carriesUnixMode = UInt32(opsys) == ZIP_OPSYS_UNIX || UInt32(opsys) == ZIP_OPSYS_OS_X
        let unixMode = carriesUnixMode && attributes >> 16 != 0 ? attributes >> 16 : nil
        let encrypted =
            stat.valid & UInt64(ZIP_STAT_ENCRYPTION_METHOD) != 0 && stat.encryption_method != UInt16(ZIP_EM_NONE)
        return RawZipEntry(
            index: index, name: name, declaredSize: stat.size, isEncrypted: encrypted,
            unixMode: unixMode, hasDOSFolderAttribute: attributes & 0x10 != 0)
    }

    /// Every entry of this handle, in order.
    func entries() throws(ArchiveError) -> [RawZipEntry] {
        var entries: [RawZipEntry] = []
        entries.reserveCapacity(entryCount)
        for local in 0..<UInt64(entryCount) { entries.append(try entry(at: local)) }
        return entries
    }

    /// Opens the archive's entry `index` (this handle's `index - firstIndex`) for inflating.
    /// `name` is only for messages.
    func open(index: UInt64, name: String) throws(ArchiveError) -> ZipEntryStream {
        precondition(index >= firstIndex, "entry \(index) is before this window")
        guard let file = zip_fopen_index(handle, index - firstIndex, 0) else {
            let error = zip_get_error(handle)
            throw Self.readError(
                path: path, entry: name, zipCode: zip_error_code_zip(error),
                systemCode: zip_error_code_system(error), text: String(cString: zip_error_strerror(error)))
        }
        return ZipEntryStream(file: file, archivePath: path, entryName: name)
    }

    private var lastError: String { String(cString: zip_strerror(handle)) }

    static func openError(path: String, zipCode: Int32) -> ArchiveError {
        var error = zip_error_t()
        zip_error_init_with_code(&error, zipCode)
        defer { zip_error_fini(&error) }
        let text = String(cString: zip_error_strerror(&error))
        switch zipCode {
        case ZIP_ER_NOZIP, ZIP_ER_INCONS:
            return ArchiveError(
                code: .corrupt, message: "\(path) is not a readable zip archive (\(text)); download it again")
        default:
            let systemCode = zip_error_code_system(&error)
            return ArchiveError(
                code: .cannotOpen,
                message: "cannot open archive \(path) (\(text)); check that it exists and is readable",
                errno: systemCode != 0 ? systemCode : nil)
        }
    }

    /// Maps a libzip read error: damaged data (CRC, zlib, sizes) is `corrupt`, a failed read `io`.
    static func readError(path: String, entry: String, zipCode: Int32, systemCode: Int32, text: String) -> ArchiveError
    {
        switch zipCode {
        case ZIP_ER_NOPASSWD, ZIP_ER_WRONGPASSWD, ZIP_ER_ENCRNOTSUPP:
            return ArchiveError(
                code: .encryptedEntry,
                message: "\(path): entry '\(entry)' is encrypted; publish an unencrypted archive")
        case ZIP_ER_COMPNOTSUPP:
            return ArchiveError(
                code: .corrupt,
                message:
                    "\(path): entry '\(entry)' uses a compression method libzip cannot read; publish the archive with deflate"
            )
        case ZIP_ER_READ, ZIP_ER_SEEK, ZIP_ER_OPEN, ZIP_ER_TELL, ZIP_ER_MEMORY:
            return ArchiveError(
                code: .io, message: "\(path): reading entry '\(entry)' failed (\(text)); check the disk and retry",
                errno: systemCode != 0 ? systemCode : nil)
        default:
            return ArchiveError(
                code: .corrupt,
                message: "\(path): entry '\(entry)' is damaged (\(text)); download the archive again")
        }
    }
}

/// One entry being inflated. Closed on deinit.
final class ZipEntryStream {
    private let file: OpaquePointer
    private let archivePath: String
    private let entryName: String

    init(file: OpaquePointer, archivePath: String, entryName: String) {
        self.file = file
        self.archivePath = archivePath
        self.entryName = entryName
    }

    deinit {
        zip_fclose(file)
    }

    /// Inflates up to `buffer.count` bytes; 0 at the end. libzip checks the CRC when the data
    /// runs out, so a mismatch surfaces here as `corrupt`.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(ArchiveError) -> Int {
        let count = zip_fread(file, buffer.baseAddress!, UInt64(buffer.count))
        if count < 0 {
            let error = zip_file_get_error(file)
            throw ZipReader.readError(
                path: archivePath, entry: entryName, zipCode: zip_error_code_zip(error),
                systemCode: zip_error_code_system(error),
                text: String(cString: zip_error_strerror(error)))
        }
        return Int(count)
    }
}
