import CLinux
import Foundation
import Synchronization
import ThreadKit

#if canImport(Glibc)
    import Glibc
#endif

/// Flushing to the disk with the disk's answer checked: `syncfs` of a filesystem and `fsync` of
/// a folder.
///
/// A flush that fails means written data may not be on the disk (a write error the kernel saw
/// during writeback, a full thin-provisioned volume, a vanished network mount). Callers that make
/// a version current after a flush must stop there: a version recorded as switched must be one
/// the disk said it holds.
public enum DiskFlush {
    /// The flushing system call.
    public enum Operation: String, Sendable {
        case syncfs, fsync
    }

    /// Flushes the whole filesystem that holds the folder `path` (`syncfs(2)`): one call per
    /// version instead of an fsync per file.
    public static func filesystem(holding path: String) throws(FileSystemError) {
        try flush(path, .syncfs, "cannot flush to the disk the filesystem holding") { clinux_syncfs($0) }
    }

    /// fsyncs the folder `path`, so that entries created, renamed or removed in it survive a
    /// power loss.
    public static func folder(_ path: String) throws(FileSystemError) {
        try flush(path, .fsync, "cannot flush to the disk the folder") { fsync($0) }
    }

    /// Flushes what a small change wrote, `paths` (files and folders on the filesystem holding
    /// `folder`), the cheaper of two ways, and returns the one taken:
    /// - `syncfs` of the filesystem when the system holds little dirty data (`Dirty` plus
    ///   `Writeback` in `/proc/meminfo` at most ``quietDirtyLimit``): one pass and one device
    ///   flush for everything, where an fsync per path pays a flush each (on ext4 without a
    ///   journal, 100 files in 100 folders: 2–4 ms against 16–23 ms);
    /// - else an fsync per path (``entries(_:)``), which waits for no other program's writes.
    ///
    /// What little dirty data there is may be other programs': `syncfs` then writes it too, at
    /// most ``quietDirtyLimit`` (plus what they add meanwhile). When the figures cannot be read,
    /// each path is flushed.
    @discardableResult
    public static func written(_ paths: [String], holding folder: String) throws(FileSystemError) -> Operation {
        let dirty = faults.dirtyBytes(at: folder) ?? SystemMemory.dirtyBytes()
        let operation = way(toFlush: paths.count, dirtyBytes: dirty)
        switch operation {
        case .syncfs: try filesystem(holding: folder)
        case .fsync: try entries(paths)
        }
        return operation
    }

    /// The system's dirty data up to which ``written(_:holding:)`` flushes with one `syncfs`.
    public static let quietDirtyLimit: Int64 = 8 << 20

    /// How ``written(_:holding:)`` flushes `count` paths while the system holds `dirtyBytes` of
    /// dirty data (nil: unknown).
    static func way(toFlush count: Int, dirtyBytes: Int64?) -> Operation {
        guard count > 1, let dirtyBytes, dirtyBytes <= quietDirtyLimit else { return .fsync }
        return .syncfs
    }

    /// fsyncs each of `paths` (files and folders, never following a symlink): what a small change
    /// wrote, flushed on its own instead of every dirty page of the filesystem (`syncfs` waits for
    /// other programs' writes too).
    /// A path that is not there has nothing to flush.
    ///
    /// Up to ``concurrentFlushes`` run at once: a journaling filesystem (ext4's jbd2, XFS) commits
    /// the fsyncs that wait together in one journal write, where one after the other each waits
    /// for a commit of its own. The first failure is thrown, once every flush has returned.
    public static func entries(_ paths: some Sequence<String>) throws(FileSystemError) {
        let paths = Array(paths)
        let shared = SharedFlush(paths)
        // Threads of their own (this runs on a blocking-work thread already, and a pool's
        // threads may all be waiting on it); the calling thread flushes too.
        // A helper that cannot be made (a task limit) leaves its share to the others.
        let done = DispatchSemaphore(value: 0)
        var helpers = 0
        for _ in 0..<max(0, min(concurrentFlushes, paths.count) - 1) {
            do {
                try DetachedThread.start(name: "cs.flush") {
                    shared.work()
                    done.signal()
                }
                helpers += 1
            } catch { continue }
        }
        shared.work()
        for _ in 0..<helpers { done.wait() }
        if let error = shared.failure.withLock({ $0 }) { throw error }
    }

    /// The paths ``entries(_:)`` flushes, taken one at a time by its threads, and the first failure.
    private final class SharedFlush: Sendable {
        let paths: [String]
        let next = Atomic<Int>(0)
        let failure = Mutex<FileSystemError?>(nil)

        init(_ paths: [String]) { self.paths = paths }

        func work() {
            while true {
                let index = next.add(1, ordering: .relaxed).oldValue
                guard index < paths.count, failure.withLock({ $0 == nil }) else { return }
                do {
                    try DiskFlush.flush(
                        paths[index], .fsync, "cannot flush to the disk", flags: O_RDONLY | O_NOFOLLOW | O_CLOEXEC,
                        missingIsFine: true
                    ) { fsync($0) }
                } catch {
                    failure.withLock { $0 = $0 ?? error }
                }
            }
        }
    }

    /// How many fsyncs ``entries(_:)`` runs at once.
    public static let concurrentFlushes = 8

    /// What the tests inject in place of the disk's answer.
    package static let faults = DiskFaults()

    fileprivate static func flush(
        _ path: String, _ operation: Operation, _ what: String, flags: Int32 = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
        missingIsFine: Bool = false, _ call: (Int32) -> Int32
    ) throws(FileSystemError) {
        if let code = faults.errno(for: operation, at: path) {
            throw failure(what, path, operation.rawValue, code)
        }
        // Opened below its folders as a deep path must be (``LongPath``): a mirror's paths may
        // be longer than `PATH_MAX`, and a busy system flushes them one by one.
        let opened: (descriptor: Int32, code: Int32)
        do {
            opened = try LongPath.at(path) { folder, rest throws(FileSystemError) in
                let descriptor = openat(folder, rest, flags)
                return (descriptor, descriptor >= 0 ? 0 : errno)
            }
        } catch {
            // A folder on the way could not be opened: the flush's failure, as a failed open is.
            let code = error.errno ?? EIO
            if missingIsFine && code == ENOENT { return }
            throw failure(what, path, "openat", code)
        }
        let descriptor = opened.descriptor
        guard descriptor >= 0 else {
            if missingIsFine && opened.code == ENOENT { return }
            throw failure(what, path, "open", opened.code)
        }
        defer { close(descriptor) }
        if call(descriptor) != 0 { throw failure(what, path, operation.rawValue, errno) }
    }

    private static func failure(_ what: String, _ path: String, _ syscall: String, _ code: Int32)
        -> FileSystemError
    {
        var error = FileSystemError(what, path: path, syscall: syscall, errno: code)
        if error.remedy == nil {
            error.remedy = "the disk did not confirm the write: check it (`dmesg`, free space, the mount) and try again"
        }
        return error
    }
}

/// Flush failures injected by tests, each for one folder (and, if asked, the paths under it), so
/// that tests running in parallel in one process do not see each other's faults; and the dirty
/// data ``DiskFlush/written(_:holding:)`` sees for a folder, so a test picks its way of flushing.
package final class DiskFaults: Sendable {
    private struct Fault {
        var operation: DiskFlush.Operation
        var folder: String
        var below: Bool
        var errno: Int32
    }

    private let faults = Mutex<[Fault]>([])
    private let dirty = Mutex<[String: Int64]>([:])

    /// From now on, ``DiskFlush/written(_:holding:)`` sees `bytes` of dirty data for `folder` and
    /// the folders under it.
    package func pretendDirty(_ bytes: Int64, at folder: String) {
        dirty.withLock { $0[folder] = bytes }
    }

    /// `path` with a held folder's descriptor name (`/proc/self/fd/N/./…`, ``HeldFolder``)
    /// written as the folder's path, so that faults injected at a path meet work done through
    /// the held folder.
    private static func resolved(_ path: String) -> String {
        guard path.hasPrefix("/proc/self/fd/") else { return path }
        let components = path.split(separator: "/", omittingEmptySubsequences: true)
        guard components.count >= 4, let real = realpath("/proc/self/fd/" + components[3], nil) else { return path }
        defer { free(real) }
        return ([String(cString: real)] + components.dropFirst(4).filter { $0 != "." }.map(String.init))
            .joined(separator: "/")
    }

    /// The dirty data pretended for `path` (the nearest folder at or above it), if any.
    package func dirtyBytes(at path: String) -> Int64? {
        dirty.withLock { table in
            guard !table.isEmpty else { return nil }
            let path = Self.resolved(path)
            return table.filter { path == $0.key || path.hasPrefix($0.key + "/") }.max { $0.key.count < $1.key.count }?
                .value
        }
    }

    package init() {}

    /// From now on, `operation` on `folder` fails with `code`, and with `below` on any path under
    /// it too.
    package func inject(_ operation: DiskFlush.Operation, at folder: String, below: Bool = true, errno code: Int32) {
        faults.withLock { $0.append(Fault(operation: operation, folder: folder, below: below, errno: code)) }
    }

    /// Removes every fault injected at `folder` or under it, and the dirty data pretended there.
    package func clear(under folder: String) {
        faults.withLock { $0.removeAll { $0.folder == folder || $0.folder.hasPrefix(folder + "/") } }
        dirty.withLock { table in table = table.filter { $0.key != folder && !$0.key.hasPrefix(folder + "/") } }
    }

    /// The injected `errno` for `operation` on `path`, if any.
    package func errno(for operation: DiskFlush.Operation, at path: String) -> Int32? {
        faults.withLock { list in
            guard !list.isEmpty else { return nil }
            let path = Self.resolved(path)
            return list.last { fault in
                fault.operation == operation
                    && (path == fault.folder || (fault.below && path.hasPrefix(fault.folder + "/")))
            }?.errno
        }
    }
}
