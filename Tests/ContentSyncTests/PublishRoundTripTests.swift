import Foundation
import StorageServer
import Testing
import ToolSupport

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// Random content folders and random edits of them, within the protocol's naming rule (files
/// have an extension, folders have none).
struct RandomTreeWriter {
    var random: SplitMix64
    let root: String
    static let folderNames = ["docs", "media", "a b", "crème", "日本", "deep", "x", "notes"]
    static let fileStems = ["readme", "data", "photo one", "naïve", "表", "index", "z", "config"]
    static let extensions = ["txt", "bin", "json"]
    /// Contents drawn from a small pool now and then, so some files share bytes.
    var pool: [Data] = []

    init(seed: UInt64, root: String) {
        random = SplitMix64(seed: seed)
        self.root = root
    }

    mutating func bytes() -> Data {
        if !pool.isEmpty, Int.random(in: 0..<5, using: &random) == 0 { return pool.randomElement(using: &random)! }
        let data = Data(
            (0..<Int.random(in: 0..<1500, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) })
        if pool.count < 4 { pool.append(data) }
        return data
    }

    func folders() -> [String] {
        var result = [""]
        if let enumerator = FileManager.default.enumerator(atPath: root) {
            while let path = enumerator.nextObject() as? String {
                var isFolder: ObjCBool = false
                if FileManager.default.fileExists(atPath: root + "/" + path, isDirectory: &isFolder), isFolder.boolValue
                {
                    result.append(path)
                }
            }
        }
        return result.sorted()
    }

    func files() -> [String] {
        ((FileManager.default.enumerator(atPath: root)?.allObjects as? [String]) ?? []).filter { path in
            var isFolder: ObjCBool = false
            return FileManager.default.fileExists(atPath: root + "/" + path, isDirectory: &isFolder)
                && !isFolder.boolValue
        }.sorted()
    }

    func join(_ folder: String, _ name: String) -> String { folder.isEmpty ? name : folder + "/" + name }

    mutating func fileName() -> String {
        "\(Self.fileStems.randomElement(using: &random)!)\(Int.random(in: 0..<20, using: &random)).\(Self.extensions.randomElement(using: &random)!)"
    }

    mutating func folderName() -> String {
        "\(Self.folderNames.randomElement(using: &random)!)\(Int.random(in: 0..<5, using: &random))"
    }

    /// A fresh tree: up to 3 levels, 0–40 files, some empty folders.
    mutating func populate() throws {
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        for _ in 0..<Int.random(in: 0...8, using: &random) {
            let parent = folders().filter { $0.split(separator: "/").count < 3 }.randomElement(using: &random)!
            try FileManager.default.createDirectory(
                atPath: root + "/" + join(parent, folderName()), withIntermediateDirectories: true)
        }
        for _ in 0..<Int.random(in: 0...40, using: &random) {
            try addFile()
        }
    }

    mutating func addFile() throws {
        let path = root + "/" + join(folders().randomElement(using: &random)!, fileName())
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) { return }
        try bytes().write(to: URL(fileURLWithPath: path))
    }

    /// One random edit: add, delete, rename, move, edit files; add, delete, rename, move folders.
    mutating func mutate() throws {
        let manager = FileManager.default
        let files = files()
        let folders = folders()
        func free(_ path: String) -> Bool { !manager.fileExists(atPath: root + "/" + path) }
        switch Int.random(in: 0..<12, using: &random) {
        case 0: try addFile()
        case 1: if let file = files.randomElement(using: &random) { try manager.removeItem(atPath: root + "/" + file) }
        case 2:
            if let file = files.randomElement(using: &random) {
                let target = join((file as NSString).deletingLastPathComponent, fileName())
                if free(target) { try manager.moveItem(atPath: root + "/" + file, toPath: root + "/" + target) }
            }
        case 3:
            if let file = files.randomElement(using: &random) {
                let target = join(folders.randomElement(using: &random)!, (file as NSString).lastPathComponent)
                if free(target) { try manager.moveItem(atPath: root + "/" + file, toPath: root + "/" + target) }
            }
        case 4:
            if let file = files.randomElement(using: &random) {
                try bytes().write(to: URL(fileURLWithPath: root + "/" + file))
            }
        case 5:
            let target = join(folders.randomElement(using: &random)!, folderName())
            if free(target) {
                try manager.createDirectory(atPath: root + "/" + target, withIntermediateDirectories: true)
            }
        case 6:
            if let folder = folders.dropFirst().randomElement(using: &random) {
                try manager.removeItem(atPath: root + "/" + folder)
            }
        case 7:
            if let folder = folders.dropFirst().randomElement(using: &random) {
                let target = join((folder as NSString).deletingLastPathComponent, folderName())
                if free(target) { try manager.moveItem(atPath: root + "/" + folder, toPath: root + "/" + target) }
            }
        case 9:
            // Moved and edited: published as one redownload to the new place.
            if let file = files.randomElement(using: &random) {
                let target = join(folders.randomElement(using: &random)!, (file as NSString).lastPathComponent)
                if free(target) {
                    try manager.removeItem(atPath: root + "/" + file)
                    try bytes().write(to: URL(fileURLWithPath: root + "/" + target))
                }
            }
        case 10:
            // Every file of a folder edited: published as one deep folder redownload.
            if let folder = folders.dropFirst().randomElement(using: &random) {
                for file in files where file.hasPrefix(folder + "/") {
                    try bytes().write(to: URL(fileURLWithPath: root + "/" + file))
                }
            }
        case 11:
            // A folder renamed, then a file added inside: published as a move and an add.
            if let folder = folders.dropFirst().randomElement(using: &random) {
                let target = join((folder as NSString).deletingLastPathComponent, folderName())
                if free(target) {
                    try manager.moveItem(atPath: root + "/" + folder, toPath: root + "/" + target)
                    try bytes().write(to: URL(fileURLWithPath: root + "/" + join(target, fileName())))
                }
            }
        default:
            if let folder = folders.dropFirst().randomElement(using: &random) {
                let parent = folders.filter { !$0.hasPrefix(folder) }.randomElement(using: &random) ?? ""
                let target = join(parent, (folder as NSString).lastPathComponent)
                if free(target) && !target.hasPrefix(folder + "/") {
                    try manager.moveItem(atPath: root + "/" + folder, toPath: root + "/" + target)
                }
            }
        }
    }
}

@Suite("Random trees published over several versions mirror byte-identically", .timeLimit(.minutes(10)))
struct PublishRoundTripTests {
    /// Seeds run by `make test`; `SEEDS=2000 swift test --filter PublishRoundTrip` runs a longer pass.
    static let seeds = Int(ProcessInfo.processInfo.environment["SEEDS"] ?? "") ?? 200
    static let versions = ["1.0", "1.1", "1.2"]

    @Test func everySeedSyncsFromScratchAndFromEveryOlderVersion() async throws {
        // This suite checks logic, not the disk: on tmpfs each version's syncfs costs nothing,
        // where the shared ext4 disk spends ~0.1 s on it. The other suites run on the real disk.
        var isFolder: ObjCBool = false
        let onTmpfs = FileManager.default.fileExists(atPath: "/dev/shm", isDirectory: &isFolder) && isFolder.boolValue
        let scratch = (onTmpfs ? "/dev/shm/" : NSTemporaryDirectory()) + "content-sync-roundtrip-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        try await withStorageServer(root: URL(fileURLWithPath: scratch)) { server in
            // Two seeds at a time, each with its own server, so one seed's root never serves another's.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for lane in 0..<2 {
                    group.addTask {
                        try await withStorageServer(root: URL(fileURLWithPath: scratch)) { laneServer in
                            for seed in stride(from: lane, to: Self.seeds, by: 2) {
                                try await roundTrip(
                                    seed: UInt64(seed), scratch: scratch + "/seed\(seed)", server: laneServer)
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            _ = server
        }
    }

    /// A new file without extension (`LICENSE`), which an add would make a folder, is published
    /// as a redownload from a file the version removes; a client replays it and ends with the
    /// new tree, and the removed file is gone.
    @Test func aNewFileWithoutExtensionReachesAReplayingClient() async throws {
        try await withTemporaryDirectory { scratch in
            let content = scratch + "/content"
            try FileManager.default.createDirectory(atPath: content + "/docs", withIntermediateDirectories: true)
            try Data("read me".utf8).write(to: URL(fileURLWithPath: content + "/readme.txt"))
            try Data("old notes".utf8).write(to: URL(fileURLWithPath: content + "/docs/old.txt"))
            var snapshots: [String: URL] = [:]
            var expected: [String: TreeSnapshot] = [:]
            for version in ["1.0", "1.1"] {
                if version == "1.1" {
                    try FileManager.default.removeItem(atPath: content + "/docs/old.txt")
                    try Data("the licence".utf8).write(to: URL(fileURLWithPath: content + "/docs/LICENSE"))
                }
                var options = PublishOptions(
                    storage: scratch + "/storage", content: content, version: v(version),
                    baseURL: URL(string: "https://license.invalid/s/")!)
                options.initialize = version == "1.0"
                let publishing = options
                _ = try await offPool { try Publisher.publish(publishing) }
                try FileManager.default.copyItem(
                    atPath: scratch + "/storage", toPath: scratch + "/published-\(version)")
                snapshots[version] = URL(fileURLWithPath: scratch + "/published-\(version)")
                expected[version] = try TreeSnapshot.read(content)
            }
            let listData = try Data(
                contentsOf: URL(
                    fileURLWithPath: scratch + "/storage/RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json"))
            let list = try #require(try JSONSerialization.jsonObject(with: listData) as? [String: Any])
            let changes = try #require(list["changes"] as? [[String: Any]])
            #expect(changes.count == 1, "one redownload, no remove: \(changes)")
            #expect((changes.first?["newPath"] as? String)?.hasSuffix("RXCacheContent/docs/LICENSE") == true)
            #expect((changes.first?["oldPath"] as? String)?.hasSuffix("RXCacheContent/docs/old.txt") == true)
            #expect(changes.first?["redownload"] as? Bool == true, "\(changes)")
            try await withStorageServer(root: snapshots["1.0"]!) { server in
                let configuration = SyncConfiguration(
                    baseURL: server.baseURL!, contentDirectory: scratch + "/client/content",
                    stateDatabasePath: scratch + "/client/state.sqlite")
                try FileManager.default.createDirectory(atPath: scratch + "/client", withIntermediateDirectories: true)
                #expect(try await CacheManager(configuration: configuration).checkForUpdates().outcome == .restored)
                server.setRoot(snapshots["1.1"]!)
                let report = try await CacheManager(configuration: configuration).checkForUpdates()
                #expect(report.outcome == .replayed)
                #expect(try TreeSnapshot.read(scratch + "/client/content") == expected["1.1"])
                var isFolder: ObjCBool = true
                #expect(
                    FileManager.default.fileExists(
                        atPath: scratch + "/client/content/docs/LICENSE", isDirectory: &isFolder)
                        && !isFolder.boolValue)
            }
        }
    }

    func roundTrip(seed: UInt64, scratch: String, server: StorageServer) async throws {
        let content = scratch + "/content"
        var writer = RandomTreeWriter(seed: seed &* 7919 &+ 1, root: content)
        try writer.populate()
        var snapshots: [String: URL] = [:]
        var expected: [String: TreeSnapshot] = [:]
        for (index, version) in Self.versions.enumerated() {
            if index > 0 {
                for _ in 0..<Int.random(in: 1...6, using: &writer.random) { try writer.mutate() }
            }
            var options = PublishOptions(
                storage: scratch + "/storage", content: content, version: v(version),
                baseURL: URL(string: "https://seed\(seed).invalid/s/")!)
            options.initialize = index == 0
            let publishing = options
            _ = try await offPool { try Publisher.publish(publishing) }
            let snapshot = scratch + "/published-\(version)"
            try FileManager.default.copyItem(atPath: scratch + "/storage", toPath: snapshot)
            snapshots[version] = URL(fileURLWithPath: snapshot)
            expected[version] = try TreeSnapshot.read(content)
        }
        // Clients: one steps through every version; one jumps from each version to the latest.
        func client(_ name: String) -> SyncConfiguration {
            var configuration = SyncConfiguration(
                baseURL: server.baseURL!, contentDirectory: scratch + "/\(name)/content",
                stateDatabasePath: scratch + "/\(name)/state.sqlite")
            configuration.maxConcurrentDownloads = 4
            return configuration
        }
        func sync(_ name: String, to version: String) async throws {
            server.setRoot(snapshots[version]!)
            try FileManager.default.createDirectory(atPath: scratch + "/\(name)", withIntermediateDirectories: true)
            let report = try await CacheManager(configuration: client(name)).checkForUpdates()
            let tree = try TreeSnapshot.read(scratch + "/\(name)/content")
            #expect(
                tree == expected[version],
                "seed \(seed), client \(name) at \(version) (\(report.outcome)): \(tree.difference(from: expected[version]!))"
            )
        }
        for version in Self.versions { try await sync("stepper", to: version) }
        try await sync("fresh", to: Self.versions.last!)
        for start in Self.versions.dropLast() {
            try await sync("from-\(start)", to: start)
            try await sync("from-\(start)", to: Self.versions.last!)
        }
        // Disk space, not an assertion: a state database a manager is still closing may take
        // its -shm file away while the folder is removed.
        try? FileManager.default.removeItem(atPath: scratch)
    }
}
