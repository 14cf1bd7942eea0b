#if canImport(Glibc)
    import Glibc
#endif

/// A file operation that failed, in the system's own words: what was being done, the system
/// call, its `errno` and the path, as NIOFS's `FileSystemError` keeps them.
///
/// ``description`` prints all of them with a remedy where one is known:
/// `cannot delete folder /srv/content/a (unlinkat: Permission denied, errno 13); check the folder's permissions`.
public struct FileSystemError: Error, Sendable, CustomStringConvertible {
    /// The kind of failure. Compare against the static members; ``errno`` keeps the exact value.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case noSpace, permissionDenied, notFound, alreadyExists, nameTooLong, changedUnderneath, io
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The filesystem is full (`ENOSPC`, `EDQUOT`).
        public static let noSpace = Code(.noSpace)
        /// The process may not do this here (`EACCES`, `EPERM`, `EROFS`).
        public static let permissionDenied = Code(.permissionDenied)
        /// A path that had to exist does not (`ENOENT`, `ENOTDIR`).
        public static let notFound = Code(.notFound)
        /// Something is already where a new entry was to go (`EEXIST`, `ENOTEMPTY`).
        public static let alreadyExists = Code(.alreadyExists)
        /// A path or name longer than the filesystem takes (`ENAMETOOLONG`).
        public static let nameTooLong = Code(.nameTooLong)
        /// A folder was moved or replaced while it was being worked in.
        public static let changedUnderneath = Code(.changedUnderneath)
        /// Any other failure of the system call; ``FileSystemError/errno`` says which.
        public static let io = Code(.io)

        /// The code for an `errno` value.
        public init(errno code: Int32) {
            switch code {
            case ENOSPC, EDQUOT: self = .noSpace
            case EACCES, EPERM, EROFS: self = .permissionDenied
            case ENOENT, ENOTDIR: self = .notFound
            case EEXIST, ENOTEMPTY: self = .alreadyExists
            case ENAMETOOLONG: self = .nameTooLong
            default: self = .io
            }
        }

        public var description: String { base.rawValue }
    }

    /// The kind of failure.
    public var code: Code
    /// What was being done, e.g. "cannot delete folder".
    public var operation: String
    /// The path the operation was about, as the caller named it.
    public var path: String
    /// The system call that failed, e.g. `unlinkat`; nil when no call failed (``Code/changedUnderneath``).
    public var syscall: String?
    /// The call's `errno`, kept exactly; nil when no call failed.
    public var errno: Int32?
    /// What the caller can do about it; nil when nothing specific helps.
    public var remedy: String?

    /// A failed system call: `operation` on `path`, with the call's name and `errno`.
    public init(_ operation: String, path: String, syscall: String, errno code: Int32) {
        self.code = Code(errno: code)
        self.operation = operation
        self.path = path
        self.syscall = syscall
        self.errno = code
        switch self.code {
        case .noSpace: remedy = "free disk space and try again"
        case .permissionDenied:
            remedy =
                code == EROFS
                ? "the filesystem is mounted read-only: remount it read-write or choose a folder on a writable one"
                : "check the folder's permissions"
        default: remedy = Self.descriptorRemedy(errno: code)
        }
    }

    /// The remedy when `code` says the process (`EMFILE`) or the system (`ENFILE`) has no
    /// descriptor left, else nil.
    public static func descriptorRemedy(errno code: Int32) -> String? {
        switch code {
        case EMFILE:
            "this process may open no more files: raise its open-file limit (`ulimit -n`, systemd's `LimitNOFILE=`) and try again"
        case ENFILE: "the system's table of open files is full: close programs or raise `fs.file-max`, and try again"
        default: nil
        }
    }

    /// "Too many open files; <remedy>" when fewer than `wanted` descriptors can be had now
    /// (``descriptorShortage(wanted:)``), else nil: what an open that a library reports without
    /// its `errno` failed of, said in place of advice that assumes a damaged file.
    public static func descriptorShortageReason(wanted: Int = 16) -> String? {
        guard let code = descriptorShortage(wanted: wanted), let remedy = descriptorRemedy(errno: code) else {
            return nil
        }
        return "\(String(cString: strerror(code))); \(remedy)"
    }

    /// Why this process cannot write the SQLite database at `path`, when that is so: its file
    /// system is mounted read-only, or this user may not write the file, its `-wal` or `-shm`
    /// file, or its folder (where SQLite makes them). Nil when none of these holds. Said in place
    /// of advice that assumes a damaged file (SQLite reports only "attempt to write a readonly
    /// database" or "unable to open database file").
    public static func databaseAccessReason(path: String) -> String? {
        let folder = path.lastIndex(of: "/").map { String(path[..<$0]) }.map { $0.isEmpty ? "/" : $0 } ?? "."
        var system = statvfs()
        if statvfs(folder, &system) == 0, system.f_flag & UInt(ST_RDONLY) != 0 {
            return
                "its file system is mounted read-only; keep the database on a writable disk, or remount that one read-write"
        }
        let user = "this user (uid \(getuid()))"
        // Denied, not missing: a folder that does not exist is another error's to name.
        func denied(_ file: String, _ mode: Int32) -> Bool { access(file, mode) != 0 && Glibc.errno == EACCES }
        for file in [path, path + "-wal", path + "-shm"] where denied(file, R_OK | W_OK) {
            return
                "\(user) may not read and write \(file); give it to this user (`chown`, `chmod u+rw`), or run as the user that owns it"
        }
        if denied(folder, W_OK | X_OK) {
            return
                "\(user) may not create files in \(folder), where SQLite keeps the database's -wal and -shm files; give the folder to this user (`chown`, `chmod u+rwx`), or run as the user that owns it"
        }
        return nil
    }

    /// `EMFILE` or `ENFILE` when fewer than `wanted` new descriptors can be had now (a probe
    /// opens `/dev/null` that many times), else nil: for a library that reports a failed open
    /// without its `errno` (SQLite's "unable to open database file", after a database, its log
    /// and its shared memory each took one).
    public static func descriptorShortage(wanted: Int = 16) -> Int32? {
        var opened: [Int32] = []
        defer { for descriptor in opened { close(descriptor) } }
        while opened.count < wanted {
            let probe = open("/dev/null", O_RDONLY | O_CLOEXEC)
            guard probe >= 0 else {
                let code = Glibc.errno
                return code == EMFILE || code == ENFILE ? code : nil
            }
            opened.append(probe)
        }
        return nil
    }

    /// A failure no single system call reports (a folder swapped mid-walk, say).
    public init(code: Code, operation: String, path: String, remedy: String? = nil) {
        self.code = code
        self.operation = operation
        self.path = path
        self.syscall = nil
        self.errno = nil
        self.remedy = remedy
    }

    /// `operation path (syscall: reason, errno N); remedy`.
    public var description: String {
        var text = "\(operation) \(path)"
        if let syscall, let errno {
            text += " (\(syscall): \(String(cString: strerror(errno))), errno \(errno))"
        }
        if let remedy { text += "; \(remedy)" }
        return text
    }
}
