import Foundation
import Synchronization
import Testing

@testable import Archive
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// A range of stored entries is placed as its bytes arrive, in whatever pieces they come: each
/// entry verified against its fingerprint and named in `next/`, nothing taken from an answer that
/// is not exactly the range, and nothing written before `next/` is ready.
@Suite("A range of stored entries is placed as it streams in", .timeLimit(.minutes(3)))
struct RangeStreamTests {
    /// An archive (``RawZip``: every entry stored) of a folder and `count` random files of 0 to
    /// 40,000 bytes in two folders, with its directory, the wanted entries and their fingerprints,
    /// and an empty `next/` holding those folders.
    struct Fixture {
        var archive: [UInt8]
        var directory: ArchiveDirectory
        var pathOf: [Int: SafeRelativePath]
        var expected: [SafeRelativePath: FileFingerprint]
        var contents: [SafeRelativePath: [UInt8]]
        var piece: ArchiveRangePlan.Piece
        var next: String
        var pool: RangeBufferPool

        /// The `Content-Range` an exact answer has.
        var contentRange: String { "bytes \(piece.start)-\(piece.end - 1)/\(archive.count)" }

        init(scratch: String, count: Int, seed: UInt64) throws {
            var random = TwinPatchTests.Generator(state: seed)
            var entries = [RawZip.Entry("RXCacheContent/a/", "", mode: 0o040755)]
            var contents: [SafeRelativePath: [UInt8]] = [:]
            for index in 0..<count {
                let path = "\(index.isMultiple(of: 3) ? "b" : "a")/f\(index).bin"
                let size = index == 1 ? 0 : Int.random(in: 0...40_000, using: &random)
                let data = (0..<size).map { _ in UInt8.random(in: 0...255, using: &random) }
                entries.append(RawZip.Entry(rawName: Array(("RXCacheContent/" + path).utf8), data: data))
                contents[try SafeRelativePath(validating: path)] = data
            }
            archive = [UInt8](RawZip(entries: entries).bytes())
            let size = UInt64(archive.count)
            let tail = Array(archive[Int(size - min(size, UInt64(ArchiveDirectory.tailLength)))...])
            let location = try #require(ArchiveDirectory.locate(tail: tail, archiveSize: size))
            directory = try #require(
                ArchiveDirectory(
                    records: Array(archive[Int(location.bytes.lowerBound)..<Int(location.bytes.upperBound)]),
                    location: location))
            pathOf = [:]
            expected = [:]
            for (index, entry) in directory.entries.enumerated() {
                let name = String(decoding: entry.name, as: UTF8.self)
                guard !name.hasSuffix("/") else { continue }
                let path = try SafeRelativePath(validating: String(name.dropFirst("RXCacheContent/".count)))
                let data = try #require(contents[path])
                pathOf[index] = path
                expected[path] = FileFingerprint(size: Int64(data.count), sha256: FileDigest.sha256(data))
            }
            self.contents = contents
            let plan = ArchiveRangePlan(
                wanted: pathOf.keys.sorted(), entries: directory.entries, maxGap: .max, target: .max)
            try #require(plan.pieces.count == 1)
            piece = plan.pieces[0]
            next = scratch + "/next"
            for folder in ["a", "b"] {
                try FileManager.default.createDirectory(atPath: next + "/" + folder, withIntermediateDirectories: true)
            }
            pool = RangeBufferPool(size: Int(piece.length))
        }

        func stream(
            gate: StartGate? = nil, expected: [SafeRelativePath: FileFingerprint]? = nil,
            progress: @escaping @Sendable (SafeRelativePath, Int64) -> Void = { _, _ in }
        ) throws -> RangeStream {
            try #require(
                RangeStream(
                    piece: piece, archiveSize: Int64(archive.count), directory: directory, pathOf: pathOf,
                    expected: expected ?? self.expected, next: next, gate: gate, buffers: pool,
                    fingerprints: FingerprintCache(), progress: progress))
        }

        /// An attempt of an exact answer: its start, then the range's bytes up to `to` (all of
        /// them by default) in pieces of random sizes (``feed(_:from:to:random:)``).
        func answer(_ stream: RangeStream, to: Int? = nil, random: inout TwinPatchTests.Generator) {
            stream.start(status: 206, contentRange: contentRange)
            feed(stream, to: to, random: &random)
        }

        /// Feeds the range's bytes from `from` to `to` in pieces of random sizes (some of one byte).
        func feed(_ stream: RangeStream, from: Int = 0, to: Int? = nil, random: inout TwinPatchTests.Generator) {
            let bytes = archive[Int(piece.start)..<Int(piece.end)]
            var at = bytes.startIndex + from
            let end = bytes.startIndex + (to ?? bytes.count)
            while at < end {
                let size =
                    Bool.random(using: &random)
                    ? Int.random(in: 1...3, using: &random)
                    : Int.random(in: 1...70_000, using: &random)
                let stop = min(end, at + size)
                archive[at..<stop].withUnsafeBytes { stream.append($0) }
                at = stop
            }
        }

        /// The files in `next/`, by path.
        func placed() throws -> [SafeRelativePath: [UInt8]] {
            var found: [SafeRelativePath: [UInt8]] = [:]
            for folder in ["a", "b"] {
                for name in try FileManager.default.contentsOfDirectory(atPath: next + "/" + folder) {
                    found[try SafeRelativePath(validating: folder + "/" + name)] = [UInt8](
                        try Data(contentsOf: URL(fileURLWithPath: next + "/" + folder + "/" + name)))
                }
            }
            return found
        }
    }

    /// Pieces of 1 to 70,000 bytes, cutting local headers, names and data anywhere: every file
    /// is placed once, byte for byte, and reported with its entry's span.
    @Test(arguments: [UInt64(1), 2, 3, 4, 5, 6])
    func everyEntryIsPlacedWhateverPiecesTheBytesComeIn(seed: UInt64) async throws {
        try await withTemporaryDirectory { scratch in
            let fixture = try Fixture(scratch: scratch, count: 40, seed: seed)
            let reported = Mutex<[SafeRelativePath]>([])
            let stream = try fixture.stream { path, _ in reported.withLock { $0.append(path) } }
            var random = TwinPatchTests.Generator(state: seed &* 31)
            fixture.answer(stream, random: &random)
            #expect(stream.isComplete)
            #expect(try fixture.placed() == fixture.contents)
            #expect(Set(stream.placed.map(\.path)) == Set(fixture.contents.keys))
            #expect(stream.placed.count == fixture.contents.count)
            #expect(reported.withLock { $0.count } == fixture.contents.count)
            let spans = Dictionary(
                uniqueKeysWithValues: fixture.pathOf.map { index, path in
                    (path, Int64(fixture.directory.entries[index].end - fixture.directory.entries[index].start))
                })
            #expect(stream.placed.allSatisfy { spans[$0.path] == $0.bytes })
        }
    }

    /// An attempt broken off mid-way, then retried whole: what the first placed stays, the entry
    /// it was writing is dropped, and the retry places the rest once.
    @Test func aRetriedAttemptPlacesEachEntryOnce() async throws {
        try await withTemporaryDirectory { scratch in
            let fixture = try Fixture(scratch: scratch, count: 30, seed: 11)
            let stream = try fixture.stream()
            var random = TwinPatchTests.Generator(state: 12)
            fixture.answer(stream, to: Int(fixture.piece.length) / 2 + 7, random: &random)
            #expect(!stream.isComplete)
            let early = stream.placed.count
            #expect(early > 0 && early < fixture.contents.count)
            fixture.answer(stream, random: &random)
            #expect(stream.isComplete)
            #expect(stream.placed.count == fixture.contents.count)
            #expect(try fixture.placed() == fixture.contents)
        }
    }

    /// Answers that are not exactly the range asked: nothing is written, whatever bytes follow.
    @Test(arguments: ["200", "shifted", "other archive size", "no Content-Range", "unknown size"])
    func anAnswerThatIsNotTheRangeAskedPlacesNothing(_ answer: String) async throws {
        try await withTemporaryDirectory { scratch in
            let fixture = try Fixture(scratch: scratch, count: 10, seed: 21)
            let stream = try fixture.stream()
            let (first, last, size) = (fixture.piece.start, fixture.piece.end - 1, fixture.archive.count)
            switch answer {
            case "200": stream.start(status: 200, contentRange: fixture.contentRange)
            case "shifted": stream.start(status: 206, contentRange: "bytes \(first + 1)-\(last + 1)/\(size)")
            case "other archive size": stream.start(status: 206, contentRange: "bytes \(first)-\(last)/\(size + 1)")
            case "no Content-Range": stream.start(status: 206, contentRange: nil)
            default: stream.start(status: 206, contentRange: "bytes \(first)-\(last)/*")
            }
            var random = TwinPatchTests.Generator(state: 22)
            fixture.feed(stream, random: &random)
            #expect(!stream.isComplete)
            #expect(stream.placed.isEmpty)
            #expect(try fixture.placed().isEmpty)
        }
    }

    /// More bytes than the range: the answer is refused from there on, and is not complete.
    @Test func anAnswerLongerThanTheRangeIsRefused() async throws {
        try await withTemporaryDirectory { scratch in
            let fixture = try Fixture(scratch: scratch, count: 10, seed: 31)
            let stream = try fixture.stream()
            var random = TwinPatchTests.Generator(state: 32)
            fixture.answer(stream, random: &random)
            [UInt8](repeating: 0, count: 5).withUnsafeBytes { stream.append($0) }
            #expect(!stream.isComplete)
        }
    }

    /// Before the gate opens the bytes are held and nothing is written; once it opens they are
    /// placed; a gate that says no places nothing at all.
    @Test(arguments: [true, false])
    func bytesThatComeBeforeNextIsReadyWaitForTheGate(opens: Bool) async throws {
        try await withTemporaryDirectory { scratch in
            let fixture = try Fixture(scratch: scratch, count: 20, seed: 41)
            let gate = StartGate()
            let stream = try fixture.stream(gate: gate)
            var random = TwinPatchTests.Generator(state: 42)
            let half = Int(fixture.piece.length) / 2
            fixture.answer(stream, to: half, random: &random)
            #expect(try fixture.placed().isEmpty, "nothing is written before next/ is ready")
            gate.open(opens)
            fixture.feed(stream, from: half, random: &random)
            await stream.drain()
            #expect(stream.placed.count == (opens ? fixture.contents.count : 0))
            #expect(try fixture.placed() == (opens ? fixture.contents : [:]))
        }
    }

    /// The whole answer arrives before the gate opens: `drain` waits for it, then places it all.
    @Test func aRangeInWholeBeforeTheGateIsPlacedWhenItOpens() async throws {
        try await withTemporaryDirectory { scratch in
            let fixture = try Fixture(scratch: scratch, count: 20, seed: 51)
            let gate = StartGate()
            let stream = try fixture.stream(gate: gate)
            var random = TwinPatchTests.Generator(state: 52)
            fixture.answer(stream, random: &random)
            #expect(stream.isComplete)
            #expect(try fixture.placed().isEmpty)
            async let drained: Void = stream.drain()
            try await Task.sleep(for: .milliseconds(20))
            #expect(try fixture.placed().isEmpty, "drain waits for the gate")
            gate.open(true)
            await drained
            #expect(try fixture.placed() == fixture.contents)
        }
    }

    /// Entries that are not the files the change list describes are skipped, the others placed:
    /// other bytes (a fingerprint that differs), a local header that says deflated where the
    /// directory says stored, and one whose local header is not one.
    @Test func entriesThatDoNotVerifyAreSkippedAndTheRestPlaced() async throws {
        try await withTemporaryDirectory { scratch in
            var fixture = try Fixture(scratch: scratch, count: 20, seed: 61)
            let files = fixture.pathOf.keys.sorted()
            var expected = fixture.expected
            let otherBytes = fixture.pathOf[files[2]]!
            expected[otherBytes] = FileFingerprint(
                size: expected[otherBytes]!.size, sha256: String(repeating: "0", count: 64))
            let deflated = fixture.pathOf[files[5]]!
            fixture.archive[Int(fixture.directory.entries[files[5]].start) + 8] = 8
            let notAHeader = fixture.pathOf[files[9]]!
            fixture.archive[Int(fixture.directory.entries[files[9]].start)] = 0x51
            let stream = try fixture.stream(expected: expected)
            var random = TwinPatchTests.Generator(state: 62)
            fixture.answer(stream, random: &random)
            var wanted = fixture.contents
            for skipped in [otherBytes, deflated, notAHeader] { wanted[skipped] = nil }
            #expect(try fixture.placed() == wanted)
            #expect(Set(stream.placed.map(\.path)) == Set(wanted.keys))
        }
    }

    /// A range with an entry the directory says is deflated, or stored with another size than its
    /// file's, is not streamed (it is gathered and read by libzip).
    @Test func onlyRangesOfStoredEntriesOfTheRightSizeStream() async throws {
        try await withTemporaryDirectory { scratch in
            let fixture = try Fixture(scratch: scratch, count: 10, seed: 71)
            var expected = fixture.expected
            let path = fixture.pathOf.values.first { fixture.contents[$0]!.count > 0 }!
            expected[path]!.size += 1
            #expect(
                RangeStream(
                    piece: fixture.piece, archiveSize: Int64(fixture.archive.count), directory: fixture.directory,
                    pathOf: fixture.pathOf, expected: expected, next: fixture.next, gate: nil, buffers: fixture.pool,
                    fingerprints: FingerprintCache(), progress: { _, _ in }) == nil)
        }
    }
}
