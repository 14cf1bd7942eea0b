import CVips
import Foundation
import ImageCache
import StorageServer
import Testing

/// `sync-agent image get` as the built binary against a loopback origin: the variant, its
/// `--info`, the exit codes (4 refused with nothing written or cached, 6 bad option, 8 offline
/// miss, 22 a 404, 3 no origin), and eight processes making one variant from one download.
@Suite("sync-agent image get")
struct ImageCLITests {
    /// The cache CLI tests' scripted origin (a 404 for any path not set).
    static func withOrigin(_ body: (String, ScriptedOrigin, CacheHTTPCLITests.Script) async throws -> Void)
        async throws
    {
        try await CacheHTTPCLITests.withOrigin(body)
    }

    /// A constant-colour JPEG (or PNG) made by libvips.
    /// `png` with its IHDR's height doubled and the chunk's CRC-32 made right.
    static func doubledHeight(_ png: Data) -> Data {
        var bytes = [UInt8](png)
        let height = bytes[20..<24].reduce(0) { $0 << 8 | UInt32($1) } * 2
        withUnsafeBytes(of: height.bigEndian) { bytes.replaceSubrange(20..<24, with: $0) }
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes[12..<29] {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        withUnsafeBytes(of: (~crc).bigEndian) { bytes.replaceSubrange(29..<33, with: $0) }
        return Data(bytes)
    }

    static func image(width: Int, height: Int, png: Bool = false) throws -> Data {
        try VipsRuntime.start()
        var image: UnsafeMutablePointer<VipsImage>?
        guard cvips_constant(&image, Int32(width), Int32(height), 200, 100, 50, 255, 3) == 0, let image else {
            throw CocoaError(.fileWriteUnknown)
        }
        defer { cvips_unref(image) }
        var buffer: UnsafeMutableRawPointer?
        var length = 0
        let status =
            png ? cvips_pngsave_buffer(image, &buffer, &length) : cvips_jpegsave_buffer(image, &buffer, &length, 85)
        guard status == 0, let buffer else { throw CocoaError(.fileWriteUnknown) }
        defer { cvips_free(buffer) }
        return Data(bytes: buffer, count: length)
    }

    func get(_ url: String, _ scratch: String, _ extra: [String]) async throws -> CommandResult {
        try await SyncAgentBinary.run(["image", "get", url, "--cache", scratch + "/cache"] + extra, scratch: scratch)
    }

    func info(_ result: CommandResult) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
    }

    func cachedCount(_ scratch: String) async throws -> Int {
        let stats = try await SyncAgentBinary.run(
            ["cache", "stats", "--cache", scratch + "/cache", "--json"], scratch: scratch)
        let object = try #require(JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [String: Any])
        return try #require(object["count"] as? Int)
    }

    @Test("a variant is written and described; the second ask is answered from the cache")
    func variant() async throws {
        try await Self.withOrigin { scratch, origin, script in
            script.set("/photo.jpg", try Self.image(width: 640, height: 480))
            let url = origin.url("/photo.jpg").absoluteString
            let first = try await get(url, scratch, ["--size", "160x", "--info"])
            #expect(first.status == 0, "\(first.stderr)")
            let facts = try info(first)
            #expect(facts["width"] as? Int == 160 && facts["height"] as? Int == 120)
            #expect(facts["format"] as? String == "jpeg" && facts["made"] as? Bool == true)
            #expect((facts["bytes"] as? Int ?? 0) > 0 && facts["orientation"] as? Int == 1)
            let original = try #require(facts["original"] as? [String: Any])
            #expect(original["width"] as? Int == 640 && original["height"] as? Int == 480)
            let output = scratch + "/thumb.webp"
            let second = try await get(
                url, scratch, ["--size", "100x100", "--mode", "fill", "--format", "webp", "-o", output])
            #expect(second.status == 0 && second.stdout.isEmpty)
            let written = try ImageProbe.header(of: Data(contentsOf: URL(fileURLWithPath: output)), source: output)
            #expect(written.format == "webp" && written.width == 100 && written.height == 100)
            let again = try info(try await get(url, scratch, ["--size", "160x", "--info"]))
            #expect(again["made"] as? Bool == false && again["source"] as? String == "disk")
            // To stdout: the bytes themselves.
            let bytes = try await get(url, scratch, ["--size", "160x"])
            #expect(bytes.status == 0)
            #expect(try ImageProbe.header(of: bytes.stdoutData, source: "stdout").width == 160)
            #expect(origin.requestCount(forPath: "/photo.jpg") == 1)
        }
    }

    @Test(
        "a refused image exits 4, writes nothing to stdout and caches nothing",
        arguments: ["svg", "html", "empty", "truncated", "rows cut short"])
    func refused(kind: String) async throws {
        try await Self.withOrigin { scratch, origin, script in
            let body: Data =
                switch kind {
                case "svg": Data(#"<svg xmlns="http://www.w3.org/2000/svg" width="9" height="9"/>"#.utf8)
                case "html": Data("<html><body>moved</body></html>".utf8)
                case "empty": Data()
                // Every chunk whole, the IHDR claiming twice the rows the image data holds: only
                // decoding finds it, after the original was stored.
                case "rows cut short": try Self.doubledHeight(Self.image(width: 300, height: 300, png: true))
                default: try Self.image(width: 300, height: 300).prefix(200)
                }
            script.set("/bad.jpg", body)
            let url = origin.url("/bad.jpg").absoluteString
            let result = try await get(url, scratch, ["--size", "50x"])
            #expect(result.status == 4, "\(result.stderr)")
            #expect(result.stdoutData.isEmpty)
            #expect(result.stderr.contains(url))
            // One line of ours: libvips' own warnings (libpng's, libjpeg's) are not printed raw.
            #expect(!result.stderr.contains("VIPS-WARNING"), "\(result.stderr)")
            #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
            #expect(try await cachedCount(scratch) == 0)
        }
    }

    @Test(
        "bad options exit 6 before any request",
        arguments: [
            ["--size", "0x0"], ["--size", "wide"], ["--size", "99999x"], ["--size", "10x", "--mode", "stretch"],
            ["--size", "10x", "--format", "gif"], ["--size", "10x", "--quality", "0"],
            ["--size", "10x", "--background", "mauve-ish"], ["--size", "10x", "--mode", "fit", "--smart-crop"],
            // A value that starts with '-' is the option's value, not an option.
            ["--size", "-5x10"], ["--size", "10x", "--quality", "-1"], ["--size", "10x", "--background", "-1,0,0"],
        ])
    func badOptions(arguments: [String]) async throws {
        try await Self.withOrigin { scratch, origin, script in
            script.set("/a.jpg", try Self.image(width: 20, height: 20))
            let result = try await get(origin.url("/a.jpg").absoluteString, scratch, arguments)
            #expect(result.status == 6, "\(result.stderr)")
            #expect(result.stdout.isEmpty)
            #expect(origin.requestCount(forPath: "/a.jpg") == 0)
        }
    }

    /// A new variant made from an expired original the origin could not refresh: one warning
    /// line, as `cache get` gives for a stale value, and `--info` says where the original came from.
    @Test("a variant made from a stale original says so on stderr and in --info")
    func aStaleOriginalIsAnnounced() async throws {
        try await Self.withOrigin { scratch, origin, script in
            script.set(
                "/s.jpg",
                ScriptedOrigin.Answer(
                    headers: ["Content-Type: image/jpeg", "Cache-Control: max-age=1"],
                    body: try Self.image(width: 60, height: 40)))
            let url = origin.url("/s.jpg").absoluteString
            let first = try await get(url, scratch, ["--size", "10x10", "--info"])
            #expect(first.status == 0, "\(first.stderr)")
            #expect(!first.stderr.contains("stale"))
            try await Task.sleep(for: .milliseconds(1_500))
            script.set("/s.jpg", ScriptedOrigin.Answer(status: 503, body: Data("down".utf8)))
            let second = try await get(url, scratch, ["--size", "20x20", "--info"])
            #expect(second.status == 0, "\(second.stderr)")
            #expect(second.stderr.contains("made from a stale original"), "\(second.stderr)")
            #expect(try info(second)["originalSource"] as? String == "stale")
        }
    }

    /// An original larger than the cache may hold is used and not kept, as `cache get` does with
    /// a value: one warning line, and no variant left behind that no later load could find.
    @Test("an original too large to keep is announced, and its variant is not kept either")
    func anOriginalTooLargeToKeepIsAnnounced() async throws {
        try await Self.withOrigin { scratch, origin, script in
            let original = try Self.image(width: 1600, height: 1200)
            script.set("/big.jpg", original)
            let url = origin.url("/big.jpg").absoluteString
            let limit = original.count / 2

            let made = try await get(url, scratch, ["--size", "10x10", "--info", "--max-size", "\(limit)"])

            #expect(made.status == 0, "\(made.stderr)")
            #expect(made.stderr.contains("the original was not kept in the cache"), "\(made.stderr)")
            #expect(made.stderr.split(separator: "\n").count == 1, "\(made.stderr)")
            #expect(try info(made)["width"] as? Int == 10)
            #expect(try await cachedCount(scratch) == 0, "neither the original nor an unreachable variant")
        }
    }

    @Test("offline with nothing stored exits 8; a 404 exits 22; no origin exits 3; not a URL exits 6")
    func failures() async throws {
        try await Self.withOrigin { scratch, origin, _ in
            let offline = try await get(origin.url("/x.jpg").absoluteString, scratch, ["--size", "10x", "--offline"])
            #expect(offline.status == 8)
            #expect(origin.requestCount(forPath: "/x.jpg") == 0)
            let missing = try await get(origin.url("/missing.jpg").absoluteString, scratch, ["--size", "10x"])
            #expect(missing.status == 22 && missing.stdout.isEmpty)
            let closed = try await get("http://127.0.0.1:9/x.jpg", scratch, ["--size", "10x"])
            #expect(closed.status == 3)
            let notURL = try await get("photo.jpg", scratch, ["--size", "10x"])
            #expect(notURL.status == 6)
        }
    }

    @Test("eight processes asking for one variant download the original once and make the variant once")
    func eightProcesses() async throws {
        try await Self.withOrigin { scratch, origin, script in
            script.set("/big.jpg", try Self.image(width: 2000, height: 1500))
            let url = origin.url("/big.jpg").absoluteString
            // The cache folder exists first, so that no process races to create it.
            _ = try await get(origin.url("/none").absoluteString, scratch, ["--size", "1x"])
            let results = try await withThrowingTaskGroup(of: CommandResult.self) { group in
                for _ in 0..<8 { group.addTask { try await get(url, scratch, ["--size", "300x", "--info"]) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(results.allSatisfy { $0.status == 0 }, "\(results.map(\.stderr))")
            let made = try results.filter { try info($0)["made"] as? Bool == true }.count
            #expect(made == 1)
            #expect(origin.requestCount(forPath: "/big.jpg") == 1)
            let listed = try await SyncAgentBinary.run(
                ["cache", "ls", "--cache", scratch + "/cache"], scratch: scratch)
            #expect(listed.stdout.split(separator: "\n").filter { $0.contains("\t  variant ") }.count == 1)
        }
    }

    @Test("-o writes into a FIFO or device without replacing it, follows a link, refuses a folder")
    func outputTargets() async throws {
        try await Self.withOrigin { scratch, origin, script in
            script.set("/o.jpg", try Self.image(width: 64, height: 64))
            let url = origin.url("/o.jpg").absoluteString
            // A named pipe (as /dev/null or /dev/stdout would be): read while the agent writes.
            let fifo = scratch + "/pipe"
            #expect(mkfifo(fifo, 0o600) == 0)
            let received = Task.detached { () -> Data in
                let handle = FileHandle(forReadingAtPath: fifo)
                return handle?.readDataToEndOfFile() ?? Data()
            }
            let piped = try await get(url, scratch, ["--size", "32x", "-o", fifo])
            #expect(piped.status == 0, "\(piped.stderr)")
            let bytes = await received.value
            #expect(try ImageProbe.header(of: bytes, source: "fifo").width == 32)
            var status = stat()
            #expect(lstat(fifo, &status) == 0 && (status.st_mode & S_IFMT) == S_IFIFO)
            // A link: its target is replaced, the link stays.
            let target = scratch + "/target.jpg"
            try Data("old".utf8).write(to: URL(fileURLWithPath: target))
            #expect(symlink("target.jpg", scratch + "/link.jpg") == 0)
            #expect(try await get(url, scratch, ["--size", "16x", "-o", scratch + "/link.jpg"]).status == 0)
            #expect(lstat(scratch + "/link.jpg", &status) == 0 && (status.st_mode & S_IFMT) == S_IFLNK)
            #expect(try ImageProbe.header(of: Data(contentsOf: URL(fileURLWithPath: target)), source: "t").width == 16)
            // A folder is no file to write.
            let folder = try await get(url, scratch, ["--size", "16x", "-o", scratch])
            #expect(folder.status == 6)
            // cache get shares the rule.
            let cached = try await SyncAgentBinary.run(
                ["cache", "get", url, "--cache", scratch + "/cache", "-o", scratch + "/link.jpg"], scratch: scratch)
            #expect(cached.status == 0)
            #expect(lstat(scratch + "/link.jpg", &status) == 0 && (status.st_mode & S_IFMT) == S_IFLNK)
            #expect(try Data(contentsOf: URL(fileURLWithPath: target)).count > 100)
        }
    }

    @Test("cache ls shows variants under their original; cache rm of the original takes them; stats counts")
    func listing() async throws {
        try await Self.withOrigin { scratch, origin, script in
            script.set("/l.jpg", try Self.image(width: 400, height: 200))
            script.set("/bad.jpg", Data("<html>".utf8))
            let url = origin.url("/l.jpg").absoluteString
            for size in ["100x", "40x40"] { #expect(try await get(url, scratch, ["--size", size]).status == 0) }
            #expect(try await get(url, scratch, ["--size", "100x"]).status == 0)
            #expect(try await get(origin.url("/bad.jpg").absoluteString, scratch, ["--size", "9x"]).status == 4)
            let listed = try await SyncAgentBinary.run(
                ["cache", "ls", "--cache", scratch + "/cache"], scratch: scratch)
            let lines = listed.stdout.split(separator: "\n").map(String.init)
            #expect(lines.count == 3)
            #expect(lines.first?.hasSuffix(url) == true)
            #expect(lines.dropFirst().allSatisfy { $0.contains("\t  variant ") })
            #expect(lines.contains { $0.contains("variant 100x50 jpeg") })
            let stats = try await SyncAgentBinary.run(
                ["cache", "stats", "--cache", scratch + "/cache", "--json"], scratch: scratch)
            let object = try #require(JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [String: Any])
            let images = try #require(object["images"] as? [String: Int])
            #expect(images == ["originals": 1, "variants": 2, "made": 2, "hits": 1, "refusals": 1])
            let removed = try await SyncAgentBinary.run(
                ["cache", "rm", url, "--cache", scratch + "/cache", "--json"], scratch: scratch)
            #expect(removed.stdout.contains("3"))
            #expect(try await cachedCount(scratch) == 0)
        }
    }

    /// An original whose response varies (`Vary: Accept`, common on image CDNs) is stored under
    /// a variant key; its variants belong to it all the same: `cache ls` lists them under it,
    /// and `cache rm` of another URL or `purge --expired` leaves them (they read as orphans and
    /// were deleted, to be made again at the next get).
    @Test func variantsOfAnOriginalThatVariesAreNoOrphans() async throws {
        try await withScratch { scratch in
            let picture = try Self.image(width: 400, height: 200)
            let origin = try ScriptedOrigin { _ in
                ScriptedOrigin.Answer(
                    headers: ["Content-Type: image/jpeg", "Vary: Accept", "Cache-Control: max-age=3600"], body: picture)
            }
            defer { origin.stop() }
            let url = origin.url("/hero.jpg").absoluteString
            #expect(try await get(url, scratch, ["--size", "100x", "--info"]).status == 0)
            #expect(try await cachedCount(scratch) == 2)
            let cache = ["--cache", scratch + "/cache"]
            let other = try await SyncAgentBinary.run(
                ["cache", "rm", origin.url("/other").absoluteString] + cache, scratch: scratch)
            #expect(other.status == 0 && other.stdout.contains("0"), "\(other.stdout)")
            #expect(
                try await SyncAgentBinary.run(["cache", "purge", "--expired"] + cache, scratch: scratch).status == 0)
            #expect(try await cachedCount(scratch) == 2, "the variant was taken for an orphan")
            let listed = try await SyncAgentBinary.run(["cache", "ls"] + cache, scratch: scratch)
            #expect(!listed.stdout.contains("original is gone"), "\(listed.stdout)")
            let again = try info(try await get(url, scratch, ["--size", "100x", "--info"]))
            #expect(again["made"] as? Bool == false, "\(again)")
        }
    }

    @Test("a file of a mirrored folder: read in place, a new version gets a new variant, the old one goes")
    func mirroredFile() async throws {
        try await withScratch { scratch in
            let path = scratch + "/mirror/hero.jpg"
            try FileManager.default.createDirectory(atPath: scratch + "/mirror", withIntermediateDirectories: true)
            try Self.image(width: 400, height: 200).write(to: URL(fileURLWithPath: path))
            let url = URL(fileURLWithPath: path).absoluteString
            let first = try info(try await get(url, scratch, ["--size", "100x", "--info"]))
            #expect(first["height"] as? Int == 50)
            try Self.image(width: 400, height: 400, png: true).write(to: URL(fileURLWithPath: path + ".new"))
            #expect(rename(path + ".new", path) == 0)
            let second = try info(try await get(url, scratch, ["--size", "100x", "--info"]))
            #expect(second["height"] as? Int == 100 && second["format"] as? String == "png")
            #expect(second["key"] as? String != first["key"] as? String)
            #expect(try await cachedCount(scratch) == 1)
            // `cache ls` lists the variant under its file, not among the orphans.
            let listed = try await SyncAgentBinary.run(
                ["cache", "ls", "--cache", scratch + "/cache"], scratch: scratch)
            #expect(listed.status == 0)
            #expect(listed.stdout.contains("\(url) (a mirrored file, read in place)\n"), "\(listed.stdout)")
            #expect(!listed.stdout.contains("original is gone"), "\(listed.stdout)")
        }
    }

    /// The shared libraries `binary` loads, as ldd lists them.
    static func libraries(of binary: String, scratch: String) async throws -> String {
        let out = scratch + "/ldd-\(UUID().uuidString).txt"
        let status = try await ChildProcess.run("/usr/bin/ldd", [binary], stdout: out)
        #expect(status == 0)
        return try String(contentsOfFile: out, encoding: .utf8)
    }

    /// Copies the executable `source` to `destination` through a descriptor no child can inherit
    /// (`O_CLOEXEC`): Foundation's `copyItem` opens it inheritable, and a process another test
    /// started meanwhile (with Foundation's `Process`) kept it open for writing, so starting the
    /// copy failed with ETXTBSY ("Text file busy"; CI, stop 41).
    static func copyExecutable(_ source: String, to destination: String) throws {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: source))
        let fd = open(destination, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o755)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        try bytes.withUnsafeBytes { raw in
            var done = 0
            while done < raw.count {
                let written = write(fd, raw.baseAddress! + done, raw.count - done)
                guard written > 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
                done += written
            }
        }
    }

    /// Starts a just-written executable, retrying while it is "busy": a child another thread
    /// forked while the copy was open holds the descriptor until it execs (microseconds), as Go's
    /// os/exec tests retry for the same reason.
    static func spawnFresh(_ path: String, _ arguments: [String], stdout: String, stderr: String) async throws
        -> ChildProcess
    {
        for attempt in 0..<50 {
            do {
                return try ChildProcess(path, arguments, stdout: stdout, stderr: stderr)
            } catch let error as ChildProcess.SpawnError where error.errno == ETXTBSY && attempt < 49 {
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        preconditionFailure("unreachable: the last attempt throws")
    }

    @Test("sync-agent loads no libvips; image get runs in sync-agent-image beside it, and without it exits 1 naming it")
    func helperBinary() async throws {
        try await Self.withOrigin { scratch, origin, script in
            let agent = SyncAgentBinary.path
            let helper = (agent as NSString).deletingLastPathComponent + "/sync-agent-image"
            #expect(!(try await Self.libraries(of: agent, scratch: scratch)).contains("libvips"))
            #expect(try await Self.libraries(of: helper, scratch: scratch).contains("libvips"))

            // A copy of sync-agent alone in a folder: image get names the missing helper and the fix.
            let alone = scratch + "/alone"
            try FileManager.default.createDirectory(atPath: alone, withIntermediateDirectories: true)
            try Self.copyExecutable(agent, to: alone + "/sync-agent")
            script.set("/photo.jpg", try Self.image(width: 64, height: 64))
            let arguments = [
                "image", "get", origin.url("/photo.jpg").absoluteString, "--cache", scratch + "/cache", "--size", "8x",
            ]
            let out = scratch + "/alone.out"
            let err = scratch + "/alone.err"
            let status = try await Self.spawnFresh(alone + "/sync-agent", arguments, stdout: out, stderr: err)
                .exitStatus()
            let stderr = try String(contentsOfFile: err, encoding: .utf8)
            #expect(status == 1)
            #expect(
                stderr.contains(alone + "/sync-agent-image") && stderr.contains("install it beside sync-agent"),
                "\(stderr)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: out)).isEmpty)
            #expect(!FileManager.default.fileExists(atPath: scratch + "/cache"))

            // The same arguments through the installed pair: the variant, made by the helper.
            let made = try await SyncAgentBinary.run(arguments + ["--info"], scratch: scratch)
            #expect(made.status == 0, "\(made.stderr)")
            #expect(try info(made)["width"] as? Int == 8)
        }
    }

    /// Runs the binary as a user nothing else runs as (so its task count is this run's alone), with at most `tasks` processes and threads when given, for at most 60 s.
    /// Below about 8 tasks the Swift runtime itself can wait for a thread for good.
    func asTaskLimitedUser(_ arguments: [String], scratch: String, tasks: Int?) async throws -> CommandResult {
        // The start-up check would refuse these limits before libvips ran: skipped, to reach it.
        try await SyncAgentBinary.runTaskLimited(
            arguments, scratch: scratch, uid: SyncAgentBinary.unusedUID(slot: 1), tasks: tasks,
            environment: ["SYNC_AGENT_MIN_THREADS": "0"])
    }

    /// glib's "Error creating thread" at a task limit came back as "cannot be decoded" (exit 4,
    /// a refused image), and the pipeline then deleted the stored original as damaged.
    @Test(
        "at a task limit, libvips' failure to make a thread is no refusal: exit 1 naming the limit, and the original stays",
        .enabled(
            if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
                && FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit")))
    func aTaskLimitIsNoRefusal() async throws {
        try await Self.withOrigin { scratch, origin, script in
            script.set("/photo.jpg", try Self.image(width: 2000, height: 1500))
            chmod(scratch, 0o777)
            let url = origin.url("/photo.jpg").absoluteString
            // Offline after the first: the stored original is all there is to make a variant from.
            func get(_ size: Int, tasks: Int?, offline: Bool = true) async throws -> CommandResult {
                try await asTaskLimitedUser(
                    [
                        "image", "get", url, "--cache", scratch + "/cache", "--size", "\(size)x\(size)", "-o",
                        scratch + "/\(size).jpg",
                    ] + (offline ? ["--offline"] : []),
                    scratch: scratch, tasks: tasks)
            }
            let first = try await get(300, tasks: nil, offline: false)
            #expect(first.status == 0, "\(first.stderr)")
            var limited = 0
            // Measured on the 2-core machines: at 10 tasks decoding fails, at 12 encoding does.
            for tasks in [10, 12] {
                let squeezed = try await get(100 + tasks, tasks: tasks)
                #expect(squeezed.status != 4, "a task limit was taken for a damaged image: \(squeezed.stderr)")
                #expect(squeezed.status != 124 && squeezed.status != 137, "it hung at \(tasks) tasks")
                if squeezed.status != 0 {
                    #expect(squeezed.stderr.contains("task limit"), "\(squeezed.stderr)")
                    limited += 1
                }
                let after = try await get(200 + tasks, tasks: nil)
                #expect(after.status == 0, "the stored original was dropped: \(after.stderr)")
            }
            #expect(limited > 0, "no run reached the task limit, so this proves nothing on this machine")
        }
    }
}

extension CacheHTTPCLITests.Script {
    /// Serves `body` at `path` as `type`, fresh for ten minutes.
    func set(_ path: String, _ body: Data, type: String = "image/jpeg") {
        set(path, ScriptedOrigin.Answer(headers: ["Content-Type: \(type)", "Cache-Control: max-age=600"], body: body))
    }
}
