import FileKit
import Foundation
import Testing

/// The shared write-all and read-all loops, on a real file.
@Suite("DescriptorIO writes every region and reads back what the file holds")
struct DescriptorIOTests {
    @Test(arguments: [0, 1, 4096, 1 << 20 | 17])
    func roundTrip(size: Int) throws {
        let path = NSTemporaryDirectory() + "descriptor-io-\(UUID().uuidString)"
        defer { unlink(path) }
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0o644)
        #expect(fd >= 0)
        defer { close(fd) }
        let bytes = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        // Two regions: every region is written, in order.
        var regions = DispatchData.empty
        bytes.prefix(size / 2).withUnsafeBytes { regions.append($0) }
        bytes.dropFirst(size / 2).withUnsafeBytes { regions.append($0) }
        try DescriptorIO.write(regions, to: fd, path: path)
        #expect(try DescriptorIO.read(fd, count: size, path: path) == bytes)
        // Asking for more than the file holds returns what it holds.
        #expect(try DescriptorIO.read(fd, count: size + 100, path: path) == bytes)
    }

    @Test(
        "a negative count or offset (a size a filesystem misreported) is refused naming the file, not trapped on",
        arguments: [(Int64(0), -1), (-1, 10), (Int64.min, Int.min)])
    func negativeReadsAreRefused(start: Int64, count: Int) throws {
        let fd = open("/dev/null", O_RDONLY)
        defer { close(fd) }
        #expect {
            try DescriptorIO.read(fd, at: start, count: count, path: "/srv/odd-size")
        } throws: { error in
            let text = "\(error)"
            return text.contains("/srv/odd-size") && text.contains("pread")
        }
    }

    @Test("a failed write names the file and the call")
    func failureNamesTheFile() throws {
        let fd = open("/dev/null", O_RDONLY)
        defer { close(fd) }
        let code = [UInt8(1)].withUnsafeBytes { DescriptorIO.writeAll(fd, $0) }
        #expect(code == EBADF)
        #expect { try DescriptorIO.write(Data([1]), to: fd, path: "/dev/null") } throws: {
            "\($0)".contains("/dev/null") && "\($0)".contains("write")
        }
    }
}
