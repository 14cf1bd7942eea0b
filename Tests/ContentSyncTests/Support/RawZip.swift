import ContentPublishing
import FileKit
import Foundation
import StorageFormat

/// Builds zip archives byte by byte (stored entries only), so that tests can write what no
/// well-behaved zip library would: names that are not UTF-8, entries that share their bytes,
/// encryption flags without encryption, sizes that lie.
struct RawZip {
    struct Entry {
        var name: [UInt8]
        var data: [UInt8]
        /// Unix `st_mode` for the external attributes.
        var mode: UInt32 = 0o100644
        /// General purpose flags: bit 0 encrypted, bit 11 UTF-8 names.
        var flags: UInt16 = 1 << 11
        /// The uncompressed size the headers declare, when it should not be the real one.
        var declaredSize: UInt32?
        /// The central directory points at another entry's local header (by entry index).
        var sharesLocalHeaderOf: Int?

        init(_ name: String, _ data: String, mode: UInt32 = 0o100644) {
            self.name = Array(name.utf8)
            self.data = Array(data.utf8)
            self.mode = mode
        }

        init(rawName: [UInt8], data: [UInt8], flags: UInt16 = 1 << 11) {
            self.name = rawName
            self.data = data
            self.flags = flags
        }
    }

    var entries: [Entry]

    func bytes() -> Data {
        var out = Data()
        var central = Data()
        var offsets: [UInt32] = []
        for entry in entries {
            let crc = Self.crc32(entry.data)
            let size = entry.declaredSize ?? UInt32(entry.data.count)
            offsets.append(UInt32(out.count))
            out.append(le32: 0x0403_4b50)
            out.append(le16: 20)
            out.append(le16: entry.flags)
            out.append(le16: 0)
            out.append(le16: 0)
            out.append(le16: 0x21)
            out.append(le32: crc)
            out.append(le32: UInt32(entry.data.count))
            out.append(le32: size)
            out.append(le16: UInt16(entry.name.count))
            out.append(le16: 0)
            out.append(contentsOf: entry.name)
            out.append(contentsOf: entry.data)
        }
        for (index, entry) in entries.enumerated() {
            let crc = Self.crc32(entry.data)
            let size = entry.declaredSize ?? UInt32(entry.data.count)
            central.append(le32: 0x0201_4b50)
            central.append(le16: 3 << 8 | 20)
            central.append(le16: 20)
            central.append(le16: entry.flags)
            central.append(le16: 0)
            central.append(le16: 0)
            central.append(le16: 0x21)
            central.append(le32: crc)
            central.append(le32: UInt32(entry.data.count))
            central.append(le32: size)
            central.append(le16: UInt16(entry.name.count))
            central.append(le16: 0)
            central.append(le16: 0)
            central.append(le16: 0)
            central.append(le16: 0)
            central.append(le32: entry.mode << 16)
            central.append(le32: offsets[entry.sharesLocalHeaderOf ?? index])
            central.append(contentsOf: entry.name)
        }
        let centralOffset = UInt32(out.count)
        out.append(central)
        out.append(le32: 0x0605_4b50)
        out.append(le16: 0)
        out.append(le16: 0)
        out.append(le16: UInt16(entries.count))
        out.append(le16: UInt16(entries.count))
        out.append(le32: UInt32(central.count))
        out.append(le32: centralOffset)
        out.append(le16: 0)
        return out
    }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }
}

extension Data {
    fileprivate mutating func append(le16 value: UInt16) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }
    fileprivate mutating func append(le32 value: UInt32) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }
}
