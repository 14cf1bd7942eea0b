import Archive

/// TEMPORARY naive differ (replaced by the minimal one): removes, redownloads, adds.
public struct ChangeDifferError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

public enum ChangeDiffer {
    public static func diff(from old: ContentTree, to new: ContentTree) throws(ChangeDifferError) -> [Change.Kind] {
        var changes: [Change.Kind] = []
        for path in old.files.keys.sorted() where new.files[path] == nil { changes.append(.remove(path)) }
        for folder in old.folders.sorted(by: >) where !new.folders.contains(folder) { changes.append(.remove(folder)) }
        for (path, print) in new.files.sorted(by: { $0.key < $1.key }) {
            if let before = old.files[path] {
                if before != print { changes.append(.redownload(from: path, to: path)) }
            } else {
                changes.append(.add(path))
            }
        }
        for folder in new.folders.sorted() where !old.folders.contains(folder) { changes.append(.add(folder)) }
        return changes
    }
}
