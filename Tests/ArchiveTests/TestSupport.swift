import Foundation
import StorageServer
import Testing

@testable import Archive
@testable import FileKit

/// Runs `body` with a fresh empty folder that is removed afterwards.
func withTemporaryDirectory<T>(_ body: (String) throws -> T) throws -> T {
    let template = FileManager.default.temporaryDirectory.path + "/archive-tests.XXXXXX"
    var buffer = Array(template.utf8CString)
    guard let made = mkdtemp(&buffer) else { throw POSIXError(.EIO) }
    let dir = String(cString: made)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    return try body(dir)
}

/// The async variant of ``withTemporaryDirectory(_:)``.
func withTemporaryDirectory<T>(_ body: (String) async throws -> T) async throws -> T {
    let template = FileManager.default.temporaryDirectory.path + "/archive-tests.XXXXXX"
    var buffer = Array(template.utf8CString)
    guard let made = mkdtemp(&buffer) else { throw POSIXError(.EIO) }
    let dir = String(cString: made)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    return try await body(dir)
}

/// One node of a folder tree as the tests compare it.
enum Node: Equatable, CustomStringConvertible {
    case folder
    case file([UInt8])
    case symlink
    case other

    var description: String {
        switch self {
        case .folder: "folder"
        case .file(let bytes): "file(\(bytes.count) bytes)"
        case .symlink: "symlink"
        case .other: "other"
        }
    }
}

/// Every path under `root` (relative, `/`-separated) with what it is and, for files, its bytes.
func snapshot(_ root: String) throws -> [String: Node] {
    var result: [String: Node] = [:]
    for relative in try FileManager.default.subpathsOfDirectory(atPath: root) {
        let full = root + "/" + relative
        var info = stat()
        guard lstat(full, &info) == 0 else { throw POSIXError(.EIO) }
        switch info.st_mode & S_IFMT {
        case S_IFDIR: result[relative] = .folder
        case S_IFREG: result[relative] = .file(try readFile(full))
        case S_IFLNK: result[relative] = .symlink
        default: result[relative] = .other
        }
    }
    return result
}

/// The total size of the regular files under `root`.
func bytesOnDisk(_ root: String) throws -> Int {
    try snapshot(root).values.reduce(0) { sum, node in
        if case .file(let bytes) = node { return sum + bytes.count }
        return sum
    }
}

func readFile(_ path: String) throws -> [UInt8] {
    [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
}

func write(_ contents: [UInt8], to path: String) throws {
    try FileManager.default.createDirectory(
        atPath: (path as NSString).deletingLastPathComponent,
        withIntermediateDirectories: true)
    try Data(contents).write(to: URL(fileURLWithPath: path))
}

func makeFolder(_ path: String) throws {
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
}

/// Deterministic pseudo-random bytes, so binary content covers every byte value.
func noise(_ count: Int, seed: UInt64) -> [UInt8] {
    var state = seed &+ 0x9E37_79B9_7F4A_7C15
    return (0..<count).map { _ in
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return UInt8(truncatingIfNeeded: state >> 33)
    }
}

extension ZipExtractionOptions {
    /// Generous limits for archives the tests trust; one central-directory record per libzip
    /// handle, so every test that extracts with them crosses windows (CentralDirectoryWindows).
    static let roomy: ZipExtractionOptions = {
        var options = ZipExtractionOptions(maxTotalBytes: 1 << 30)
        options.centralDirectoryWindow = 1
        return options
    }()
}

/// Runs a command-line tool and returns its exit status.
@discardableResult
func run(_ tool: String, _ arguments: [String], in directory: String) throws -> Int32 {
    // ChildProcess, not Foundation's Process (see its documentation); `env -C` sets the folder.
    try ChildProcess("/usr/bin/env", ["-C", directory, tool] + arguments).waitBlocking()
}

let zipToolIsInstalled = FileManager.default.isExecutableFile(atPath: "/usr/bin/zip")

/// Edits the headers of a zip file in place, to craft archives no honest writer makes.
struct ZipPatcher {
    var bytes: [UInt8]

    init(path: String) throws { bytes = try readFile(path) }

    func save(to path: String) throws { try Data(bytes).write(to: URL(fileURLWithPath: path)) }

    private func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
    private func u32(_ at: Int) -> Int { u16(at) | u16(at + 2) << 16 }
    private mutating func setU32(_ at: Int, _ value: UInt32) {
        for shift in 0..<4 { bytes[at + shift] = UInt8(truncatingIfNeeded: value >> (8 * UInt32(shift))) }
    }

    /// (central header offset, local header offset, name) for every entry.
    private var entries: [(central: Int, local: Int, name: [UInt8])] {
        guard
            let end = stride(from: bytes.count - 22, through: 0, by: -1).first(where: {
                bytes[$0] == 0x50 && bytes[$0 + 1] == 0x4B && bytes[$0 + 2] == 5 && bytes[$0 + 3] == 6
            })
        else { return [] }
        var offset = u32(end + 16)
        var result: [(Int, Int, [UInt8])] = []
        for _ in 0..<u16(end + 10) {
            let nameLength = u16(offset + 28)
            let name = Array(bytes[(offset + 46)..<(offset + 46 + nameLength)])
            result.append((offset, u32(offset + 42), name))
            offset += 46 + nameLength + u16(offset + 30) + u16(offset + 32)
        }
        return result
    }

    /// Entry names in central-directory order, read straight from the bytes.
    var names: [String] { entries.map { String(decoding: $0.name, as: UTF8.self) } }

    private func entry(_ name: String) -> (central: Int, local: Int, name: [UInt8]) {
        entries.first { $0.name == Array(name.utf8) }!
    }

    /// Sets the inflated size that both headers declare for `name`.
    mutating func setDeclaredSize(of name: String, to size: UInt32) {
        let found = entry(name)
        setU32(found.central + 24, size)
        setU32(found.local + 22, size)
    }

    /// Renames an entry in both headers; the new name must have the same length in bytes.
    mutating func rename(_ name: String, to newName: [UInt8]) {
        let found = entry(name)
        precondition(newName.count == found.name.count)
        bytes.replaceSubrange((found.central + 46)..<(found.central + 46 + newName.count), with: newName)
        bytes.replaceSubrange((found.local + 30)..<(found.local + 30 + newName.count), with: newName)
    }

    /// Renames an entry in its local header only (same length), so the headers disagree.
    mutating func renameLocally(_ name: String, to newName: [UInt8]) {
        let found = entry(name)
        precondition(newName.count == found.name.count)
        bytes.replaceSubrange((found.local + 30)..<(found.local + 30 + newName.count), with: newName)
    }

    /// Gives the archive a comment: its length in the end record, its bytes after it.
    mutating func setComment(_ comment: [UInt8]) {
        let end = stride(from: bytes.count - 22, through: 0, by: -1).first(where: {
            bytes[$0] == 0x50 && bytes[$0 + 1] == 0x4B && bytes[$0 + 2] == 5 && bytes[$0 + 3] == 6
        })!
        bytes.removeSubrange((end + 22)...)
        bytes[end + 20] = UInt8(comment.count & 0xFF)
        bytes[end + 21] = UInt8(comment.count >> 8)
        bytes += comment
    }

    /// Flips the first data byte of a stored entry, so its CRC no longer matches.
    mutating func corruptData(of name: String) {
        let found = entry(name)
        let data = found.local + 30 + u16(found.local + 26) + u16(found.local + 28)
        bytes[data] ^= 0xFF
    }
}
