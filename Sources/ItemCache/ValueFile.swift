import FileKit
import Foundation
import Synchronization

/// A value that moves as an open file rather than as one `Data`: the body of a large response
/// (staged by ``HTTPFetcher`` in the cache folder) or a large stored value (its blob, opened
/// and checked). Values larger than ``MemoryLimits/itemBytes`` travel this way inside the
/// loader; ``ItemLoader/value(for:parameters:varyingHeaders:context:options:)`` hands them
/// over, so a 256 MiB item is never held in memory whole.
///
/// The file stays open, and so readable, while this object lives, even when the cache evicts or
/// replaces the value meanwhile. Every read checks the bytes against the checksum taken when
/// the file was checked: a file another process changed since is an error, never a torn value.
public final class ValueFile: Sendable {
    /// The value's size in bytes.
    public let size: Int64
    /// The CRC-32C the bytes had when the file was checked.
    let checksum: UInt32
    /// An open, read-only descriptor (read it with `pread`: its offset is shared). Valid while
    /// this object lives; it is closed when it goes, so never close it yourself (the number could
    /// then name another file when this object closes it, or reads it).
    public let descriptor: Int32
    /// What messages call it.
    let shownAs: String
    /// The unnamed file a fetch staged, until the cache names it (``link(in:as:shownAs:)``).
    private let unnamed: UnnamedFileBox?
    /// The bytes once ``data()`` read them: the callers one fetch served share one copy.
    private let read = Mutex<Data?>(nil)

    /// The code of a read that finds other bytes: ``ItemCacheError/Code/storage`` for a value
    /// in the cache folder, ``ItemCacheError/Code/fetch`` for a source read where it is (a
    /// `file://` item the cache could not keep).
    let changedCode: ItemCacheError.Code

    /// An open file the caller hands over (it is closed with this object), of `size` bytes whose
    /// CRC-32C is `checksum`; `changedCode` is the code of a read that finds other bytes.
    init(
        descriptor: Int32, size: Int64, checksum: UInt32, shownAs: String,
        changedCode: ItemCacheError.Code = .storage
    ) {
        (self.descriptor, self.size, self.checksum, self.shownAs, self.unnamed, self.changedCode) = (
            descriptor, size, checksum, shownAs, nil, changedCode
        )
    }

    /// A staged body: `file`, of `size` bytes whose CRC-32C is `checksum`
    /// (``checksum(of:size:shownAs:)``).
    init(staged file: consuming UnnamedFile, size: Int64, checksum: UInt32, shownAs: String) {
        (self.descriptor, self.size, self.checksum, self.shownAs) = (file.descriptor, size, checksum, shownAs)
        unnamed = UnnamedFileBox(file)
        changedCode = .storage
    }

    /// The CRC-32C of the first `size` bytes of `descriptor`, read in chunks (blocks: call it on
    /// the I/O pool); throws when they cannot be read whole.
    static func checksum(of descriptor: Int32, size: Int64, shownAs: String) throws(FileSystemError) -> UInt32 {
        var crc: UInt32 = 0
        let read = try DescriptorIO.forEachChunk(of: descriptor, limit: size, path: shownAs) { chunk in
            crc = CRC32C.checksum(chunk, continuing: crc)
            return true
        }
        guard read == size else {
            throw FileSystemError("cannot read all of", path: shownAs, syscall: "pread", errno: EIO)
        }
        return crc
    }

    deinit {
        // A staged file's descriptor belongs to its UnnamedFile, which closes it.
        if unnamed == nil { close(descriptor) }
    }

    /// Whether this is a staged body that has no name yet.
    var isStaged: Bool { unnamed != nil }

    /// Names the staged file `name` in the open folder `folder` (with `mode`, and flushed first
    /// when `flush`); throws for a file that is not a staged one.
    func link(in folder: Int32, as name: String, mode: mode_t, flush: Bool, shownAs path: String)
        throws(FileSystemError)
    {
        guard let unnamed else {
            throw FileSystemError(
                "cannot name a value that is no staged file", path: path, syscall: "linkat", errno: EINVAL)
        }
        if fchmod(descriptor, mode) != 0 {
            throw FileSystemError("cannot set the mode of", path: path, syscall: "fchmod", errno: errno)
        }
        if flush, fsync(descriptor) != 0 {
            throw FileSystemError("cannot flush", path: path, syscall: "fsync", errno: errno)
        }
        try unnamed.file.link(in: folder, as: name, shownAs: path)
    }

    /// Reads the bytes in chunks of at most `chunkSize`, passing each to `body` in order; throws
    /// ``ItemCacheError/Code/storage`` when the file no longer holds the bytes it was checked
    /// with (after the last chunk: a caller writing somewhere atomic discards what it wrote).
    public func forEachChunk(size chunkSize: Int = 1 << 20, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        var crc: UInt32 = 0
        var failure: (any Error)?
        let read: Int64
        do {
            read = try DescriptorIO.forEachChunk(of: descriptor, limit: size, chunkSize: chunkSize, path: shownAs) {
                chunk in
                crc = CRC32C.checksum(chunk, continuing: crc)
                do {
                    try body(chunk)
                    return true
                } catch {
                    failure = error
                    return false
                }
            }
        } catch {
            throw ItemCacheError(code: changedCode, message: "cannot read \(shownAs): \(error)", underlying: error)
        }
        if let failure { throw failure }
        guard read == size, crc == checksum else {
            throw ItemCacheError(
                code: changedCode,
                message:
                    "\(shownAs) changed on disk after it was checked (\(read) of \(size) bytes read, another checksum); load it again"
            )
        }
    }

    /// The whole value as one `Data` (checked): for a caller that wants the bytes in memory after
    /// all. Read once: later calls (the other callers of one fetch) share that copy.
    public func data() throws(ItemCacheError) -> Data {
        guard size <= Int64(Int.max) else {
            throw ItemCacheError(code: .tooLarge, message: "\(shownAs) has \(size) bytes, more than memory can address")
        }
        return try read.withLock { (cached: inout Data?) throws(ItemCacheError) -> Data in
            if let cached { return cached }
            var data = Data(capacity: Int(size))
            do {
                try forEachChunk { data.append(contentsOf: $0) }
            } catch let error as ItemCacheError {
                throw error
            } catch {
                throw ItemCacheError(code: .storage, message: "cannot read \(shownAs): \(error)", underlying: error)
            }
            cached = data
            return data
        }
    }
}

extension ValueFile: Equatable {
    /// The same open file.
    public static func == (lhs: ValueFile, rhs: ValueFile) -> Bool { lhs === rhs }
}

/// Holds an ``UnnamedFile`` (noncopyable) where a class's stored property must be optional.
private final class UnnamedFileBox: Sendable {
    let file: UnnamedFile
    init(_ file: consuming UnnamedFile) { self.file = file }
}
