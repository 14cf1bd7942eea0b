import Testing

@testable import FileKit

@Suite("Byte keys hash a name in one call and compare by bytes")
struct BytesKeyTests {
    /// Names that differ by a byte, a length, a trailing zero or a prefix are different keys;
    /// the same bytes in another array are the same key, with the same hash.
    @Test func keysAreEqualExactlyWhenTheirBytesAre() {
        let names: [[UInt8]] = [
            [], [0], [0, 0], Array("a".utf8), Array("a/".utf8), Array("ab".utf8), Array("ba".utf8),
            Array("RXCacheContent/a.txt".utf8), Array("RXCacheContent/a.txt".utf8) + [0], [0xFF, 0xFE],
        ]
        var table: [BytesKey: Int] = [:]
        for (index, name) in names.enumerated() { table[BytesKey(name)] = index }
        #expect(table.count == names.count)
        for (index, name) in names.enumerated() {
            let copy = Array(name) // another array, the same bytes
            #expect(table[BytesKey(copy)] == index)
            #expect(BytesKey(copy).hashValue == BytesKey(name).hashValue)
        }
        #expect(table[BytesKey(Array("abc".utf8))] == nil)
    }
}
