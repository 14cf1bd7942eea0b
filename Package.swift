// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "content-sync",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "ContentSync", targets: ["ContentSync"]),
        .library(name: "ContentPublishing", targets: ["ContentPublishing"]),
        .library(name: "StorageFormat", targets: ["StorageFormat"]),
        .library(name: "FileKit", targets: ["FileKit"]),
        .library(name: "Transport", targets: ["Transport"]),
        .library(name: "ItemCache", targets: ["ItemCache"]),
        .library(name: "ImageCache", targets: ["ImageCache"]),
        .library(name: "StorageServer", targets: ["StorageServer"]),
        .executable(name: "sync-agent", targets: ["SyncAgentMain"]),
        // `sync-agent image` runs it (installed beside sync-agent): the one binary that loads libvips.
        .executable(name: "sync-agent-image", targets: ["SyncAgentImage"]),
        .executable(name: "content-sync-fuzz", targets: ["ContentSyncFuzz"]),
        .executable(name: "cache-bench", targets: ["CacheBench"]),
        .executable(name: "cache-chaos", targets: ["CacheChaos"]),
        .executable(name: "fleet-sim", targets: ["FleetSim"]),
        .executable(name: "image-bench", targets: ["ImageBench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.4.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.0.0"),
        .package(url: "https://github.com/apple/swift-crypto", "3.0.0"..<"5.0.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.6.0"),
        // The daemon's config file (YAML: every node keeps its line, so errors name it) and its /metrics.
        .package(url: "https://github.com/jpsim/Yams", from: "6.0.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.0.0"),
        // Only `make docs` uses it (swift package generate-documentation); nothing links it.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.4.0"),
    ],
    targets: [
        // Thin C shims: typed, non-variadic wrappers, every symbol prefixed.
        .systemLibrary(name: "CCurl", path: "Sources/CCurl", pkgConfig: "libcurl",
                       providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(name: "CZip", path: "Sources/CZip", pkgConfig: "libzip",
                       providers: [.apt(["libzip-dev"])]),
        // libvips, for ImageCache alone: an app that only needs items never links it.
        .systemLibrary(name: "CVips", path: "Sources/CVips", pkgConfig: "vips",
                       providers: [.apt(["libvips-dev"])]),
        // zlib, for Transport's own content decoding (libcurl's takes a stream cut short as whole).
        .systemLibrary(name: "CZlib", path: "Sources/CZlib", pkgConfig: "zlib",
                       providers: [.apt(["zlib1g-dev"])]),
        .target(name: "CLinux", path: "Sources/CLinux"),
        // Starting programs with posix_spawn (ChildProcess): the daemon's hooks, rclone, the test
        // server's gzip, the tests. Not Foundation's Process, which can crash on Linux.
        .target(name: "ProcessKit", dependencies: ["CLinux", "ThreadKit"]),

        // Exact readers of dates (no field rolls over): HTTPDate's pieces and RFC 3339's date-time.
        .target(name: "DateText"),
        // Threads made with pthread_create, so that a failure to make one is seen.
        .target(name: "ThreadKit", dependencies: ["CLinux"]),
        .target(name: "Transport",
                dependencies: ["CCurl", "CZlib", "DateText", "PercentDecoding", "ThreadKit", .product(name: "Logging", package: "swift-log")]),
        // Generic file primitives for both products: the bounded I/O pool, tree walks and removal,
        // atomic publication, hashing, safe relative paths. Errors keep syscall, errno and path.
        .target(name: "FileKit",
                dependencies: ["CLinux", "ThreadKit", .product(name: "Crypto", package: "swift-crypto")]),
        .target(name: "Archive", dependencies: ["CZip", "CLinux", "FileKit", "ThreadKit"]),
        // Byte-exact percent-decoding, shared by the client's change paths and the test server.
        .target(name: "PercentDecoding"),
        // Seeded randomness (SplitMix64) and `--name value` options for the test server, the tests and
        // the cache-bench and cache-chaos tools: one copy of each.
        .target(name: "ToolSupport"),
        // The protocol's documents and their meaning: what the client reads and the publisher writes.
        .target(name: "StorageFormat",
                dependencies: ["FileKit", "PercentDecoding", "DateText", "CLinux",
                               .product(name: "Crypto", package: "swift-crypto")]),
        // Opening a WAL database that several processes create and migrate at once: the client's
        // state database and the item cache's index.
        .target(name: "DatabaseKit", dependencies: [.product(name: "GRDB", package: "GRDB.swift"),
                                                    .product(name: "GRDBSQLite", package: "GRDB.swift")]),
        // The client: manager, planner, staging, state and the update roles.
        .target(name: "ContentSync",
                dependencies: ["Transport", "Archive", "FileKit", "StorageFormat", "CLinux", "DatabaseKit", "ThreadKit",
                               .product(name: "Logging", package: "swift-log"),
                               .product(name: "GRDB", package: "GRDB.swift")]),
        // The item cache: memory and disk tiers, fetching with HTTP freshness, providers,
        // queries. It shares Transport, FileKit and DatabaseKit with the client and never depends
        // on ContentSync.
        .target(name: "ItemCache",
                dependencies: ["Transport", "FileKit", "DatabaseKit", "DateText", "PercentDecoding",
                               .product(name: "Logging", package: "swift-log"),
                               .product(name: "Metrics", package: "swift-metrics"),
                               .product(name: "GRDB", package: "GRDB.swift"),
                               // The C API: the get path's own connection (IndexReader), the WAL hook (WALCheckpointer).
                               .product(name: "GRDBSQLite", package: "GRDB.swift")]),
        // The publisher: differ, storage writer, journal and signing. Sync-only apps do not link it.
        // Image variants on libvips, on top of the item cache (issue 22).
        // What `sync-agent cache` reads of images (contexts, groups, metadata, counts) without libvips.
        .target(name: "ImageCatalog", dependencies: ["ItemCache"]),
        .target(name: "ImageCache", dependencies: ["ImageCatalog", "ItemCache", "CVips", "FileKit", "Transport",
                                                   .product(name: "Metrics", package: "swift-metrics")]),
        .target(name: "ContentPublishing",
                dependencies: ["Archive", "CLinux", "FileKit", "StorageFormat", "DateText", "ThreadKit",
                               .product(name: "Crypto", package: "swift-crypto")]),
        .target(name: "StorageServer",
                dependencies: ["PercentDecoding", "ProcessKit", "ThreadKit", "ToolSupport", "Transport"]),
        // The daemon's shell around the client: the config file, the per-storage poll loop and its
        // schedule, hooks, metrics and the health endpoint. `sync-agent watch` and the fleet
        // simulation run it; it logs at info (it is the agent, not a library).
        .target(name: "SyncDaemon",
                dependencies: ["ContentSync", "StorageFormat", "Transport", "FileKit", "ProcessKit", "CLinux", "DateText", "ThreadKit",
                               .product(name: "Logging", package: "swift-log"),
                               .product(name: "Metrics", package: "swift-metrics"),
                               .product(name: "Prometheus", package: "swift-prometheus"),
                               .product(name: "Yams", package: "Yams"),
                               .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")]),
        // The commands of sync-agent (and of sync-agent-image, which adds how `image get` makes a
        // variant): a library so that the two binaries share one command line.
        .target(name: "SyncAgent",
                          dependencies: ["SyncDaemon", "ContentSync", "ContentPublishing", "StorageFormat", "FileKit", "CLinux", "StorageServer", "ProcessKit", "Transport", "ItemCache", "ImageCatalog", "DateText", "ThreadKit",
                                         .product(name: "ArgumentParser", package: "swift-argument-parser"),
                                         .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                                         .product(name: "Crypto", package: "swift-crypto"),
                                         .product(name: "Logging", package: "swift-log")]),

        // sync-agent: every command but `image get`'s work, which it execs sync-agent-image for, so
        // that no other command loads libvips' ~100 shared libraries. Not a dependency of
        // SyncAgentMain: SwiftPM would link its libraries (ImageCache, libvips) into sync-agent too;
        // `swift build` builds both, and the Makefile names both products.
        .executableTarget(name: "SyncAgentMain", dependencies: ["SyncAgent"]),
        .executableTarget(name: "SyncAgentImage", dependencies: ["SyncAgent", "ImageCache", "ItemCache", "FileKit", "Transport",
                                                                 .product(name: "ArgumentParser", package: "swift-argument-parser")]),

        // The fuzz checks, shared by the libFuzzer target (`make fuzz`) and the corpus replay test.
        .target(name: "ContentSyncFuzzing", dependencies: ["StorageFormat", "FileKit", "Transport", "ItemCache", "DateText"]),
        .executableTarget(name: "ContentSyncFuzz", dependencies: ["ContentSyncFuzzing"]),
        // Times ItemCache for bench/cache_bench.py (`make bench-cache`).
        .executableTarget(name: "CacheBench", dependencies: ["ItemCache", "FileKit", "Transport", "StorageServer", "ToolSupport"]),
        // Times ImagePipeline for bench/images_bench.py (`make bench-images`).
        .executableTarget(name: "ImageBench", dependencies: ["ImageCache", "ItemCache", "ToolSupport"]),
        // Test support: the writers, readers and checker of the cache's crash tests and kill loop (`make chaos`).
        .executableTarget(name: "CacheChaos", dependencies: ["ItemCache", "FileKit", "ToolSupport", .product(name: "GRDB", package: "GRDB.swift")]),
        // N in-process agents polling one storage on one transport, for bench/fleet/fleet_sim.py (`make bench-fleet`).
        .executableTarget(name: "FleetSim", dependencies: ["ContentSync", "SyncDaemon", "StorageFormat", "Transport", "ToolSupport",
                                                          .product(name: "Logging", package: "swift-log")]),

        .testTarget(name: "TransportTests", dependencies: ["Transport", "DateText", "StorageServer", "ToolSupport",
                                                           .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "FileKitTests", dependencies: ["FileKit", "CLinux"]),
        // CacheChaos: CacheCrashTests run the built cache-chaos binary; the dependency builds it first.
        .testTarget(name: "ItemCacheTests", dependencies: ["ItemCache", "FileKit", "Transport", "StorageServer", "CacheChaos", "ToolSupport",
                                                           .product(name: "Metrics", package: "swift-metrics"),
                                                           .product(name: "MetricsTestKit", package: "swift-metrics"),
                                                           .product(name: "GRDB", package: "GRDB.swift")]),
        // The README's and the DocC catalogs' Swift examples, compiled and run (scripts/docs/check_snippets.py
        // checks that the documents show exactly these regions).
        .testTarget(name: "DocumentationExamples",
                    dependencies: ["ContentSync", "StorageFormat", "Transport", "StorageServer", "ItemCache", "ImageCache"]),
        .testTarget(name: "ImageCacheTests", dependencies: ["ImageCache", "ItemCache", "CVips", "StorageServer", "Transport", "FileKit",
                                                            .product(name: "Metrics", package: "swift-metrics"),
                                                            .product(name: "MetricsTestKit", package: "swift-metrics")]),
        .testTarget(name: "ArchiveTests", dependencies: ["Archive", "FileKit", "StorageServer"]),
        .testTarget(name: "StorageServerTests", dependencies: ["StorageServer", "ToolSupport", "Transport"]),
        // Runs the built sync-agent and sync-agent-image binaries; the dependencies make sure they are built first.
        .testTarget(name: "SyncAgentTests", dependencies: ["SyncAgent", "ProcessKit", "SyncAgentMain", "SyncAgentImage", "SyncDaemon", "ContentSync", "StorageServer", "CLinux", "ImageCache", "CVips", "ItemCache", "ThreadKit", "Transport"]),
        .testTarget(name: "SyncDaemonTests", dependencies: ["SyncDaemon", "ProcessKit", "ThreadKit", "ContentSync", "ContentPublishing", "StorageFormat", "StorageServer", "Transport",
                                                            .product(name: "Logging", package: "swift-log"),
                                                            .product(name: "Metrics", package: "swift-metrics"),
                                                            .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
                                                            .product(name: "Yams", package: "Yams")]),
        .testTarget(name: "ContentSyncTests",
                    dependencies: ["ContentSync", "ContentPublishing", "StorageFormat", "FileKit", "ContentSyncFuzzing", "Transport", "Archive",
                                   "StorageServer", "PercentDecoding", "ToolSupport", "ThreadKit",
                                   // SpareFilesTests holds and breaks the lease a spare's check takes.
                                   "CLinux",
                                   .product(name: "Crypto", package: "swift-crypto"),
                                   // SecretURLTests writes a state database as an older version left it.
                                   .product(name: "GRDB", package: "GRDB.swift")]),
    ]
)
