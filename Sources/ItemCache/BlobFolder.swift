import FileKit
import Foundation

/// The files of values too big to sit inline in the index: `blobs/<2 hex>/<key hash>-<generation>`.
///
/// A file is written whole without a name (`O_TMPFILE`), then linked under a name no other file
/// ever had (the generation is random), so a name always holds one complete, immutable value. A
/// replaced or evicted value's file is unlinked after its index row is gone; a reader that opened
/// it before keeps reading the old bytes, whole.
struct BlobFolder: Sendable {
    let root: String
    let durability: CacheDurability

    init(root: String, durability: CacheDurability) {
        self.root = root
        self.durability = durability
    }

    /// A new, unused name for a value of `key`: `<2 hex>/<hash>-<16 hex>`.
    func newName(for key: CacheKey) -> String {
        let hash = key.fileName
        return "\(hash.prefix(2))/\(hash)-\(String(UInt64.random(in: 0 ... .max), radix: 16))"
    }

    func path(_ name: String) -> String { root + "/" + name }

    /// Writes `data` as the file `name`, complete (and flushed, with ``CacheDurability/full``)
    /// before it has the name.
    func write(_ data: Data, as name: String) throws(FileSystemError) {
        let path = path(name)
        let folder = (path as NSString).deletingLastPathComponent
        var made = false
        while true {
            if let file = UnnamedFile(in: folder) {
                try DescriptorIO.write(data, to: file.descriptor, path: path)
                if durability == .full, fsync(file.descriptor) != 0 {
                    throw FileSystemError("cannot flush", path: path, syscall: "fsync", errno: errno)
                }
                try file.link(as: path)
                if durability == .full { FileSystem.syncFolder(folder) }
                return
            }
            if !made && !FileSystem.exists(folder) {
                try FileSystem.makeFolder(folder)
                made = true
                continue
            }
            // No O_TMPFILE here: a named file beside it, renamed into place (reconciliation
            // removes one a crash leaves behind).
            try AtomicFile.write(data, to: path, durability: durability == .full ? .full : .none)
            return
        }
    }

    /// The bytes of file `name` when it holds exactly `size` bytes; nil when it is missing or
    /// has another size (a power loss cut it short).
    func read(_ name: String, size: Int64) throws(FileSystemError) -> Data? {
        let path = path(name)
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            if errno == ENOENT { return nil }
            throw FileSystemError("cannot open the cached value", path: path, syscall: "open", errno: errno)
        }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw FileSystemError("cannot inspect the cached value", path: path, syscall: "fstat", errno: errno)
        }
        guard Int64(status.st_size) == size else { return nil }
        let data = try DescriptorIO.read(descriptor, count: Int(size), path: path)
        return data.count == Int(size) ? data : nil
    }

    /// Unlinks the file `name`; a missing one is fine.
    func remove(_ name: String) {
        unlink(path(name))
    }

    /// Every file name below the root (`<2 hex>/<name>`), temporary ones included.
    func allNames() -> [String] {
        var names: [String] = []
        guard let shards = try? FileManager.default.contentsOfDirectory(atPath: root) else { return [] }
        for shard in shards {
            guard let files = try? FileManager.default.contentsOfDirectory(atPath: root + "/" + shard) else { continue }
            names += files.map { shard + "/" + $0 }
        }
        return names
    }

    /// The size of file `name`, or nil when there is none.
    func size(of name: String) -> Int64? {
        var status = stat()
        return stat(path(name), &status) == 0 ? Int64(status.st_size) : nil
    }
}
