// swift-tools-version: 6.1
// An app that embeds content-sync: what its Package.swift adds. `make test` loads this manifest
// (scripts/docs/check_manifest.sh) and checks that every product it names exists; the README
// shows the marked lines.
import PackageDescription

let package = Package(
    name: "MyApp",
    platforms: [.macOS(.v15)],
    dependencies: [
        // snippet:begin manifest-dependency
        // A checkout beside your package, or `.package(url: "<your mirror of content-sync>", branch: "main")`.
        .package(path: "../content-sync"),
        // snippet:end manifest-dependency
    ],
    targets: [
        .executableTarget(
            name: "MyApp",
            dependencies: [
                // snippet:begin manifest-products
                .product(name: "ContentSync", package: "content-sync"),    // CacheManager and its configuration
                .product(name: "StorageFormat", package: "content-sync"),  // CacheVersion, the documents' types
                .product(name: "Transport", package: "content-sync"),      // request adapters, your own transport
                // snippet:end manifest-products
            ]),
    ]
)
