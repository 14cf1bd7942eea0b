import FileKit
import Foundation
import StorageFormat

/// What the last publish knew of the storage's `RXCacheContent/`, by path: each file's
/// ``FileStamp``, its fingerprint, and the identity of the `--content` file it holds the bytes of
/// (``ContentSnapshot/sourceKey(_:)``), so that the next publish neither hashes the published
/// tree again nor opens a file to learn where it came from.
///
/// A record is only ever a shortcut: it is used when the file's stamp (device, inode, size,
/// modification and status-change times) is still the recorded one, which any write to the file
/// breaks. A stale, missing or damaged index costs reading the files again, nothing else. The
/// file ends with the SHA-256 (hex) of what precedes it: a torn or edited index reads as none.
struct PublishIndex: Equatable {
    /// By path (``SafeRelativePath/string``): the records a ``StampLedger`` trusts as they are,
    /// each with the identity of the source file whose bytes it holds, when that was settled.
    var entries: [String: StampLedger.Record] = [:]

    private static let magic = Array("content-sync publish index 1\n".utf8)

    /// The index of `tree` as `stamps` found it (by path): each file's stamp and
    /// fingerprint, and its source from `sources`. A file whose status changed at or after
    /// `settledBefore` (nanoseconds since the epoch) is left out: a write within the clock's
    /// granularity of that change could keep its stamp.
    init(_ tree: ContentTree, stamps: [String: FileStamp], sources: [String: [UInt8]], settledBefore: Int64) {
        entries.reserveCapacity(tree.files.count)
        for (path, fingerprint) in tree.files {
            let text = path.string
            guard let stamp = stamps[text], stamp.changedNanoseconds < settledBefore,
                stamp.identity.size == fingerprint.size
            else { continue }
            entries[text] = StampLedger.Record(stamp: stamp, fingerprint: fingerprint, source: sources[text])
        }
    }

    init() {}

    func encoded() -> [UInt8] {
        var bytes = Self.magic
        bytes.reserveCapacity(Self.magic.count + 4 + entries.count * 180 + 64)
        func put<T: FixedWidthInteger>(_ value: T) {
            withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
        }
        put(UInt32(entries.count))
        for (path, entry) in entries { // any order: the index is read whole into a dictionary
            let name = Array(path.utf8)
            put(UInt16(name.count))
            bytes += name
            put(entry.stamp.identity.device)
            put(entry.stamp.identity.inode)
            put(entry.stamp.identity.size)
            put(entry.stamp.identity.modifiedNanoseconds)
            put(entry.stamp.changedNanoseconds)
            bytes += Array(entry.fingerprint.sha256.utf8)
            let source = entry.source.flatMap { $0.count <= 255 ? $0 : nil } ?? []
            put(UInt8(source.count))
            bytes += source
        }
        bytes += Self.digest(bytes[...])
        return bytes
    }

    /// The index in `bytes`; nil when they are not a whole, intact index of this format.
    static func decode(_ bytes: [UInt8]) -> PublishIndex? {
        guard bytes.count >= magic.count + 4 + 64, bytes.starts(with: magic) else { return nil }
        let body = bytes[..<(bytes.count - 64)]
        guard digest(body) == Array(bytes[(bytes.count - 64)...]) else { return nil }
        var reader = Reader(bytes: body, offset: magic.count)
        guard let count = reader.integer(UInt32.self) else { return nil }
        var index = PublishIndex()
        // No more entries than the bytes can hold (each takes at least 107): a count that lies
        // cannot make the reader allocate.
        index.entries.reserveCapacity(min(Int(count), body.count / 107))
        for _ in 0..<count {
            guard let length = reader.integer(UInt16.self), let name = reader.take(Int(length)),
                let path = String(validating: name, as: UTF8.self), (try? SafeRelativePath(validating: path)) != nil,
                let device = reader.integer(UInt64.self), let inode = reader.integer(UInt64.self),
                let size = reader.integer(Int64.self), size >= 0, let modified = reader.integer(Int64.self),
                let changed = reader.integer(Int64.self), let hex = reader.take(64),
                hex.allSatisfy(HexDigest.isLowerHex), let sourceLength = reader.integer(UInt8.self),
                let source = reader.take(Int(sourceLength))
            else { return nil }
            index.entries[path] = StampLedger.Record(
                stamp: FileStamp(
                    identity: FileIdentity(device: device, inode: inode, size: size, modifiedNanoseconds: modified),
                    changedNanoseconds: changed),
                fingerprint: FileFingerprint(size: size, sha256: String(decoding: hex, as: UTF8.self)),
                source: source.isEmpty ? nil : Array(source))
        }
        guard reader.offset == body.count else { return nil }
        return index
    }

    private static func digest(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        Array(FileDigest.sha256(bytes).utf8)
    }

    private struct Reader {
        let bytes: ArraySlice<UInt8>
        var offset: Int

        mutating func take(_ count: Int) -> ArraySlice<UInt8>? {
            let start = bytes.startIndex + offset
            guard count >= 0, bytes.endIndex - start >= count else { return nil }
            offset += count
            return bytes[start..<(start + count)]
        }

        mutating func integer<T: FixedWidthInteger>(_: T.Type) -> T? {
            guard let raw = take(MemoryLayout<T>.size) else { return nil }
            var value: T = 0
            for (shift, byte) in raw.enumerated() { value |= T(truncatingIfNeeded: byte) << (shift * 8) }
            return value
        }
    }
}
