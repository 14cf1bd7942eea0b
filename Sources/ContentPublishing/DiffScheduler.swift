import Archive
import FileKit
import StorageFormat

/// Orders ``DiffStep``s so that replaying them one after another, with the client's rules, never
/// destroys bytes a later step still needs and never undoes an earlier step.
///
/// Two hazards exist, and each becomes an edge "this step before that one":
/// 1. **A needed source is destroyed.** A remove deletes a subtree; a move or add replaces what
///    stands at its target (with everything below it) and any file standing where one of its
///    parent folders must go. Every move whose source lies in that region goes first. This also
///    orders move chains (`b→c` before `a→b`) and moves out of folders before their removal.
/// 2. **A remove undoes a write.** A remove of `X` goes before every write at, above or below
///    `X`: a folder removed and its name reused, or a file removed where a folder must go.
///
/// A parked file (a move through a temporary name) is unparked after it is parked; its temporary
/// name holds no old bytes, so nothing else waits on it.
///
/// The steps are then sorted topologically, preferring ``DiffStep/rank`` and path order, so the
/// output is deterministic. A cycle (a swap `a→b`, `b→a`; two folders that each become a file
/// holding bytes from inside the other) cannot be ordered; the scheduler reports every
/// independent cycle so that the differ can give up one move of each.
struct DiffScheduler {
    /// The outcome: the order, or the file moves to give up because they close a cycle.
    enum Outcome {
        case ordered([DiffStep])
        case cycles([[DiffStep]])
    }

    private let steps: [DiffStep]
    private var successors: [[Int]]
    private var predecessors: [[Int]]

    /// `oldFiles` tells which paths held files before the list, so that a write knows which of
    /// its parent paths it replaces.
    init(steps: [DiffStep], oldFiles: [SafeRelativePath: FileFingerprint]) {
        let steps = steps.sorted(by: DiffStep.preferredOrder)
        self.steps = steps
        successors = Array(repeating: [], count: steps.count)
        predecessors = Array(repeating: [], count: steps.count)

        var sources = PathIndex() // moves and parks, by the old path they take bytes from
        var removes = PathIndex()
        var parkedAt: [SafeRelativePath: Int] = [:]
        for (index, step) in steps.enumerated() {
            if case .park(_, let temporary) = step { parkedAt[temporary] = index }
            // An unpark's source is a temporary name, not old bytes that others could destroy.
            if let source = step.source, !step.isUnpark { sources.insert(index, at: source) }
            if case .remove(let path) = step { removes.insert(index, at: path) }
        }

        for (index, step) in steps.enumerated() {
            if case .unpark(let temporary, _) = step, let park = parkedAt[temporary] { addEdge(from: park, to: index) }
            // Hazard 1: what this step destroys: the subtree at the path it removes or writes,
            // and any old file standing where one of a written path's folders must go.
            var destroyedRoot: SafeRelativePath?
            if case .remove(let path) = step { destroyedRoot = path }
            if let written = step.written {
                destroyedRoot = written
                for (file, movers) in sources.above(written) where oldFiles[file] != nil {
                    for mover in movers where mover != index { addEdge(from: mover, to: index) }
                }
            }
            if let root = destroyedRoot {
                for mover in sources.at(root) + sources.below(root) where mover != index {
                    addEdge(from: mover, to: index)
                }
            }
            // Hazard 2: removes at, above or below what this step writes.
            if let written = step.written {
                let related = removes.at(written) + removes.above(written).flatMap(\.steps) + removes.below(written)
                for remover in related where remover != index { addEdge(from: remover, to: index) }
            }
        }
    }

    private mutating func addEdge(from: Int, to: Int) {
        successors[from].append(to)
        predecessors[to].append(from)
    }

    /// Kahn's algorithm with a min-heap over the preferred order. When nothing is ready, the
    /// remaining steps contain a cycle: it is recorded, taken out, and sorting goes on, so that
    /// one pass finds every independent cycle.
    func order() -> Outcome {
        var pending = predecessors.map(\.count)
        var done = [Bool](repeating: false, count: steps.count)
        var ready = MinHeap()
        for index in steps.indices where pending[index] == 0 { ready.push(index) }
        var result: [DiffStep] = []
        var cycles: [[DiffStep]] = []
        var finished = 0
        var scan = 0

        // Marks `indices` done first, so that releasing one does not make another ready.
        func finish(_ indices: [Int]) {
            for index in indices { done[index] = true }
            finished += indices.count
            for index in indices {
                for next in successors[index] where !done[next] {
                    pending[next] -= 1
                    if pending[next] == 0 { ready.push(next) }
                }
            }
        }

        while finished < steps.count {
            if let index = ready.pop() {
                result.append(steps[index])
                finish([index])
                continue
            }
            // Every remaining step waits on another remaining step: walk back until a repeat.
            while done[scan] { scan += 1 }
            var position: [Int: Int] = [:]
            var walk: [Int] = []
            var current = scan
            while position[current] == nil {
                position[current] = walk.count
                walk.append(current)
                current = predecessors[current].filter { !done[$0] }.min()!
            }
            let cycle = Array(walk[position[current]!...])
            cycles.append(cycle.map { steps[$0] })
            finish(cycle)
        }
        return cycles.isEmpty ? .ordered(result) : .cycles(cycles)
    }
}

/// A binary min-heap of step indices; a smaller index is a preferred step.
private struct MinHeap {
    private var items: [Int] = []

    mutating func push(_ item: Int) {
        items.append(item)
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[child] < items[parent] else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() -> Int? {
        guard let top = items.first else { return nil }
        let last = items.removeLast()
        if !items.isEmpty {
            items[0] = last
            var parent = 0
            while true {
                let left = 2 * parent + 1
                let right = left + 1
                var smallest = parent
                if left < items.count && items[left] < items[smallest] { smallest = left }
                if right < items.count && items[right] < items[smallest] { smallest = right }
                if smallest == parent { break }
                items.swapAt(parent, smallest)
                parent = smallest
            }
        }
        return top
    }
}
