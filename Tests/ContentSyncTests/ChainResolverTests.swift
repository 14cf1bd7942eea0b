import Foundation
import Testing
import ToolSupport

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// The chain resolver's decisions, driven without I/O (protocol.md §2.1).
@Suite("Only the change lists the chain needs are fetched", .timeLimit(.minutes(3)))
struct ChainResolverTests {
    /// An update-list entry named `name` under HistoryOfVersions/ (`folder` tells copies apart).
    static func entry(_ name: String, folder: String = "") -> UpdateList.Entry {
        let (from, to) = UpdateList.versions(inFileName: name)
        return UpdateList.Entry(
            url: URL(string: "https://h.example/s/RXCacheConfig/HistoryOfVersions/\(folder)\(name)")!,
            namedFrom: from, namedTo: to)
    }

    @Test func truthfulNamesFetchOnlyThePredictedChainAtOnce() {
        let entries = [
            "changes_1.0_1.1.json", "changes_1.0_1.2.json", "changes_1.1_1.2.json", "changes_1.2_1.3.json",
            "changes_1.3_1.4.json",
        ].map { Self.entry($0) }
        var resolver = ChainResolver(candidates: entries, local: v("1.0"), actual: v("1.3"))
        #expect(resolver.start() == .fetch([0, 2, 3]))
        #expect(resolver.fetched(2, from: v("1.1"), to: v("1.2")) == .wait)
        #expect(resolver.fetched(0, from: v("1.0"), to: v("1.1")) == .wait)
        #expect(resolver.fetched(3, from: v("1.2"), to: v("1.3")) == .chain([0, 2, 3]))
        #expect([0, 2, 3].allSatisfy(resolver.mayBePicked))
    }

    @Test func aListWhoseNameSaysNothingIsFetchedAndMayComeFirst() {
        let entries = [Self.entry("custom.json"), Self.entry("changes_1.0_1.1.json")]
        var resolver = ChainResolver(candidates: entries, local: v("1.0"), actual: v("1.1"))
        #expect(resolver.start() == .fetch([0, 1]))
        #expect(
            resolver.fetched(1, from: v("1.0"), to: v("1.1")) == .wait,
            "custom.json, earlier in list order, may start at 1.0 too")
        #expect(resolver.fetched(0, from: v("1.0"), to: v("1.1")) == .chain([0]))
        #expect(!resolver.mayBePicked(1))
    }

    @Test func aLyingNameFallsBackToTheGeneralRule() {
        // The first list's name says 1.1 → 1.2 but it holds 1.0 → 1.1; a list the names never
        // pointed at is then needed.
        let entries = [
            Self.entry("changes_1.1_1.2.json"), Self.entry("changes_1.0_1.1.json"),
            Self.entry("changes_1.1_1.2.json", folder: "copy/"),
        ]
        var resolver = ChainResolver(candidates: entries, local: v("1.0"), actual: v("1.2"))
        #expect(resolver.start() == .fetch([1, 0]))
        #expect(resolver.fetched(1, from: v("1.0"), to: v("1.1")) == .wait)
        #expect(resolver.fetched(0, from: v("1.0"), to: v("1.1")) == .fetch([2]))
        #expect(!resolver.trustsNames)
        #expect(resolver.fetched(2, from: v("1.1"), to: v("1.2")) == .chain([0, 2]))
    }

    @Test func aMissingListIsSkippedAndTheNextCandidateFetched() {
        let entries = [
            Self.entry("changes_1.0_1.1.json", folder: "gone/"), Self.entry("changes_1.0_1.1.json"),
            Self.entry("changes_1.1_1.2.json"),
        ]
        var resolver = ChainResolver(candidates: entries, local: v("1.0"), actual: v("1.2"))
        #expect(resolver.start() == .fetch([0, 2]))
        #expect(resolver.missing(0) == .fetch([1]))
        #expect(resolver.fetched(2, from: v("1.1"), to: v("1.2")) == .wait)
        #expect(resolver.fetched(1, from: v("1.0"), to: v("1.1")) == .chain([1, 2]))
    }

    @Test func aGapMeansNoChainOnceEverythingThatCouldFillItIsKnown() {
        var resolver = ChainResolver(
            candidates: [Self.entry("changes_1.0_1.1.json"), Self.entry("other.json")], local: v("1.0"),
            actual: v("1.2"))
        #expect(resolver.start() == .fetch([0, 1]))
        #expect(resolver.fetched(0, from: v("1.0"), to: v("1.1")) == .wait)
        #expect(resolver.fetched(1, from: v("1.2"), to: v("1.3")) == .noChain)
    }

    /// Random update lists, some names lying, some lists missing, fetched in random order: the
    /// chain is always the general rule's over what the client learnt (each fetched list's own
    /// versions, each unfetched list's name), and each of its lists is one whose body was kept.
    @Test(arguments: 0..<300)
    func theChainIsTheGeneralRuleOverWhatWasLearnt(seed: Int) throws {
        var random = SplitMix64(seed: UInt64(seed) &* 0x9E37_79B9)
        let versions = (0..<6).map { v("1.\($0)") }
        let count = Int.random(in: 1...12, using: &random)
        var entries: [UpdateList.Entry] = []
        var truth: [(CacheVersion, CacheVersion)?] = [] // nil: 404
        for index in 0..<count {
            let a = Int.random(in: 0..<5, using: &random)
            let b = Int.random(in: (a + 1)...5, using: &random)
            let actual = (versions[a], versions[b])
            let lies = Int.random(in: 0..<6, using: &random) == 0
            let named = Int.random(in: 0..<5, using: &random) != 0
            let shown = lies ? (versions[max(0, b - 1)], versions[b]) : actual
            let name = named ? "changes_\(shown.0.text)_\(shown.1.text).json" : "list\(index).json"
            entries.append(Self.entry(name, folder: "\(index)/"))
            truth.append(Int.random(in: 0..<8, using: &random) == 0 ? nil : actual)
        }
        let local = versions[Int.random(in: 0..<3, using: &random)]
        let actual = versions[Int.random(in: 3...5, using: &random)]
        let candidates = UpdateChain.candidates(UpdateList(entries: entries), local: local, actual: actual)
        let truthOf = Dictionary(uniqueKeysWithValues: zip(entries.map(\.url), truth))
        var resolver = ChainResolver(candidates: candidates, local: local, actual: actual)
        var pending: [Int] = []
        var fetched = Set<Int>()
        var action = resolver.start()
        var outcome: [Int]??
        while outcome == nil {
            switch action {
            case .fetch(let indexes): pending += indexes
            case .wait: break
            case .chain(let chain): outcome = .some(chain)
            case .noChain: outcome = .some(nil)
            }
            if outcome != nil { break }
            try #require(!pending.isEmpty, "the resolver waits with nothing in flight")
            let index = pending.remove(at: Int.random(in: 0..<pending.count, using: &random))
            #expect(fetched.insert(index).inserted, "candidate \(index) fetched twice")
            if let versions = truthOf[candidates[index].url]! {
                action = resolver.fetched(index, from: versions.0, to: versions.1)
            } else {
                action = resolver.missing(index)
            }
        }
        // The general rule over what was learnt.
        var learnt: [ChangeList] = []
        var position: [URL: Int] = [:]
        for (index, entry) in candidates.enumerated() {
            let known: (CacheVersion, CacheVersion)?
            if fetched.contains(index) {
                known = truthOf[entry.url]!
            } else if let from = entry.namedFrom, let to = entry.namedTo, resolver.trustsNames {
                known = (from, to)
            } else {
                known = nil // never scanned before a pick: it cannot matter
            }
            guard let known else { continue }
            position[entry.url] = index
            learnt.append(ChangeList(from: known.0, to: known.1, changes: [], url: entry.url))
        }
        let expected = UpdateChain.resolve(learnt, from: local, to: actual)?.map { position[$0.url]! }
        #expect(outcome! == expected)
        if let chain = outcome! {
            #expect(chain.allSatisfy { fetched.contains($0) && resolver.mayBePicked($0) })
        }
    }
}
