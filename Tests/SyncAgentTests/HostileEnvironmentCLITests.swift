import CLinux
import Foundation
import StorageServer
import Testing

/// The binary in a hostile local environment: a log reader that goes away, a low descriptor limit
/// and a tree 1,800 levels deep.
@Suite("sync-agent survives its local environment", .timeLimit(.minutes(5)))
struct HostileEnvironmentCLITests {
    /// Starts the binary with its stderr (and stdout) on a pipe whose reader has already gone,
    /// as when it is piped into `head` or a log shipper that exits.
    static func spawnWithClosedPipe(_ arguments: [String], closingStderr: Bool = false) throws -> PipedChild {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        close(ends[0])
        defer { close(ends[1]) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, ends[1], 1)
        if closingStderr {
            posix_spawn_file_actions_addclose(&actions, 2)
        } else {
            posix_spawn_file_actions_adddup2(&actions, ends[1], 2)
        }
        _ = clinux_spawn_closefrom(&actions, 3)
        let argv: [UnsafeMutablePointer<CChar>?] = ([SyncAgentBinary.path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let code = posix_spawn(&pid, SyncAgentBinary.path, &actions, nil, argv, environ)
        guard code == 0 else { throw POSIXError(POSIXErrorCode(rawValue: code)!) }
        return PipedChild(pid: pid)
    }

    /// A child started by ``spawnWithClosedPipe(_:)``, stopped and reaped by its PID.
    struct PipedChild: Sendable {
        let pid: pid_t

        func send(_ signal: Int32) { kill(pid, signal) }

        /// The exit status, or 128 + the signal that ended it; waits on a thread of its own.
        func exitStatus() async -> Int32 {
            await withCheckedContinuation { continuation in
                let pid = self.pid
                let thread = Thread {
                    var status: Int32 = 0
                    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                    let low = status & 0x7F
                    continuation.resume(returning: low == 0 ? (status >> 8) & 0xFF : 128 + low)
                }
                thread.start()
            }
        }
    }

    @Test func aClosedStderrPipeDoesNotKillSync() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: URL(fileURLWithPath: SyncAgentCLITests.exampleStorage + "/1.2")) {
                server async throws in
                let process = try Self.spawnWithClosedPipe([
                    "sync", "--base-url", server.baseURL!.absoluteString, "--dir", scratch + "/content",
                    "--state", scratch + "/state.sqlite", "--verbose",
                ])
                let status = await process.exitStatus()
                #expect(status == 0, "141 is death by SIGPIPE")
                let check = try await SyncAgentBinary.run(
                    ["status", "--dir", scratch + "/content", "--state", scratch + "/state.sqlite", "--json"],
                    scratch: scratch)
                #expect(check.stdout.contains("\"version\" : \"1.2\""))
            }
        }
    }

    @Test func aClosedStderrDescriptorDoesNotSendLogLinesIntoTheStateDatabase() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: URL(fileURLWithPath: SyncAgentCLITests.exampleStorage + "/1.2")) {
                server async throws in
                // Descriptor 2 is not open at all: the first file opened would get number 2.
                let process = try Self.spawnWithClosedPipe(
                    [
                        "sync", "--base-url", server.baseURL!.absoluteString, "--dir", scratch + "/content",
                        "--state", scratch + "/state.sqlite", "--verbose",
                    ], closingStderr: true)
                #expect(await process.exitStatus() == 0)
                let check = try await SyncAgentBinary.run(
                    ["status", "--dir", scratch + "/content", "--state", scratch + "/state.sqlite", "--json"],
                    scratch: scratch)
                #expect(check.status == 0, "the state database is intact: \(check.stderr)")
                #expect(check.stdout.contains("\"version\" : \"1.2\""))
                for name in try FileManager.default.contentsOfDirectory(atPath: scratch)
                where name.hasPrefix("state.sqlite") {
                    let bytes = try Data(contentsOf: URL(fileURLWithPath: scratch + "/" + name))
                    #expect(
                        bytes.range(of: Data("restoring from the archive".utf8)) == nil, "a log line landed in \(name)")
                }
            }
        }
    }

    @Test func aClosedStderrPipeDoesNotKillWatch() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: URL(fileURLWithPath: SyncAgentCLITests.exampleStorage + "/1.2")) {
                server async throws in
                let process = try Self.spawnWithClosedPipe([
                    "watch", "--base-url", server.baseURL!.absoluteString, "--dir", scratch + "/content",
                    "--state", scratch + "/state.sqlite", "--interval", "1", "--verbose",
                ])
                async let status = process.exitStatus()
                var synced = false
                for _ in 0..<300 where !synced {
                    let check = try await SyncAgentBinary.run(
                        ["status", "--dir", scratch + "/content", "--state", scratch + "/state.sqlite", "--json"],
                        scratch: scratch)
                    synced = check.stdout.contains("\"version\" : \"1.2\"")
                    if !synced { try await Task.sleep(for: .milliseconds(100)) }
                }
                #expect(synced)
                // Several checks, each logging to the dead pipe.
                let requests = server.requests().count
                for _ in 0..<100 where server.requests().count < requests + 2 {
                    try await Task.sleep(for: .milliseconds(100))
                }
                process.send(SIGTERM)
                #expect(await status == 0, "141 is death by SIGPIPE")
            }
        }
    }

    // MARK: - A tree 1,800 levels deep under `ulimit -n 128`

    /// Writes a storage by hand (the way the original iOS publisher's users did): no integrity
    /// data, relative URLs, an archive made by Info-ZIP.
    static func writeStorage(_ storage: String, version: String, changeLists: [(name: String, json: String)])
        async throws
    {
        let config = storage + "/RXCacheConfig"
        try FileManager.default.createDirectory(
            atPath: config + "/HistoryOfVersions", withIntermediateDirectories: true)
        try? FileManager.default.removeItem(atPath: storage + "/RXCacheContent.zip")
        let status = try await ChildProcess.run(
            "/bin/sh", ["-c", "cd '\(storage)' && zip -qr RXCacheContent.zip RXCacheContent"])
        #expect(status == 0)
        try """
        {"actualCacheVersion": "\(version)", "minimalCacheVersion": "1.0",
         "urlAtListOfURLsToUpdatesByVersion": "listOfURLsToUpdatesByVersion.json",
         "urlAtZipArchiveOfCacheContent": "../RXCacheContent.zip",
         "zippedArchiveSizeInMB": "20", "unzippedArchiveSizeInMB": "20"}
        """.write(toFile: config + "/cacheStatus.json", atomically: true, encoding: .utf8)
        let urls = changeLists.map { "\"HistoryOfVersions/\($0.name)\"" }.joined(separator: ", ")
        try "{\"updatesByVersions\": [\(urls)]}".write(
            toFile: config + "/listOfURLsToUpdatesByVersion.json", atomically: true, encoding: .utf8)
        for list in changeLists {
            try list.json.write(toFile: config + "/HistoryOfVersions/" + list.name, atomically: true, encoding: .utf8)
        }
    }

    @Test func anEighteenHundredLevelTreeSyncsAndIsDeletedUnderALowDescriptorLimit() async throws {
        try await withScratch { scratch in
            let storage = scratch + "/storage"
            let content = storage + "/RXCacheContent"
            try FileManager.default.createDirectory(
                atPath: content + "/" + Array(repeating: "d", count: 1_800).joined(separator: "/"),
                withIntermediateDirectories: true)
            try "bottom".write(
                toFile: content + "/" + Array(repeating: "d", count: 1_800).joined(separator: "/") + "/bottom.txt",
                atomically: false, encoding: .utf8)
            try "top".write(toFile: content + "/top.txt", atomically: false, encoding: .utf8)
            try await Self.writeStorage(storage, version: "1.0", changeLists: [])
            let arguments = [
                "sync", "--base-url", "", "--dir", scratch + "/client/content", "--state",
                scratch + "/client/state.sqlite",
            ]
            try FileManager.default.createDirectory(atPath: scratch + "/client", withIntermediateDirectories: true)

            try await withStorageServer(root: URL(fileURLWithPath: storage)) { server async throws in
                var args = arguments
                args[2] = server.baseURL!.absoluteString
                // Each run with at most 128 descriptors: the old tree deletion kept one per level.
                let limited = { (scratch: String) async throws -> CommandResult in
                    try await SyncAgentBinary.run(args, scratch: scratch, openFiles: 128)
                }
                let restore = try await limited(scratch)
                #expect(restore.status == 0, "stderr: \(restore.stderr)")
                #expect(
                    FileManager.default.fileExists(
                        atPath: scratch + "/client/content/"
                            + Array(repeating: "d", count: 1_800).joined(separator: "/") + "/bottom.txt"))

                let removingTheDeepTree = (
                    name: "changes_1.0_2.0.json",
                    json: """
                    {"from": "1.0", "to": "2.0", "changes": [
                      {"oldPath": "../../RXCacheContent/d", "newPath": "", "redownload": false, "rename": false},
                      {"oldPath": "", "newPath": "../../RXCacheContent/new.txt", "redownload": false, "rename": false}]}
                    """
                )
                // 2.0 removes the deep tree: the switch retires 1.0, kept as the twin 3.0 is caught
                // up from, and 3.0's catch-up deletes its 1,800 levels.
                try FileManager.default.removeItem(atPath: content + "/d")
                try "new".write(toFile: content + "/new.txt", atomically: false, encoding: .utf8)
                try await Self.writeStorage(
                    storage, version: "2.0",
                    changeLists: [removingTheDeepTree])
                let replay = try await limited(scratch)
                #expect(replay.status == 0, "stderr: \(replay.stderr)")
                let staging = scratch + "/client/.content.content-sync"
                #expect(
                    try FileManager.default.contentsOfDirectory(atPath: scratch + "/client").sorted()
                        == [
                            ".content.content-sync", "content", "state.sqlite", "state.sqlite-shm", "state.sqlite-wal",
                            "state.sqlite.lock",
                        ]
                        .filter {
                            FileManager.default.fileExists(atPath: scratch + "/client/" + $0)
                        }, "only the staging folder, holding the twin, is beside the content")
                #expect(try FileManager.default.contentsOfDirectory(atPath: staging) == ["retired"])
                try "third".write(toFile: content + "/third.txt", atomically: false, encoding: .utf8)
                try await Self.writeStorage(
                    storage, version: "3.0",
                    changeLists: [
                        removingTheDeepTree,
                        (
                            "changes_2.0_3.0.json",
                            """
                            {"from": "2.0", "to": "3.0", "changes": [
                              {"oldPath": "", "newPath": "../../RXCacheContent/third.txt", "redownload": false, "rename": false}]}
                            """
                        ),
                    ])
                let caughtUp = try await limited(scratch)
                #expect(caughtUp.status == 0, "stderr: \(caughtUp.stderr)")
                #expect(
                    try FileManager.default.contentsOfDirectory(atPath: staging + "/retired").sorted() == [
                        "new.txt", "top.txt",
                    ], "the twin is 2.0 now: the 1,800 levels are gone")
                #expect(
                    try FileManager.default.contentsOfDirectory(atPath: scratch + "/client/content").sorted() == [
                        "new.txt", "third.txt", "top.txt",
                    ])
                let again = try await limited(scratch)
                #expect(again.status == 0, "stderr: \(again.stderr)")
            }
        }
    }

    // MARK: - An open-file limit too low to run

    /// Under `ulimit -n 20` libdispatch killed the process with `SIGILL` (1 run in 6: its pool
    /// monitor could not open a worker's `/proc` file once the state database had taken the
    /// last descriptors), or SQLite's "unable to open" ended in advice to delete the state
    /// database. Now the limit is refused at start, naming it and the fix, and nothing is touched.
    /// A --state path that is a folder is refused, exit 6, saying so: never "delete it".
    @Test func aStatePathThatIsAFolderIsRefusedAndNeverToBeDeleted() async throws {
        try await withScratch { scratch in
            try FileManager.default.createDirectory(atPath: scratch + "/folder", withIntermediateDirectories: true)
            try Data("x".utf8).write(to: URL(fileURLWithPath: scratch + "/folder/a"))
            let result = try await SyncAgentBinary.run(
                [
                    "sync", "--base-url", "http://127.0.0.1:9/", "--dir", scratch + "/content", "--state",
                    scratch + "/folder",
                ], scratch: scratch)
            #expect(result.status == 6, "\(result.stderr)")
            #expect(result.stderr.contains("is a folder") && !result.stderr.contains("delete"), "\(result.stderr)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: scratch + "/folder") == ["a"])
        }
    }

    @Test func anOpenFileLimitTooLowToRunIsRefusedAtStartNamingItAndNothingIsTouched() async throws {
        try await withScratch { scratch in
            let storage = scratch + "/storage"
            try FileManager.default.createDirectory(
                atPath: storage + "/RXCacheContent", withIntermediateDirectories: true)
            try "one".write(toFile: storage + "/RXCacheContent/one.txt", atomically: false, encoding: .utf8)
            try await Self.writeStorage(storage, version: "1.0", changeLists: [])
            try FileManager.default.createDirectory(atPath: scratch + "/client", withIntermediateDirectories: true)
            let state = scratch + "/client/state.sqlite"
            try await withStorageServer(root: URL(fileURLWithPath: storage)) { server async throws in
                let args = [
                    "sync", "--base-url", server.baseURL!.absoluteString, "--dir", scratch + "/client/content",
                    "--state", state,
                ]
                let first = try await SyncAgentBinary.run(args, scratch: scratch)
                #expect(first.status == 0, "stderr: \(first.stderr)")
                let before = try FileManager.default.attributesOfItem(atPath: state)[.modificationDate] as? Date
                for limit in [4, 20, 40] {
                    let run = try await SyncAgentBinary.run(args, scratch: scratch, openFiles: limit)
                    let (status, stderr) = (run.status, run.stderr)
                    #expect(status == 5, "ulimit -n \(limit): exit \(status), stderr: \(stderr)")
                    #expect(stderr.contains("ulimit -n \(limit)") && stderr.contains("LimitNOFILE"), "\(stderr)")
                    #expect(!stderr.contains("delete"), "\(stderr)")
                }
                let after = try FileManager.default.attributesOfItem(atPath: state)[.modificationDate] as? Date
                #expect(before == after, "the state database was not touched")
                let again = try await SyncAgentBinary.run(args, scratch: scratch)
                #expect(again.status == 0 && again.stdout.contains("up to date"), "\(again.stdout) \(again.stderr)")
            }
        }
    }

    /// A symlink planted at one of the state database's own files: SQLite and the update lock
    /// would open (and create) the target. `sync`, `status` and `watch` refuse with exit 6,
    /// naming the file and the fix; nothing appears at the target.
    @Test(
        "a symlink at the state's -wal, -shm, -journal or .lock is refused with exit 6; nothing is created through it",
        arguments: ["-wal", "-shm", "-journal", ".lock"])
    func aSymlinkAtAStateDatabasesFileIsRefused(suffix: String) async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: URL(fileURLWithPath: SyncAgentCLITests.exampleStorage + "/1.2")) {
                server async throws in
                try FileManager.default.createDirectory(
                    atPath: scratch + "/elsewhere", withIntermediateDirectories: true)
                let state = scratch + "/state.sqlite"
                let first = try await SyncAgentBinary.run(
                    [
                        "sync", "--base-url", server.baseURL!.absoluteString, "--dir", scratch + "/content", "--state",
                        state,
                    ],
                    scratch: scratch)
                #expect(first.status == 0, "\(first.stderr)")
                try? FileManager.default.removeItem(atPath: state + suffix)
                try FileManager.default.createSymbolicLink(
                    atPath: state + suffix, withDestinationPath: scratch + "/elsewhere/target")
                let arguments = [
                    [
                        "sync", "--base-url", server.baseURL!.absoluteString, "--dir", scratch + "/content", "--state",
                        state,
                    ],
                    ["status", "--dir", scratch + "/content", "--state", state],
                ]
                for command in arguments {
                    let result = try await SyncAgentBinary.run(command, scratch: scratch)
                    #expect(result.status == 6, "\(command[0]): \(result.stderr)")
                    #expect(result.stderr.contains(state + suffix), "\(command[0]) names the file: \(result.stderr)")
                    #expect(result.stderr.contains("remove it"), "\(command[0]) says the fix: \(result.stderr)")
                }
                #expect(try FileManager.default.contentsOfDirectory(atPath: scratch + "/elsewhere").isEmpty)
                // Once removed, the next sync works.
                try FileManager.default.removeItem(atPath: state + suffix)
                let again = try await SyncAgentBinary.run(
                    [
                        "sync", "--base-url", server.baseURL!.absoluteString, "--dir", scratch + "/content", "--state",
                        state,
                    ],
                    scratch: scratch)
                #expect(again.status == 0, "\(again.stderr)")
            }
        }
    }
}

/// An empty path resolves to the current folder: `sync --dir ''` mirrored into it and recorded a
/// state for it, `cache get --cache ''` made a cache of it. Every path option refuses one.
@Suite("an empty path option is refused before anything is opened")
struct EmptyPathOptionTests {
    @Test(
        "exit 6 naming the option, nothing created",
        arguments: [
            ["sync", "--dir", "", "--base-url", "http://127.0.0.1:9/"],
            ["sync", "--dir=", "--base-url", "http://127.0.0.1:9/"],
            ["sync", "--dir", "content", "--state", "", "--base-url", "http://127.0.0.1:9/"],
            ["status", "--dir", ""],
            ["cache", "get", "http://127.0.0.1:9/x", "--cache", ""],
            ["cache", "ls", "--cache="],
            ["cache", "get", "http://127.0.0.1:9/x", "--cache", "c", "-o", ""],
            ["publish", "--storage", "", "--content", "content", "--version", "1.0", "--base-url", "http://h/"],
            ["keygen", "--out", ""],
        ])
    func refused(arguments: [String]) async throws {
        try await withScratch { scratch in
            // Relative paths, as given, would land in the scratch folder only by accident: the
            // child's working folder is the test's.
            let absolute = arguments.map { $0 == "content" || $0 == "c" ? scratch + "/" + $0 : $0 }
            let result = try await SyncAgentBinary.run(absolute, scratch: scratch)
            let option =
                arguments.first { $0 == "--dir=" || $0 == "--cache=" }.map { String($0.dropLast()) }
                ?? arguments[arguments.firstIndex(of: "")! - 1]
            #expect(result.status == 6, "\(arguments): \(result.stderr)")
            #expect(result.stderr.contains("\(option) is empty"), "\(result.stderr)")
            let made = try FileManager.default.contentsOfDirectory(atPath: scratch).filter {
                !$0.hasSuffix(".out") && !$0.hasSuffix(".err")
            }
            #expect(made.isEmpty, "\(made)")
        }
    }

    /// A state database this user may not write (a file or folder of another user's) is not
    /// called damaged: the error names the file or folder and the owner or mode to fix, never
    /// "delete it", and the database is left as it was.
    @Test func aStateDatabaseThisUserMayNotWriteIsNamedNotCalledDamaged() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: URL(fileURLWithPath: SyncAgentCLITests.exampleStorage + "/1.2")) {
                server in
                let folder = scratch + "/state"
                let state = folder + "/state.sqlite"
                let arguments = [
                    "sync", "--base-url", server.baseURL!.absoluteString, "--dir", scratch + "/content", "--state",
                    state,
                ]
                #expect(try await SyncAgentBinary.run(arguments, scratch: scratch).status == 0)
                let before = FileManager.default.contents(atPath: state)
                // Readable by all (the unprivileged run reads its output files and the storage).
                for path in [scratch, folder] { chmod(path, 0o755) }
                chmod(state, 0o644)
                let unwritableFile = try await SyncAgentBinary.runUnprivileged(arguments, scratch: scratch)
                #expect(unwritableFile.status == 5, "\(unwritableFile.stderr)")
                #expect(unwritableFile.stderr.contains("may not read and write \(state)"), "\(unwritableFile.stderr)")
                chmod(state, 0o666)
                let unwritableFolder = try await SyncAgentBinary.runUnprivileged(arguments, scratch: scratch)
                #expect(unwritableFolder.status == 5, "\(unwritableFolder.stderr)")
                #expect(
                    unwritableFolder.stderr.contains("may not create files in \(folder)"), "\(unwritableFolder.stderr)")
                for result in [unwritableFile, unwritableFolder] {
                    #expect(!result.stderr.contains("delete it"), "\(result.stderr)")
                }
                #expect(FileManager.default.contents(atPath: state) == before)
            }
        }
    }
}
