import Archive
import Foundation

/// One classified change as the planner consumes it.
struct ChangeRecord {
    var kind: Change.Kind
    /// Position in its list, from 0, for messages.
    var index: Int
    var fingerprint: VirtualTree.Fingerprint?
    var folderFiles: FolderFiles

    /// The integrity extension's `"files"` of a folder refresh.
    enum FolderFiles {
        case none
        /// A ``Change``'s ``Change/folderFingerprints``, by content path.
        case paths([SafeRelativePath: FileFingerprint])
    }

    init(kind: Change.Kind, index: Int, fingerprint: VirtualTree.Fingerprint?, folderFiles: FolderFiles) {
        self.kind = kind
        self.index = index
        self.fingerprint = fingerprint
        self.folderFiles = folderFiles
    }

    /// The record of a change built in code.
    init(_ change: Change) {
        self.init(kind: change.kind, index: change.index, fingerprint: change.fingerprint.map(VirtualTree.Fingerprint.init),
                  folderFiles: change.folderFingerprints.isEmpty ? .none : .paths(change.folderFingerprints))
    }

    /// Each entry of `"files"` that lies below `folder`: its path relative to `folder`, and its
    /// fingerprint. A later entry for the same path wins.
    func forEachFolderFile(below folder: SafeRelativePath,
                           _ body: (SafeRelativePath, VirtualTree.Fingerprint) -> Void) {
        switch folderFiles {
        case .none:
            return
        case .paths(let paths):
            for (path, fingerprint) in paths where path.isWithin(folder) && path != folder {
                body(path.rebased(from: folder, onto: .root), VirtualTree.Fingerprint(fingerprint))
            }
        }
    }
}
