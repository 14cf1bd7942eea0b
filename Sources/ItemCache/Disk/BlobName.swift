/// The name of a blob file, `<2 hex>/<64 hex>-<1…16 hex>`: its shard folder, the SHA-256 of its
/// key, and a random generation.
///
/// Names read back from the index are input (a damaged or hostile row can say
/// `../../victim/id_ed25519`): nothing is opened, linked or unlinked under a name that does not
/// parse here, and only names that parse are ever removed from the folder.
struct BlobName: Hashable, Sendable, CustomStringConvertible {
    /// The shard, 0…255: the first byte of the key's hash.
    let shard: Int
    /// The file's name inside its shard folder: `<64 hex>-<generation hex>`.
    let leaf: String

    /// The name as the index stores it.
    var description: String { Self.shardName(shard) + "/" + leaf }

    /// The shard folder's name, two lower-case hex digits.
    static func shardName(_ shard: Int) -> String {
        let digits = Array("0123456789abcdef")
        return String([digits[shard >> 4], digits[shard & 15]])
    }

    /// A new name for a value of `key`, one no file ever had (the generation is random).
    init(newFor key: CacheKey) {
        let hash = key.fileName
        leaf = hash + "-" + String(UInt64.random(in: 0 ... .max), radix: 16)
        shard = Int(hash.prefix(2), radix: 16)!
    }

    /// The name `text` from the index, or nil when it is not one this cache makes.
    init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard bytes.count >= 2 + 1 + 64 + 1 + 1, bytes.count <= 2 + 1 + 64 + 1 + 16, bytes[2] == UInt8(ascii: "/"),
            let shard = Self.hexValue(bytes[0..<2])
        else { return nil }
        let leaf = String(decoding: bytes[3...], as: UTF8.self)
        guard Self.isLeaf(leaf, inShard: shard) else { return nil }
        self.shard = shard
        self.leaf = leaf
    }

    /// A leaf name found in shard folder `shard`.
    init?(leaf: String, shard: Int) {
        guard Self.isLeaf(leaf, inShard: shard) else { return nil }
        self.shard = shard
        self.leaf = leaf
    }

    /// Whether `leaf` is `<64 hex>-<1…16 hex>` (lower case) whose hash starts with `shard`.
    static func isLeaf(_ leaf: String, inShard shard: Int) -> Bool {
        let bytes = Array(leaf.utf8)
        guard bytes.count >= 66, bytes.count <= 81, bytes[64] == UInt8(ascii: "-"),
            bytes[0..<64].allSatisfy(isLowerHex), bytes[65...].allSatisfy(isLowerHex),
            hexValue(bytes[0..<2]) == shard
        else { return false }
        return true
    }

    /// The shard number of a shard folder's name (`00`…`ff`), or nil.
    static func shard(named name: String) -> Int? {
        let bytes = Array(name.utf8)
        guard bytes.count == 2 else { return nil }
        return hexValue(bytes[0..<2])
    }

    private static func isLowerHex(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f"))
    }

    private static func hexValue(_ pair: ArraySlice<UInt8>) -> Int? {
        guard pair.count == 2, pair.allSatisfy(isLowerHex) else { return nil }
        return Int(String(decoding: pair, as: UTF8.self), radix: 16)
    }
}
