import CLinux
import ContentSync
import FileKit
import Foundation
import Synchronization

/// Says that a `watch` keeps a content folder in step, for as long as it runs: a listening Unix
/// socket in the abstract namespace, named by the user and the folder's canonical path. Nothing
/// is written on disk, and the kernel lets go of the name when the process ends, however it ends.
///
/// The update lock is held only while an update runs, so between a watcher's checks another run
/// with *another* state database could take the folder over (an outside audit: a second
/// `watch --force` restored another storage into it, and the first went on saying "up to date"
/// about a tree that was no longer there). With a keeper:
/// - a second watcher of the folder is refused when it starts, whatever its state database;
/// - `sync`, `verify` and `reset` beside a watcher go ahead only with the watcher's own state
///   database (``refuseIfKeptByAnother(directory:statePath:)``).
///
/// The name is per network namespace: two containers that share a volume but not a network
/// namespace do not see each other's keepers. A name held by another user is not a keeper of
/// ours (another user cannot update our folder anyway: its staging folder is refused).
public final class FolderKeeper: Sendable {
    /// The listening socket; -1 once released (or when another user held the name).
    private let descriptor: Mutex<Int32>

    /// Who keeps a folder, as seen from another process.
    enum Holder: Equatable {
        /// Nobody of this user.
        case none
        /// A process of this user; its PID when the kernel says.
        case process(pid_t?)
    }

    /// Keeps `directory` until the value goes; throws naming the process that keeps it already.
    public init(directory: String) throws(SyncError) {
        let socket = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socket >= 0 else {
            throw SyncError(
                FileSystemError(
                    "cannot make the folder's keeper socket for", path: directory, syscall: "socket", errno: errno))
        }
        let bound = Self.withAddress(of: directory) { address, length in
            bind(socket, address, length) == 0 && listen(socket, 64) == 0
        }
        guard bound else {
            let code = errno
            close(socket)
            if code == EADDRINUSE, case .process(let pid) = Self.holder(of: directory) {
                throw Self.kept(directory, by: pid, message: "another sync-agent watch keeps it in step")
            }
            if code == EADDRINUSE { // another user's name: not a keeper of ours; go on without one
                descriptor = Mutex(-1)
                return
            }
            throw SyncError(
                FileSystemError(
                    "cannot take the folder's keeper socket for", path: directory, syscall: "bind", errno: code))
        }
        descriptor = Mutex(socket)
    }

    deinit { release() }

    /// Lets go of the folder now (a watcher that ended; its replacement may keep it next).
    public func release() {
        descriptor.withLock { socket in
            if socket >= 0 { close(socket) }
            socket = -1
        }
    }

    /// For `sync`, `verify` and `reset`: refuses when a watcher keeps `directory` with another
    /// state database than `statePath` (one whose watch lock it does not hold). Beside the
    /// watcher of its own state database, a run goes ahead: the update lock keeps the two apart.
    public static func refuseIfKeptByAnother(directory: String, statePath: String) throws(SyncError) {
        guard case .process(let pid) = holder(of: directory) else { return }
        if StorageWatcher.watchLockIsHeld(statePath: statePath) { return }
        throw kept(
            directory, by: pid,
            message:
                "a sync-agent watch keeps it in step with another state database than \(statePath), and this run would take it over"
        )
    }

    /// Who keeps `directory` now.
    static func holder(of directory: String) -> Holder {
        let socket = Glibc.socket(
            AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard socket >= 0 else { return .none }
        defer { close(socket) }
        let connected = withAddress(of: directory) { address, length in connect(socket, address, length) == 0 }
        guard connected || errno == EAGAIN || errno == EINPROGRESS else { return .none }
        guard connected else { return .process(nil) } // its backlog is full: it is there
        var pid: Int32 = 0
        var uid: UInt32 = 0
        guard clinux_peer_credentials(socket, &pid, &uid) == 0 else { return .process(nil) }
        return uid == geteuid() ? .process(pid) : .none
    }

    private static func kept(_ directory: String, by pid: pid_t?, message: String) -> SyncError {
        let who = pid.map { "process \($0)" } ?? "another process"
        var error = SyncError(
            code: .configuration,
            message:
                "\(directory) is kept by \(who): \(message); stop that watch first, or give each storage its own dir")
        error.setting = .contentDirectory
        return error
    }

    /// The socket address for `directory`: `\0content-sync-keeper/<uid>/<SHA-256 of its canonical path>`.
    private static func withAddress<T>(
        of directory: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> T
    ) -> T {
        let canonical = FileSystem.canonicalPath(FileSystem.absolutePath(directory))
        let name = Array("content-sync-keeper/\(geteuid())/\(FileDigest.sha256(Array(canonical.utf8)))".utf8)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        withUnsafeMutableBytes(of: &address.sun_path) { path in
            path[0] = 0 // the abstract namespace
            for (offset, byte) in name.prefix(capacity - 1).enumerated() { path[offset + 1] = byte }
        }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + 1 + min(name.count, capacity - 1))
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
        }
    }
}
