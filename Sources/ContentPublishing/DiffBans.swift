import Archive
import FileKit
import StorageFormat

/// Pairings the differ has ruled out on earlier rounds. It only grows, which bounds the rounds.
struct DiffBans {
    /// A move from `source` to `target`, of a file or a whole folder.
    struct Pair: Hashable {
        var source: SafeRelativePath
        var target: SafeRelativePath
    }

    /// Old files never to use as a source: edited files without extension, whose path could
    /// not be refilled once their bytes moved away.
    var sources: Set<SafeRelativePath> = []
    /// File moves never to make again: each closed an ordering cycle.
    var filePairs: Set<Pair> = []
    /// Folder moves never to make again: each closed an ordering cycle.
    var folderPairs: Set<Pair> = []
    /// Moved-and-edited pairings never to make again (published as a remove and an add
    /// instead): each closed an ordering cycle.
    var refreshPairs: Set<Pair> = []
    /// File moves that go through a temporary name: they closed a cycle, and giving them up left
    /// a file without extension that only a move can bring.
    var staged: Set<Pair> = []
}
