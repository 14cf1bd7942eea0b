/// Bytes (a file or entry name) as a dictionary or set key, hashed in one call over the whole
/// run. `[UInt8]`'s own `Hashable` feeds the hasher one byte at a time (`Hasher._combine(UInt8)`
/// per byte): for the 7,100 names of S2's archive directory that was about 1 % of the update's
/// CPU, and a publish keys every name of the previous archive and of each folder so.
public struct BytesKey: Hashable, Sendable {
    /// The name's bytes, as given.
    public let bytes: [UInt8]

    /// The key of `bytes` (the array is shared, not copied).
    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    public func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.bytes == rhs.bytes
    }
}
