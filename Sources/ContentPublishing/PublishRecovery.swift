import FileKit
import StorageFormat

/// What a publish found of an interrupted earlier publish of the same storage (killed, or
/// failed in a way it could not undo itself), and what it did about it before its own work.
public enum PublishRecovery: Sendable, Equatable, CustomStringConvertible {
    /// The interrupted publish (of `version`, when its journal said) had installed nothing:
    /// its work folder was deleted.
    case discarded(version: CacheVersion?)
    /// The interrupted publish of `version` had started installing but not committed: every
    /// file it put in place was put back, and the storage shows `restored` (nil: no storage,
    /// an interrupted `--init`) exactly as before.
    case rolledBack(version: CacheVersion, restored: CacheVersion?)
    /// The interrupted publish of `version` over `from` had committed (its status was visible);
    /// only its work folder was left, and was deleted.
    case finished(version: CacheVersion, from: CacheVersion?)

    public var description: String {
        switch self {
        case .discarded(let version):
            return
                "an interrupted publish\(version.map { " of \($0)" } ?? "") had installed nothing; deleted its work folder"
        case .rolledBack(let version, let restored):
            return
                "an interrupted publish of \(version) had installed part of its files; rolled it back, the storage is "
                + (restored.map { "\($0)" } ?? "empty") + " again"
        case .finished(let version, let from):
            return "an interrupted publish of \(version)" + (from.map { " over \($0)" } ?? "")
                + " had committed; deleted its work folder, so it is complete"
        }
    }
}
