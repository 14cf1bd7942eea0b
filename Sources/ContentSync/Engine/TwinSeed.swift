import FileKit
import Foundation
import StorageFormat
import ThreadKit

#if canImport(Glibc)
    import Glibc
#endif

/// The twin a restore leaves: a hard-link copy of the restored tree, made in the staging area's
/// `seed/` while the streamed tree check reads `next/` (``Stager/streamTreeCheck(expectedDigest:seedingTwin:)``),
/// so that the first replay after a restore catches a twin up, as every later one does, instead
/// of linking the whole tree again (``TwinState``).
///
/// Each file is linked once the check has hashed it, and the link must be the very file the
/// check read (its device, inode, size and modification time): a file replaced in `next/`
/// between the hash and the link gives no seed. So does anything that fails (a filesystem
/// without hard links, a full disk): the seed only ever saves work, and the restore goes on
/// without it. Nor does it take the disk's last space: before each folder it makes, the
/// filesystem must keep ``reserve`` bytes and 1 % of its inodes free, or the seed stops. A seed
/// that stops is removed at once, before the switch needs the space it held. Folders are made as
/// the walk first needs them, and each one's `ctime` is taken
/// when the walk leaves it, once everything below it is linked: the times the twin is recorded
/// with, as a replay's switch records them.
///
/// It holds the made folders and their times (one entry a folder, none a file). Used from one
/// thread at a time: the walk's, or its own (``TwinSeedThread``).
final class TwinSeed {
    /// The tree it links from (`next/`) and the folder it builds (`seed/`).
    let source: String
    let target: String
    /// Whether every entry so far was linked and found to be the file the check read.
    private(set) var isComplete = true
    /// The seed's folders (the root not included) and their `ctime`s, as the walk left them.
    private(set) var folderTimes: [SafeRelativePath: Int64] = [:]
    private var made: Set<SafeRelativePath> = [.root]
    private var sources = FolderHandles()
    private var targets = FolderHandles()
    /// Free bytes the filesystem must keep (nil: ``defaultReserve(capacity:)``).
    private let reserve: UInt64?

    /// A seed of `source` built at `target`, which is emptied first; nil when it cannot be made
    /// or the filesystem has no room to spare (`reserve`: the free bytes it must keep, by
    /// default ``defaultReserve(capacity:)``).
    init?(from source: String, into target: String, reserve: UInt64? = nil) {
        self.source = source
        self.target = target
        self.reserve = reserve
        do {
            try FileSystem.removeTree(target)
            guard Self.hasRoom(at: (target as NSString).deletingLastPathComponent, reserve: reserve) else { return nil }
            try FileSystem.makeFolder(target)
        } catch {
            return nil
        }
    }

    /// The free space a seed leaves by default: 64 MiB, or 1 % of a larger filesystem.
    static func defaultReserve(capacity: UInt64) -> UInt64 {
        max(64 << 20, capacity / 100)
    }

    /// Whether the filesystem holding `path` has more than `reserve` bytes free (nil: the
    /// default) and 1 % of its inodes (where it counts them).
    static func hasRoom(at path: String, reserve: UInt64?) -> Bool {
        guard let space = FilesystemSpace(holding: path) else { return false }
        let needed = reserve ?? defaultReserve(capacity: space.capacity)
        return space.available > needed && (space.inodes == 0 || space.availableInodes > space.inodes / 100)
    }

    /// Takes one entry of the streamed check: links a file, or records a folder's time.
    func add(_ entry: TreeDigest.StreamedEntry) {
        guard isComplete else { return }
        switch entry {
        case .file(let path, _, let identity):
            // Without an identity the file was written while it was read: not one to keep.
            guard let identity, makeFolder(path.parent) else { return abandon() }
            let (sourceFolder, sourceName) = sources.resolve(path.absolute(in: source))
            let (targetFolder, targetName) = targets.resolve(path.absolute(in: target))
            var info = stat()
            guard linkat(sourceFolder, sourceName, targetFolder, targetName, 0) == 0,
                fstatat(targetFolder, targetName, &info, AT_SYMLINK_NOFOLLOW) == 0,
                info.st_mode & S_IFMT == S_IFREG, FileIdentity(info) == identity
            else { return abandon() }
        case .folder(let path, _, _):
            guard !path.isRoot else { return }
            guard makeFolder(path), let info = FileSystem.status(of: path.absolute(in: target)),
                info.st_mode & S_IFMT == S_IFDIR
            else { return abandon() }
            folderTimes[path] = FileSystem.changeTime(info)
        }
    }

    /// Makes `folder` and its missing ancestors in the seed, outermost first (a loop, not
    /// recursion: a tree may be thousands of folders deep); false when one cannot be made.
    private func makeFolder(_ folder: SafeRelativePath) -> Bool {
        var missing: [SafeRelativePath] = []
        var next = folder
        while !made.contains(next) {
            missing.append(next)
            next = next.parent
        }
        for folder in missing.reversed() {
            guard Self.hasRoom(at: target, reserve: reserve) else { return false }
            do {
                try FileSystem.makeFolder(folder.absolute(in: target))
            } catch {
                return false
            }
            made.insert(folder)
        }
        return true
    }

    /// Stops the seed and removes what it linked (its space goes back before the switch).
    private func abandon() {
        isComplete = false
        folderTimes = [:]
        made = [.root]
        try? FileSystem.removeTree(target)
    }
}

/// A ``TwinSeed`` run on a thread of its own, beside the walk that hands it the entries: the
/// links then take a core the check leaves free instead of the check's own time (100,000 files
/// on ext4: 1.2 s of links in a 6 s restore). The entries wait in a bounded queue (the walk waits
/// when it is full) and are linked in the order given, so a folder's time is still taken after
/// everything below it is linked.
final class TwinSeedThread: @unchecked Sendable {
    private let seed: TwinSeed
    /// Guards `pending`, `closed` and `outcome`.
    private let condition = NSCondition()
    private var pending: [TreeDigest.StreamedEntry] = []
    private var closed = false
    private var outcome: [SafeRelativePath: Int64]??
    private let done = DispatchSemaphore(value: 0)
    /// Entries waiting at most.
    static let bound = 4_096
    /// False when no thread could be made (a task limit): entries are then linked as they come,
    /// on the walk's thread.
    private var threaded = true

    /// Starts the thread that links `seed`'s entries.
    init(_ seed: TwinSeed) {
        self.seed = seed
        do {
            try DetachedThread.start(name: "cs.seed") { [self] in self.run() }
        } catch {
            threaded = false
        }
    }

    /// Hands one entry of the walk over (waiting while the queue is full).
    func add(_ entry: TreeDigest.StreamedEntry) {
        guard threaded else { return seed.add(entry) }
        condition.lock()
        while pending.count >= Self.bound && !closed { condition.wait() }
        if !closed { pending.append(entry) }
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until every entry handed over is linked, and ends the thread; the seed's folder
    /// times when it is whole, nil when not. Later calls return the same.
    func finish() -> [SafeRelativePath: Int64]? {
        condition.lock()
        if let outcome {
            condition.unlock()
            return outcome
        }
        closed = true
        condition.broadcast()
        condition.unlock()
        if threaded { done.wait() }
        let result = seed.isComplete ? seed.folderTimes : nil
        condition.lock()
        outcome = .some(result)
        condition.unlock()
        return result
    }

    private func run() {
        var batch: [TreeDigest.StreamedEntry] = []
        while true {
            condition.lock()
            while pending.isEmpty && !closed { condition.wait() }
            swap(&batch, &pending)
            let last = closed && batch.isEmpty
            condition.broadcast()
            condition.unlock()
            if last { break }
            for entry in batch { seed.add(entry) }
            batch.removeAll(keepingCapacity: true)
        }
        done.signal()
    }
}
