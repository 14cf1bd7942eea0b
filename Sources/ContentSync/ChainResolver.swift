import FileKit
import StorageFormat

/// Decides which change lists to fetch, and when the chain of protocol.md §2.1 is known. No I/O:
/// the engine reports each fetch's outcome and performs the returned ``Action``.
///
/// The chain is the general rule of ``UpdateChain/resolve(_:from:to:)``: from the local version,
/// take the first list in list order whose `from` is the current version and whose `to` does not
/// pass the actual one, until the actual version. A list's name, `changes_A_B.json`, predicts its
/// versions, so the resolver first walks the chain the names describe and fetches only those
/// lists (all at once), plus every list whose name says nothing (only its contents can tell).
/// Each fetched list's own `from`/`to` must confirm its name. Once one does not (a name lies),
/// names are no longer trusted, and every list that could change the answer is fetched. A list
/// that is missing (404) is skipped, and the walk continues past it.
struct ChainResolver {
    /// What the engine does next.
    enum Action: Equatable {
        /// Fetch these candidates (indexes into ``candidates``), then report each outcome.
        case fetch([Int])
        /// Wait for a fetch in flight.
        case wait
        /// The chain, in replay order.
        case chain([Int])
        /// No chain reaches the actual version.
        case noChain
    }

    private enum Status: Equatable {
        case unfetched
        case requested
        case known(from: CacheVersion, to: CacheVersion)
        case missing
    }

    /// The lists that may matter, in list order (see ``UpdateChain/candidates(_:local:actual:)``).
    let candidates: [UpdateList.Entry]
    let local: CacheVersion
    let actual: CacheVersion
    private var statuses: [Status]
    private var trustNames = true
    /// For each `from` version, the first list in list order known to start there and to end at
    /// or below the actual version: the only one of them the chain can ever take.
    private var firstKnownByFrom: [CacheVersion: Int] = [:]

    init(candidates: [UpdateList.Entry], local: CacheVersion, actual: CacheVersion) {
        self.candidates = candidates
        self.local = local
        self.actual = actual
        self.statuses = Array(repeating: .unfetched, count: candidates.count)
    }

    /// Whether names are still trusted (no fetched list contradicted its name).
    var trustsNames: Bool { trustNames }

    /// The first action.
    mutating func start() -> Action {
        next()
    }

    /// A candidate was fetched and its own versions read.
    mutating func fetched(_ index: Int, from: CacheVersion, to: CacheVersion) -> Action {
        precondition(
            statuses[index] == .requested, "candidate \(index) reported but not requested (\(statuses[index]))")
        statuses[index] = .known(from: from, to: to)
        let entry = candidates[index]
        if let namedFrom = entry.namedFrom, let namedTo = entry.namedTo, namedFrom != from || namedTo != to {
            trustNames = false
        }
        if to <= actual, from >= local, firstKnownByFrom[from].map({ index < $0 }) ?? true {
            firstKnownByFrom[from] = index
        }
        return next()
    }

    /// A candidate answered 404.
    mutating func missing(_ index: Int) -> Action {
        precondition(
            statuses[index] == .requested, "candidate \(index) reported but not requested (\(statuses[index]))")
        statuses[index] = .missing
        return next()
    }

    /// Whether a fetched candidate can still end up in the chain, so that its body is worth keeping.
    func mayBePicked(_ index: Int) -> Bool {
        guard case .known(let from, _) = statuses[index] else { return false }
        return firstKnownByFrom[from] == index
    }

    /// Walks the chain as far as what is known and (while trusted) the names allow.
    private mutating func next() -> Action {
        var current = local
        var chain: [Int] = []
        var needed: [Int] = []
        var waiting = false
        walk: while current < actual {
            var pick: (index: Int, to: CacheVersion)?
            scan: for index in candidates.indices {
                switch statuses[index] {
                case .missing:
                    continue scan
                case .known(let from, let to):
                    if from == current && to <= actual {
                        pick = (index, to)
                        break scan
                    }
                case .unfetched, .requested:
                    let entry = candidates[index]
                    if trustNames, let from = entry.namedFrom, let to = entry.namedTo {
                        guard from == current && to <= actual else { continue scan }
                        pick = (index, to)
                    }
                    // Predicted, or unknown (it might come first): either way it must be fetched.
                    if statuses[index] == .unfetched {
                        statuses[index] = .requested
                        needed.append(index)
                    } else {
                        waiting = true
                    }
                    if pick != nil { break scan }
                }
            }
            guard let pick else { break walk }
            chain.append(pick.index)
            current = pick.to
        }
        if !needed.isEmpty { return .fetch(needed) }
        if waiting { return .wait }
        return current == actual ? .chain(chain) : .noChain
    }
}
