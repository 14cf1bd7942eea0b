import Foundation
import Testing

@testable import ImageCache

/// The pure parts, table by table: the JPEG end-marker and PNG chunk checks, the resize plan
/// (libjpeg's shrink and the exact box), and the CLI's size and colour grammar.
@Suite("Image structure checks, resize plans and option grammar")
struct ImageStructureTests {
    @Test("a whole JPEG has its end marker after the scan; a cut one has not, whatever precedes the scan")
    func jpegEnd() throws {
        let jpeg = try noisyImage(width: 64, height: 64, format: "jpeg")
        #expect(JPEGStructure.hasEndAfterScan(jpeg))
        // Bytes after the end (padding, appended data) are allowed.
        #expect(JPEGStructure.hasEndAfterScan(jpeg + Data(repeating: 0, count: 100)))
        for cut in [jpeg.count - 1, jpeg.count - 2, jpeg.count / 2, 300, 4, 0] {
            #expect(!JPEGStructure.hasEndAfterScan(jpeg.prefix(cut)), "cut at \(cut)")
        }
        // An end marker inside an APP1 segment (an EXIF thumbnail's) before the scan does not count.
        let app1: [UInt8] = [0xFF, 0xE1, 0x00, 0x06, 0xFF, 0xD9, 0x00, 0x00]
        let fake = Data([0xFF, 0xD8] + app1 + [0xFF, 0xDA, 0x00, 0x02, 0x12, 0x34])
        #expect(!JPEGStructure.hasEndAfterScan(fake))
        #expect(JPEGStructure.hasEndAfterScan(fake + Data([0xFF, 0xD9])))
    }

    @Test("a PNG's chunks: cut short, a wrong CRC, a first chunk that is no IHDR, a missing IEND")
    func pngChunks() throws {
        let png = try noisyImage(width: 64, height: 64, format: "png")
        #expect(PNGStructure.damage(png) == nil)
        #expect(PNGStructure.damage(png + Data("trailing".utf8)) == nil)
        #expect(PNGStructure.damage(png.prefix(png.count - 1))?.contains("cut short") == true)
        #expect(PNGStructure.damage(png.prefix(png.count / 2)) != nil)
        var flipped = png
        flipped[png.count / 2] ^= 0x01
        #expect(PNGStructure.damage(flipped)?.contains("CRC") == true)
        var badHeader = png
        badHeader[12] = UInt8(ascii: "X") // IHDR → XHDR
        #expect(PNGStructure.damage(badHeader) != nil)
        #expect(PNGStructure.damage(Data("not a png".utf8)) == "no PNG signature")
        #expect(PNGStructure.damage(pngHeaderOnly(width: 5, height: 5)) == nil)
        // A length past the end, with no arithmetic overflow.
        var huge = png
        huge.replaceSubrange(33..<37, with: [0x7F, 0xFF, 0xFF, 0xFF])
        #expect(PNGStructure.damage(huge) != nil)
        #expect(Data("123456789".utf8).withUnsafeBytes { CRC32.checksum($0) } == 0xCBF4_3926)
    }

    @Test("one check for bytes in memory and in a file: the same verdict, word for word, on every input")
    func memoryAndFileAgree() throws {
        let jpeg = try noisyImage(width: 96, height: 64, format: "jpeg")
        let png = try noisyImage(width: 96, height: 64, format: "png")
        var flipped = png
        flipped[png.count / 2] ^= 0x04
        let inputs: [(String, String, Data)] = [
            ("whole jpeg", "jpeg", jpeg), ("cut jpeg", "jpeg", jpeg.prefix(jpeg.count - 3)),
            ("jpeg, a short trailer", "jpeg", jpeg + Data(repeating: 7, count: 1000)),
            ("jpeg, a trailer past the window", "jpeg", jpeg + Data(repeating: 7, count: JPEGStructure.tail + 10)),
            ("whole png", "png", png), ("cut png", "png", png.prefix(png.count - 20)), ("flipped png", "png", flipped),
        ]
        let folder = NSTemporaryDirectory() + "structure-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var verdicts: [String: String] = [:]
        for (name, format, data) in inputs {
            let path = folder + "/" + name
            try data.write(to: URL(fileURLWithPath: path))
            let file = try OpenFile(path: path, limit: 1 << 30)
            let inMemory = data.withUnsafeBytes { ImageStructure.damage(of: MemoryBytes(raw: $0), format: format) }
            #expect(ImageStructure.damage(of: file, format: format) == inMemory, "\(name)")
            verdicts[name] = inMemory ?? "whole"
        }
        #expect(verdicts["whole jpeg"] == "whole" && verdicts["whole png"] == "whole")
        #expect(verdicts["jpeg, a short trailer"] == "whole")
        #expect(verdicts["cut jpeg"]?.contains("cut short") == true)
        #expect(verdicts["jpeg, a trailer past the window"]?.contains("cut short") == true)
        #expect(verdicts["cut png"]?.contains("cut short") == true)
        #expect(verdicts["flipped png"]?.contains("CRC") == true)
    }

    struct PlanRow: Sendable, CustomTestStringConvertible {
        var why: String
        var source: (Int, Int)
        var orientation = 1
        var box: (Int?, Int?)
        var mode: ResizeMode = .fit
        var upscale = false
        var expected: (width: Int32, height: Int32, shrink: Int32)
        var testDescription: String { why }
    }

    static let plans: [PlanRow] = [
        PlanRow(
            why: "sharp's 2725×2225 to 720 wide: a quarter decoded", source: (2725, 2225), box: (720, nil),
            expected: (720, 588, 2)),
        PlanRow(why: "7360×4912 to 500: an eighth", source: (7360, 4912), box: (500, 500), expected: (500, 334, 8)),
        PlanRow(why: "just over half: no shrink", source: (1000, 1000), box: (501, nil), expected: (501, 501, 1)),
        PlanRow(why: "exactly half: shrink 2", source: (1000, 1000), box: (500, nil), expected: (500, 500, 2)),
        PlanRow(why: "odd sides round up in libjpeg", source: (1001, 999), box: (nil, 250), expected: (251, 250, 4)),
        PlanRow(why: "a pixel short of a shrink", source: (1001, 999), box: (nil, 251), expected: (252, 251, 2)),
        PlanRow(why: "never upscale", source: (300, 200), box: (600, 600), expected: (300, 200, 1)),
        PlanRow(why: "upscale asked", source: (300, 200), box: (600, 600), upscale: true, expected: (600, 400, 1)),
        PlanRow(
            why: "orientation 6: the box is for the upright image", source: (4000, 3000), orientation: 6,
            box: (300, nil), expected: (300, 400, 8)),
        PlanRow(
            why: "fill covers the box: the larger scale decides the shrink", source: (4000, 1000), box: (200, 200),
            mode: .fill, expected: (200, 200, 4)),
        PlanRow(why: "force both sides", source: (1600, 1600), box: (100, 400), mode: .force, expected: (100, 400, 4)),
        PlanRow(
            why: "force with a free side is a fit", source: (1600, 800), box: (400, nil), mode: .force,
            expected: (400, 200, 4)),
        PlanRow(
            why: "force never upscales: a box past the image keeps its sides", source: (400, 300), box: (2000, 2000),
            mode: .force, expected: (400, 300, 1)),
        PlanRow(
            why: "force never upscales one side: the other still shrinks", source: (400, 300), box: (200, 900),
            mode: .force, expected: (200, 300, 1)),
        PlanRow(
            why: "force upscales when asked", source: (400, 300), box: (2000, 2000), mode: .force, upscale: true,
            expected: (2000, 2000, 1)),
    ]

    @Test("resize plans", arguments: plans)
    func plan(row: PlanRow) {
        var request = ResizeRequest(width: row.box.0, height: row.box.1, format: .jpeg)
        request.mode = row.mode
        request.upscale = row.upscale
        let header = ImageHeader(
            format: "jpeg", width: row.source.0, height: row.source.1, bands: 3, pages: 1, orientation: row.orientation)
        let plan = ResizePlan(header: header, request: request)
        #expect(plan.jpegShrink == row.expected.shrink)
        if row.mode == .fit || row.mode == .force {
            #expect(plan.width == row.expected.width && plan.height == row.expected.height)
        }
    }

    @Test("sizes: WxH, Wx, xH; nothing else")
    func sizes() {
        #expect(ImageRequest.size(parsing: "720x480")! == (720, 480))
        #expect(ImageRequest.size(parsing: "720x")! == (720, nil))
        #expect(ImageRequest.size(parsing: "x480")! == (nil, 480))
        #expect(ImageRequest.size(parsing: "720X480")! == (720, 480))
        for bad in [
            "", "x", "720", "0x10", "10x0", "-5x5", "+5x5", "16385x", "9999999999999999999x", "7 20x", "٣x3", "1x2x3",
        ] {
            #expect(ImageRequest.size(parsing: bad) == nil, "\(bad)")
        }
    }

    @Test("colours: names, #rgb, #rrggbb, r,g,b")
    func colours() {
        #expect(ImageRequest.color(parsing: "white")! == (255, 255, 255))
        #expect(ImageRequest.color(parsing: "#000")! == (0, 0, 0))
        #expect(ImageRequest.color(parsing: "#FFcc00")! == (255, 204, 0))
        #expect(ImageRequest.color(parsing: "#fc0")! == (255, 204, 0))
        #expect(ImageRequest.color(parsing: "10, 20,30")! == (10, 20, 30))
        for bad in ["", "#12", "#1234567", "#ggg", "256,0,0", "1,2", "1,2,3,4", "-1,0,0", "mauve"] {
            #expect(ImageRequest.color(parsing: bad) == nil, "\(bad)")
        }
    }

    @Test("stored metadata round-trips; damaged or hostile records read as none")
    func metadataRecords() {
        let facts = ImageMetadata(
            width: 10, height: 20, format: "png", orientation: 6, bytes: 99, sha256: String(repeating: "a", count: 64),
            custom: ["owner": "ann"])
        #expect(ImageMetadata(stored: facts.stored, bytes: 99) == facts)
        var damaged = facts.stored
        damaged["image.width"] = "-3"
        #expect(ImageMetadata(stored: damaged, bytes: 99) == nil)
        damaged = facts.stored
        damaged["image.format"] = "../etc"
        #expect(ImageMetadata(stored: damaged, bytes: 99) == nil)
        damaged = facts.stored
        damaged["image.sha256"] = "zz"
        #expect(ImageMetadata(stored: damaged, bytes: 99)?.sha256 == nil)
        damaged = facts.stored
        damaged["image.orientation"] = "99"
        #expect(ImageMetadata(stored: damaged, bytes: 99)?.orientation == 1)
        #expect(ImageMetadata(stored: ["owner": "ann"], bytes: 1) == nil)
    }
}
