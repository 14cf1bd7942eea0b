import FileKit
import Foundation
import Synchronization
import Testing

/// Writes `text` to `path`, making its folders.
func writeFile(_ text: String, _ path: String) throws {
    try FileManager.default.createDirectory(
        atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
}

/// A fresh folder per test, removed afterwards.
func withScratchFolder<T>(_ body: (String) async throws -> T) async throws -> T {
    let path = NSTemporaryDirectory() + "filekit-tests-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try await body(path)
}

@Suite("FileSystemError keeps the system's words")
struct FileSystemErrorTests {
    @Test(arguments: [
        (ENOSPC, FileSystemError.Code.noSpace), (EDQUOT, .noSpace), (EACCES, .permissionDenied),
        (EPERM, .permissionDenied),
        (EROFS, .permissionDenied), (ENOENT, .notFound), (ENOTDIR, .notFound), (EEXIST, .alreadyExists),
        (ENOTEMPTY, .alreadyExists), (ENAMETOOLONG, .nameTooLong), (EIO, .io), (EBADF, .io),
    ])
    func errnoValuesMapToCodes(errno: Int32, code: FileSystemError.Code) {
        #expect(FileSystemError.Code(errno: errno) == code)
    }

    @Test func aRealFailurePrintsTheOperationPathCallAndErrno() async throws {
        try await withScratchFolder { folder in
            _ = FileManager.default.createFile(atPath: folder + "/file", contents: Data("x".utf8))
            // A path through a regular file: the kernel answers ENOTDIR.
            let error = #expect(throws: FileSystemError.self) { try FileSystem.makeFolder(folder + "/file/child") }
            #expect(error?.code == .notFound)
            #expect(error?.syscall == "mkdirat")
            #expect(error?.errno == ENOTDIR)
            #expect(error?.path == folder + "/file/child")
            #expect(
                error?.description == "cannot create folder \(folder)/file/child (mkdirat: Not a directory, errno 20)")
        }
    }

    @Test func aFullDiskNamesTheRemedy() {
        let error = FileSystemError("cannot write", path: "/data/x", syscall: "write", errno: ENOSPC)
        #expect(
            error.description
                == "cannot write /data/x (write: No space left on device, errno 28); free disk space and try again")
    }

    /// EACCES and EROFS are both "permission denied" to a caller branching on codes, but the
    /// remedies differ: permissions cannot make a read-only mount writable.
    @Test(arguments: [
        (EACCES, "check the folder's permissions"),
        (EROFS, "the filesystem is mounted read-only: remount it read-write or choose a folder on a writable one"),
    ])
    func permissionFailuresNameTheirOwnRemedy(code: Int32, remedy: String) {
        let error = FileSystemError("cannot write", path: "/data/x", syscall: "openat", errno: code)
        #expect(error.code == .permissionDenied)
        #expect(error.remedy == remedy)
    }
}

/// Jobs running now and the most seen at once.
final class Counters: Sendable {
    let running = Atomic<Int>(0)
    let most = Atomic<Int>(0)

    /// A blocking job that counts itself running and, until `threads` jobs have once run at the
    /// same moment (or 2 s passed), stays: so a pool that runs that many at once shows it however
    /// slowly its threads wake on a loaded machine, and one that cannot shows less after the wait.
    func job(until threads: Int) {
        let now = running.add(1, ordering: .sequentiallyConsistent).newValue
        most.max(now, ordering: .sequentiallyConsistent)
        let deadline = ContinuousClock.now + .seconds(2)
        repeat {
            usleep(1_000) // blocking work: the point of the pool
        } while most.load(ordering: .sequentiallyConsistent) < threads && ContinuousClock.now < deadline
        running.subtract(1, ordering: .sequentiallyConsistent)
    }
}

@Suite("BlockingIOPool is bounded")
struct BlockingIOPoolTests {
    @Test func neverRunsMoreJobsThanItHasThreads() async throws {
        let pool = BlockingIOPool(threadCount: 2)
        let counters = Counters()
        let results = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<12 {
                group.addTask {
                    try await pool.run { () throws(FileSystemError) -> Int in
                        counters.job(until: 2)
                        return index
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.sorted() == Array(0..<12))
        #expect(
            counters.most.load(ordering: .sequentiallyConsistent) == 2,
            "two threads, so at most two jobs at once, and both used")
    }

    /// What a job captured is freed by the time its caller resumes, with polling and without: an
    /// object the caller let go of (a state database) is never freed later on a pool thread.
    @Test(arguments: [Duration.zero, .milliseconds(5)])
    func aJobsCapturesAreReleasedBeforeItsCallerResumes(spin: Duration) async throws {
        final class Captured: Sendable {}
        let pool = BlockingIOPool(threadCount: 2, spin: spin)
        for _ in 0..<20 {
            weak var gone: Captured?
            do {
                let captured = Captured()
                gone = captured
                let seen: ObjectIdentifier = await pool.run { ObjectIdentifier(captured) }
                #expect(seen == ObjectIdentifier(captured))
            }
            #expect(gone == nil, "the job and its queue slot let go of what they captured")
        }
    }

    /// A worker polling the queue takes one job without being woken; a burst of more jobs
    /// must still wake the sleeping threads, or the pool runs them one at a time.
    @Test func aBurstWhileAWorkerPollsUsesEveryThread() async throws {
        let pool = BlockingIOPool(threadCount: 4, spin: .milliseconds(50))
        let counters = Counters()
        // A quick job first: its worker then polls for 50 ms while the other three sleep.
        #expect(await pool.run { 7 } == 7)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    await pool.run { counters.job(until: 4) }
                }
            }
            try await group.waitForAll()
        }
        #expect(counters.most.load(ordering: .sequentiallyConsistent) == 4, "all four threads ran jobs at once")
    }

    /// Many short jobs from many tasks, with and without polling: none is lost (a lost wake-up
    /// would hang the test until its time limit) and each returns its own result.
    @Test(.timeLimit(.minutes(3)), arguments: [Duration.zero, .microseconds(250), .milliseconds(5)])
    func manyShortJobsAllComplete(spin: Duration) async throws {
        let pool = BlockingIOPool(threadCount: 3, spin: spin)
        let sums = try await withThrowingTaskGroup(of: Int.self) { group in
            for task in 0..<8 {
                group.addTask {
                    var sum = 0
                    for index in 0..<500 { sum += await pool.run { task * 1_000 + index } }
                    return sum
                }
            }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(sums.sorted() == (0..<8).map { task in (0..<500).reduce(0) { $0 + task * 1_000 + $1 } })
    }

    /// A job that outlasts the caller's polling hands its result over through a continuation.
    @Test func aJobLongerThanTheSpinStillReturnsItsResult() async throws {
        let pool = BlockingIOPool(threadCount: 1, spin: .microseconds(100))
        let value = await pool.run { () -> String in
            usleep(30_000)
            return "done"
        }
        #expect(value == "done")
        #expect(BlockingIOPool(threadCount: 1, spin: .microseconds(-5)).spin == .zero, "a negative spin is none")
    }

    @Test func aJobsTypedErrorReachesTheCaller() async {
        let error = await #expect(throws: FileSystemError.self) {
            try await BlockingIOPool.shared.run { () throws(FileSystemError) in
                try FileSystem.rename("/nonexistent-\(UUID().uuidString)", to: "/tmp/never", operation: "cannot move")
            }
        }
        #expect(error?.syscall == "renameat")
        #expect(error?.code == .notFound)
    }
}

@Suite("Files are published whole")
struct AtomicFileTests {
    @Test func readersSeeTheOldBytesOrTheNewNeverAMix() async throws {
        try await withScratchFolder { folder in
            let path = folder + "/value.bin"
            let first = Data(repeating: 0xA1, count: 512 << 10)
            let second = Data(repeating: 0xB2, count: 768 << 10)
            try AtomicFile.write(first, to: path)
            // `running` is the stop flag, `most` the reads done so far.
            let shared = Counters()
            let reader = Task.detached { () -> (reads: Int, torn: Int) in
                var reads = 0
                var torn = 0
                while shared.running.load(ordering: .relaxed) == 0 {
                    guard let data = FileManager.default.contents(atPath: path) else {
                        torn += 1
                        continue
                    }
                    reads += 1
                    shared.most.store(reads, ordering: .relaxed)
                    if data != first && data != second { torn += 1 }
                }
                return (reads, torn)
            }
            // At least 60 replacements, and on until the reader has read 200 times (a loaded
            // machine may start it late); bounded, so a reader that never runs fails the test.
            var round = 0
            while round < 60 || (shared.most.load(ordering: .relaxed) < 200 && round < 200_000) {
                try AtomicFile.write(
                    round % 2 == 0 ? second : first, to: path, durability: round % 1000 == 0 ? .full : .none)
                round += 1
                if round % 100 == 0 { await Task.yield() }
            }
            shared.running.store(1, ordering: .relaxed)
            let seen = await reader.value
            #expect(seen.torn == 0, "\(seen.torn) of \(seen.reads) reads saw a missing or mixed file")
            #expect(seen.reads >= 200)
            #expect(
                try FileManager.default.contentsOfDirectory(atPath: folder) == ["value.bin"],
                "no temporary file is left")
        }
    }

    /// While the bytes are written the folder holds no new name: a process killed then
    /// (`cache get -o` stopped by SIGTERM) leaves no partial file beside the target. A failed
    /// write leaves the old file.
    @Test func nothingIsNamedWhileTheBytesAreWritten() async throws {
        try await withScratchFolder { folder in
            let path = folder + "/out.bin"
            try AtomicFile.write(Data("old".utf8), to: path)
            var seenWhileWriting: [String] = []
            try AtomicFile.write(to: path) { write in
                try Data(repeating: 7, count: 1 << 20).withUnsafeBytes { try write($0) }
                seenWhileWriting = try FileManager.default.contentsOfDirectory(atPath: folder)
                try Data(repeating: 8, count: 1 << 20).withUnsafeBytes { try write($0) }
            }
            #expect(seenWhileWriting == ["out.bin"], "named while written: \(seenWhileWriting)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)).count == 2 << 20)
            struct Damaged: Error {}
            #expect(throws: Damaged.self) {
                try AtomicFile.write(to: path) { write in
                    try Data(repeating: 9, count: 4096).withUnsafeBytes { try write($0) }
                    throw Damaged()
                }
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["out.bin"])
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)).count == 2 << 20, "the old file stays")
        }
    }

    @Test func anUnnamedFileIsInvisibleUntilLinkedAndNeverReplacesAnother() async throws {
        try await withScratchFolder { folder in
            guard let file = UnnamedFile(in: folder) else {
                Issue.record("O_TMPFILE is not available in \(folder)")
                return
            }
            let bytes = Array("complete".utf8)
            #expect(write(file.descriptor, bytes, bytes.count) == bytes.count)
            #expect(
                try FileManager.default.contentsOfDirectory(atPath: folder).isEmpty,
                "nothing is visible before the link")
            try file.link(as: folder + "/named.txt")
            #expect(FileManager.default.contents(atPath: folder + "/named.txt") == Data(bytes))

            guard let other = UnnamedFile(in: folder) else {
                Issue.record("O_TMPFILE is not available in \(folder)")
                return
            }
            let error = #expect(throws: FileSystemError.self) { try other.link(as: folder + "/named.txt") }
            #expect(error?.code == .alreadyExists)
            #expect(
                FileManager.default.contents(atPath: folder + "/named.txt") == Data(bytes), "the existing file is kept")
        }
    }
}

@Suite("Digests")
struct FileDigestTests {
    @Test func aFileHashesToItsKnownDigestAndSize() async throws {
        try await withScratchFolder { folder in
            _ = FileManager.default.createFile(atPath: folder + "/abc", contents: Data("abc".utf8))
            let digest = try FileDigest.sha256(ofFileAt: folder + "/abc")
            #expect(digest.size == 3)
            #expect(digest.sha256 == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
            #expect(FileDigest.sha256(Data("abc".utf8)) == digest.sha256)
        }
    }

    @Test func aStreamedDigestCountsOnlyAWholeUnresumedBody() {
        let digest = StreamingDigest()
        Data("ab".utf8).withUnsafeBytes { digest.update($0) }
        Data("c".utf8).withUnsafeBytes { digest.update($0) }
        #expect(digest.sha256(ofFileWithSize: 4, resumedFrom: 0) == nil, "a size that differs is not this body")
        #expect(digest.sha256(ofFileWithSize: 3, resumedFrom: 1) == nil, "a resumed body lacks its start")
        #expect(
            digest.sha256(ofFileWithSize: 3, resumedFrom: 0)
                == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }
}

@Suite("LockTable reads who holds a lock")
struct LockTableTests {
    @Test func theHolderIsTheWriteFlockOfTheFileNotAWaiterNorAReader() {
        let table = """
            1: POSIX  ADVISORY  WRITE 77 08:01:131 0 EOF
            2: FLOCK  ADVISORY  WRITE 1234 00:2e:5551 0 EOF
            2: -> FLOCK  ADVISORY  WRITE 999 00:2e:5551 0 EOF
            3: FLOCK  ADVISORY  READ 42 00:2e:77 0 EOF
            """
        #expect(LockTable.holder(in: table, of: [.init(major: 0, minor: 0x2e, inode: 5551)]) == 1234)
        #expect(
            LockTable.holder(in: table, of: [.init(major: 8, minor: 1, inode: 131)]) == nil,
            "a POSIX lock is not a flock")
        #expect(
            LockTable.holder(in: table, of: [.init(major: 0, minor: 0x2e, inode: 77)]) == nil,
            "a shared lock is no holder")
    }

    /// With hundreds of locks held, the table is many pages long; the holder's line is read
    /// wherever it is (reading only the first page once missed it).
    @Test func aHolderDeepInALongTableIsFound() async throws {
        try await withScratchFolder { folder in
            var descriptors: [Int32] = []
            defer { for fd in descriptors { close(fd) } }
            func lock(_ name: String) -> Int32 {
                let fd = open(folder + "/" + name, O_RDONLY | O_CREAT | O_CLOEXEC, 0o644)
                if fd >= 0 {
                    _ = flock(fd, LOCK_EX | LOCK_NB)
                    descriptors.append(fd)
                }
                return fd
            }
            for index in 0..<300 { _ = lock("before-\(index)") }
            let target = lock("target")
            for index in 0..<300 { _ = lock("after-\(index)") }
            #expect(target >= 0)
            #expect(LockTable.exclusiveHolder(of: [folder + "/target"]) == getpid())
            #expect(LockTable.exclusiveHolder(ofDescriptor: target) == getpid())
            #expect(LockTable.exclusiveHolder(of: [folder + "/unlocked-\(UUID().uuidString)"]) == nil)
        }
    }

    /// Other processes taking and dropping locks while the table is read make one read skip
    /// lines (the kernel resumes each page by counting entries): a lock held all along is still
    /// found, every time. (With one read per probe, 0.5–3.5% of such probes missed it here.)
    @Test func aHolderIsFoundWhileOtherLocksComeAndGo() async throws {
        try await withScratchFolder { folder in
            func open(_ name: String) -> Int32 {
                Glibc.open(folder + "/" + name, O_RDONLY | O_CREAT | O_CLOEXEC, 0o644)
            }
            var held = (0..<600).map { open("before-\($0)") }
            for fd in held { _ = flock(fd, LOCK_EX) }
            let target = open("target")
            #expect(flock(target, LOCK_EX | LOCK_NB) == 0)
            held += (0..<600).map { open("after-\($0)") }
            for fd in held.suffix(300) { _ = flock(fd, LOCK_EX) }
            defer { for fd in held + [target] { close(fd) } }
            let stop = Mutex(false)
            let finished = Mutex(0)
            for index in 0..<2 {
                let fds = (0..<200).map { open("churn-\(index)-\($0)") }
                let thread = Thread {
                    while !stop.withLock({ $0 }) {
                        for fd in fds { _ = flock(fd, LOCK_EX) }
                        for fd in fds { _ = flock(fd, LOCK_UN) }
                    }
                    for fd in fds { close(fd) }
                    finished.withLock { $0 += 1 }
                }
                thread.start()
            }
            // The probes block for seconds on a loaded machine (each reads a table of 1,400 locks
            // that two threads keep changing): they run on a thread of their own, not on one of
            // the cooperative pool's two, which the tests beside this one need.
            let missed = await withCheckedContinuation { continuation in
                let prober = Thread {
                    var missed = 0
                    for _ in 0..<300 where LockTable.exclusiveHolder(ofDescriptor: target) != getpid() { missed += 1 }
                    stop.withLock { $0 = true }
                    while finished.withLock({ $0 }) < 2 { usleep(1_000) }
                    continuation.resume(returning: missed)
                }
                prober.start()
            }
            #expect(missed == 0, "\(missed) of 300 probes missed a lock held all along")
        }
    }
}

/// A walk hashes what it listed: the entry is opened below the folder the walk holds open, never
/// through a symlink, never waited on when it is a fifo, and only while it is still the file listed.
@Suite("hashing a listed entry reads that file or nothing")
struct EntryDigestTests {
    private static func identity(_ path: String) throws -> FileIdentity {
        try #require(FileIdentity(path: path))
    }

    @Test(.timeLimit(.minutes(3))) func onlyTheListedRegularFileIsRead() async throws {
        try await withScratchFolder { folder in
            _ = FileManager.default.createFile(atPath: folder + "/a.txt", contents: Data("listed\n".utf8))
            _ = FileManager.default.createFile(atPath: folder + "/outside.txt", contents: Data("secret\n".utf8))
            let listed = try Self.identity(folder + "/a.txt")
            let descriptor = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            #expect(descriptor >= 0)
            defer { close(descriptor) }

            let read = try FileDigest.sha256(ofEntry: "a.txt", in: descriptor, expecting: listed, shownAs: "a.txt")
            let whole = try FileDigest.sha256(ofFileAt: folder + "/a.txt")
            #expect(read.sha256 == whole.sha256 && read.size == 7 && read.identity == listed)

            // Replaced by another file (renamed over it, so surely another inode): refused before a
            // byte is read.
            _ = FileManager.default.createFile(atPath: folder + "/b.txt", contents: Data("planted\n".utf8))
            #expect(rename(folder + "/b.txt", folder + "/a.txt") == 0)
            var error = #expect(throws: FileSystemError.self) {
                try FileDigest.sha256(ofEntry: "a.txt", in: descriptor, expecting: listed, shownAs: "a.txt")
            }
            #expect(error?.code == .changedUnderneath)

            // A symlink out of the tree: not followed.
            #expect(unlink(folder + "/a.txt") == 0)
            #expect(symlink(folder + "/outside.txt", folder + "/a.txt") == 0)
            let outside = try Self.identity(folder + "/outside.txt")
            error = #expect(throws: FileSystemError.self) {
                try FileDigest.sha256(ofEntry: "a.txt", in: descriptor, expecting: outside, shownAs: "a.txt")
            }
            #expect(error?.code == .changedUnderneath)

            // A fifo with no writer: refused at once instead of blocking the walk forever.
            #expect(unlink(folder + "/a.txt") == 0)
            #expect(mkfifo(folder + "/a.txt", 0o600) == 0)
            error = #expect(throws: FileSystemError.self) {
                try FileDigest.sha256(ofEntry: "a.txt", in: descriptor, expecting: listed, shownAs: "a.txt")
            }
            #expect(error?.code == .changedUnderneath)

            // Hashing by path refuses a fifo and a symlink at the end too, at once.
            #expect(throws: FileSystemError.self) { try FileDigest.sha256(ofFileAt: folder + "/a.txt") }
            #expect(symlink(folder + "/outside.txt", folder + "/link.txt") == 0)
            let refused = #expect(throws: FileSystemError.self) {
                try FileDigest.sha256(ofFileAt: folder + "/link.txt")
            }
            #expect(refused?.errno == ELOOP)

            // Gone: the same answer, naming the path.
            #expect(unlink(folder + "/a.txt") == 0)
            error = #expect(throws: FileSystemError.self) {
                try FileDigest.sha256(ofEntry: "a.txt", in: descriptor, expecting: listed, shownAs: "shown/a.txt")
            }
            #expect(error?.code == .changedUnderneath && error?.path == "shown/a.txt")
        }
    }
}
