import Foundation
import Synchronization
import Testing

@testable import Archive
@testable import FileKit

/// Cancellation, write failures and destination checks.
@Suite(.timeLimit(.minutes(3)))
struct ZipExtractionControlTests {
    /// An archive of `count` incompressible files of `size` bytes each.
    static func makeArchive(at path: String, count: Int, size: Int) throws {
        let writer = try ZipWriter(path: path)
        for index in 0..<count {
            try writer.addFile("data/part\(index).bin", contents: noise(size, seed: UInt64(index)))
        }
        try writer.close()
    }

    @Test(arguments: [1, 2])
    func cancellingStopsBetweenChunks(workers: Int) throws {
        try withTemporaryDirectory { dir in
            try Self.makeArchive(at: dir + "/a.zip", count: 4, size: 3_000_000)
            try makeFolder(dir + "/out")
            var options = ZipExtractionOptions.roomy
            options.workers = workers
            let cancelled = Atomic<Bool>(false)

            let error = #expect(throws: ArchiveError.self) {
                try ZipExtractor.extract(
                    archiveAt: dir + "/a.zip", into: dir + "/out", options: options,
                    isCancelled: { cancelled.load(ordering: .relaxed) },
                    progress: { total in
                        if total >= 500_000 { cancelled.store(true, ordering: .relaxed) }
                    })
            }

            #expect(error?.code == .cancelled)
            #expect(error?.message.contains("cancelled") == true)
            let written = try bytesOnDisk(dir + "/out")
            #expect(written >= 500_000)
            // Each worker finishes at most the chunk it holds when the flag is set, not its whole file.
            #expect(written <= 500_000 + workers * ExtractionRun.chunkSize)
        }
    }

    @Test func anAlreadyCancelledCallWritesNothing() throws {
        try withTemporaryDirectory { dir in
            try Self.makeArchive(at: dir + "/a.zip", count: 2, size: 1000)
            try makeFolder(dir + "/out")

            let error = #expect(throws: ArchiveError.self) {
                try ZipExtractor.extract(
                    archiveAt: dir + "/a.zip", into: dir + "/out", options: .roomy,
                    isCancelled: { true })
            }

            #expect(error?.code == .cancelled)
            #expect(try snapshot(dir + "/out").isEmpty)
        }
    }

    @Test func cancellingTheTaskStopsTheAsyncExtraction() async throws {
        try await withTemporaryDirectory { dir in
            try Self.makeArchive(at: dir + "/a.zip", count: 8, size: 1_000_000)
            try makeFolder(dir + "/out")
            let started = Atomic<Bool>(false)
            // Every chunk waits here until the test has cancelled: the cancellation lands mid-way
            // however the threads are scheduled (a sleep raced the test's own polling task).
            let gate = DispatchSemaphore(value: 0)
            let task = Task {
                try await ZipExtractor.extract(
                    archiveAt: dir + "/a.zip", into: dir + "/out", options: .roomy,
                    progress: { _ in
                        started.store(true, ordering: .relaxed)
                        gate.wait()
                        gate.signal()
                    })
            }
            while !started.load(ordering: .relaxed) { try await Task.sleep(for: .milliseconds(5)) }
            task.cancel()
            gate.signal()

            let error = await #expect(throws: ArchiveError.self) { try await task.value }

            #expect(error?.code == .cancelled)
            #expect(try bytesOnDisk(dir + "/out") < 8_000_000)
        }
    }

    @Test func aFullDiskKeepsItsErrnoAndNamesTheFile() throws {
        try withTemporaryDirectory { dir in
            try Self.makeArchive(at: dir + "/a.zip", count: 3, size: 600_000)
            try makeFolder(dir + "/out")
            let budget = Atomic<Int>(700_000)
            // Accepts 700,000 bytes, then fails the way a full disk does.
            let fullDisk = FileWriting { fd, bytes in
                if budget.subtract(bytes.count, ordering: .relaxed).newValue < 0 { return ENOSPC }
                return FileWriting.system.writeAll(fd, bytes)
            }

            let error = #expect(throws: ArchiveError.self) {
                try ZipExtractor.extract(
                    archiveAt: dir + "/a.zip", into: dir + "/out", options: .roomy,
                    isCancelled: { false }, progress: nil, fileWriting: fullDisk)
            }

            #expect(error?.code == .io)
            #expect(error?.errno == ENOSPC)
            let message = error?.message ?? ""
            #expect(message.contains("writing 'data/part"))
            #expect(message.contains("into \(dir)/out: No space left on device; free space and retry"))
            #expect(try bytesOnDisk(dir + "/out") <= 700_000)
        }
    }

    @Test func aMissingDestinationIsRefused() throws {
        try withTemporaryDirectory { dir in
            try Self.makeArchive(at: dir + "/a.zip", count: 1, size: 10)

            let error = #expect(throws: ArchiveError.self) {
                try ZipExtractor.extract(archiveAt: dir + "/a.zip", into: dir + "/missing", options: .roomy)
            }

            #expect(error?.code == .invalidDestination)
            #expect(error?.errno == ENOENT)
            #expect(!FileManager.default.fileExists(atPath: dir + "/missing"))
        }
    }

    @Test func errorsDescribeTheirCodeAndMessage() {
        let error = ArchiveError.io("writing 'a/b.bin' into /dest", errno: ENOSPC)

        #expect(
            error.description
                == "ArchiveError.io: writing 'a/b.bin' into /dest: No space left on device; free space and retry")
        #expect(ArchiveError.Code.unsafeEntryName.description == "unsafeEntryName")
        #expect(ArchiveError.Code.io != ArchiveError.Code.corrupt)
    }

    /// A file whose path is longer than the system allows is refused with a message that names
    /// the limit and what to do, not "check that it exists".
    @Test func aFileBeyondThePathLimitIsNamedWithTheLimitAndTheFix() throws {
        try withTemporaryDirectory { dir in
            // FileKit makes each level below the one before, past PATH_MAX.
            var path = dir
            let name = String(repeating: "d", count: 200)
            while path.utf8.count < 4_200 {
                path += "/" + name
                try FileSystem.makeFolder(path)
            }
            let file = try LongPath.at(path + "/f.txt") { folder, rest throws(FileSystemError) in
                openat(folder, rest, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
            }
            #expect(file >= 0)
            close(file)
            let writer = try ZipWriter(path: dir + "/a.zip")
            let error = #expect(throws: ArchiveError.self) { try writer.addFile("f.txt", fromPath: path + "/f.txt") }
            #expect(error?.message.contains("over the system's 4095") == true, "\(error?.message ?? "")")
            #expect(error?.message.contains("shorter path") == true)
            // Foundation cannot remove a tree past the limit; FileKit walks it by descriptors.
            try FileSystem.removeTree(dir + "/" + name)
            #expect(!FileManager.default.fileExists(atPath: dir + "/" + name))
        }
    }
}
