import Archive
import FileKit
import StorageFormat

/// One change the differ has decided on, before ordering.
enum DiffStep: Hashable {
    case moveFolder(from: SafeRelativePath, to: SafeRelativePath)
    case moveFile(from: SafeRelativePath, to: SafeRelativePath)
    /// The first half of a file move that goes through a temporary name to break a cycle.
    case park(from: SafeRelativePath, to: SafeRelativePath)
    /// The second half: from the temporary name to the target.
    case unpark(from: SafeRelativePath, to: SafeRelativePath)
    case remove(SafeRelativePath)
    case redownload(SafeRelativePath)
    /// A file that moved and changed: moved from `from`, then downloaded fresh at `to`.
    case refreshMove(from: SafeRelativePath, to: SafeRelativePath)
    /// A folder whose every file changed in place and whose shape did not: one deep redownload.
    case refreshFolder(SafeRelativePath)
    case addFile(SafeRelativePath)
    case addFolder(SafeRelativePath)

    /// The preferred place in the list when nothing forces another: folder moves, file moves,
    /// removes, redownloads, file adds, folder adds.
    var rank: Int {
        switch self {
        case .moveFolder: return 0
        case .moveFile, .park, .unpark: return 1
        case .remove: return 2
        case .redownload, .refreshMove, .refreshFolder: return 3
        case .addFile: return 4
        case .addFolder: return 5
        }
    }

    /// The path whose current bytes (or subtree) the step carries elsewhere.
    var source: SafeRelativePath? {
        switch self {
        case .moveFolder(let from, _), .moveFile(let from, _), .park(let from, _), .unpark(let from, _),
            .refreshMove(let from, _):
            return from
        default: return nil
        }
    }

    /// The path the step puts something at, replacing whatever stands there and creating
    /// missing parents.
    var written: SafeRelativePath? {
        switch self {
        case .moveFolder(_, let to), .moveFile(_, let to), .park(_, let to), .unpark(_, let to),
            .refreshMove(_, let to):
            return to
        case .addFile(let path), .addFolder(let path): return path
        case .remove, .redownload, .refreshFolder: return nil
        }
    }

    var isUnpark: Bool {
        if case .unpark = self { return true } else { return false }
    }

    /// The path that orders steps of the same rank.
    var key: SafeRelativePath {
        switch self {
        case .moveFolder(let from, _): return from
        case .moveFile(_, let to), .park(_, let to), .unpark(_, let to), .refreshMove(_, let to): return to
        case .remove(let path), .redownload(let path), .addFile(let path), .addFolder(let path),
            .refreshFolder(let path):
            return path
        }
    }

    /// The protocol change this step publishes.
    var kind: Change.Kind {
        switch self {
        case .moveFolder(let from, let to), .moveFile(let from, let to), .park(let from, let to),
            .unpark(let from, let to):
            return .move(from: from, to: to, rename: from.parent == to.parent)
        case .remove(let path): return .remove(path)
        case .redownload(let path): return .redownload(from: path, to: path)
        case .refreshMove(let from, let to): return .redownload(from: from, to: to)
        case .refreshFolder(let path): return .deepRedownload(path)
        case .addFile(let path), .addFolder(let path): return .add(path)
        }
    }

    static func preferredOrder(_ lhs: DiffStep, _ rhs: DiffStep) -> Bool {
        if lhs.rank != rhs.rank { return lhs.rank < rhs.rank }
        if lhs.key != rhs.key { return lhs.key < rhs.key }
        return (lhs.source ?? .root) < (rhs.source ?? .root)
    }
}
