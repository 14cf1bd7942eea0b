import Archive
import Foundation

/// `changes_A_B.json`: the changes that turn version `from` into version `to`.
public struct ChangeList: Sendable, Equatable {
    public var from: CacheVersion
    public var to: CacheVersion
    public var changes: [Change]
    /// Where it was read from, for messages.
    public var url: URL

    public static func parse(_ data: Data, from url: URL, layout: StorageLayout) throws(SyncError) -> ChangeList {
        let name = url.lastPathComponent
        let root = try JSONValue.parseStorageDocument(data, name: name, code: .invalidChangeList)
        func version(_ key: String) throws(SyncError) -> CacheVersion {
            guard let raw = root[key]?.scalarText else {
                throw SyncError(code: .invalidChangeList, message: "\(name): required key \"\(key)\" is missing or not a version")
            }
            do { return try CacheVersion(raw) } catch {
                throw SyncError(code: .invalidChangeList, message: "\(name): \"\(key)\": \(error)")
            }
        }
        let from = try version("from")
        let to = try version("to")
        guard from < to else {
            throw SyncError(code: .invalidChangeList, message: "\(name): \"from\" \(from) is not below \"to\" \(to)")
        }
        guard case .array(let items)? = root["changes"] else {
            throw SyncError(code: .invalidChangeList, message: "\(name): required key \"changes\" is missing or not an array")
        }
        var changes: [Change] = []
        for (index, item) in items.enumerated() {
            if let change = try parseChange(item, index: index, name: name, document: url, layout: layout) {
                changes.append(change)
            }
        }
        return ChangeList(from: from, to: to, changes: changes, url: url)
    }

    /// Classifies one change. Returns nil for an entry that changes nothing (both paths empty, or
    /// the same path without redownload).
    static func parseChange(_ item: JSONValue, index: Int, name: String, document: URL,
                            layout: StorageLayout) throws(SyncError) -> Change? {
        guard case .object = item else {
            throw SyncError(code: .invalidChangeList, message: "\(name): change #\(index) must be an object, found \(item.kindName)")
        }
        func path(_ key: String) throws(SyncError) -> SafeRelativePath? {
            guard let value = item[key], value != .null else { return nil }
            guard case .string(let text) = value else {
                throw SyncError(code: .invalidChangeList, message: "\(name): change #\(index) \"\(key)\" must be a string, found \(value.kindName)")
            }
            if text.isEmpty { return nil }
            do {
                return try layout.contentPath(ofURL: text, in: document)
            } catch {
                throw SyncError(code: .unsafePath,
                                message: "\(name): change #\(index) \(key) '\(text)': \(error); refusing the update", underlying: error)
            }
        }
        func flag(_ key: String) throws(SyncError) -> Bool {
            guard let value = item[key] else { return false }
            guard let flag = value.looseBool else {
                throw SyncError(code: .invalidChangeList, message: "\(name): change #\(index) \"\(key)\" must be true or false, found \(value.kindName)")
            }
            return flag
        }
        let old = try path("oldPath")
        let new = try path("newPath")
        let redownload = try flag("redownload")
        let rename = try flag("rename")
        let deep = try flag("isDeepFolderRedownload")
        for candidate in [old, new] {
            if let candidate, candidate.isRoot, !(deep || redownload) {
                throw SyncError(code: .unsafePath,
                                message: "\(name): change #\(index) names RXCacheContent/ itself; only a folder redownload may do that. Refusing the update")
            }
        }
        let kind: Change.Kind
        switch (old, new) {
        case (nil, nil):
            return nil
        case (nil, let target?):
            kind = deep ? .deepRedownload(target) : .add(target)
        case (let source?, nil):
            kind = deep ? .deepRedownload(source) : (redownload ? .redownload(from: source, to: source) : .remove(source))
        case (let source?, let target?):
            if deep {
                // A folder redownload to a new place is a redownload of a folder: the planner
                // moves it, then refreshes every file inside.
                kind = source == target ? .deepRedownload(target) : .redownload(from: source, to: target)
            } else if redownload {
                kind = .redownload(from: source, to: target)
            } else if source == target {
                return nil
            } else {
                if target.isWithin(source) {
                    throw SyncError(code: .invalidChangeList,
                                    message: "\(name): change #\(index) moves '\(source)' into itself ('\(target)'); the publisher must fix it")
                }
                kind = .move(from: source, to: target, rename: rename)
            }
        }
        var folderFingerprints: [SafeRelativePath: FileFingerprint] = [:]
        if let files = item["files"] {
            let folder: SafeRelativePath
            switch kind {
            case .deepRedownload(let path), .redownload(_, let path): folder = path
            default:
                throw SyncError(code: .invalidChangeList,
                                message: "\(name): change #\(index) has \"files\", which only a folder redownload may carry; the publisher must drop it")
            }
            folderFingerprints = try self.folderFingerprints(files, in: folder, index: index, name: name)
        }
        return Change(kind: kind, index: index, fingerprint: try fingerprint(of: item, index: index, name: name),
                      folderFingerprints: folderFingerprints)
    }

    /// The integrity extension's `"files"` of a folder redownload: `{"relative/path": {"sha256",
    /// "size"}}`, paths relative to the folder.
    static func folderFingerprints(_ value: JSONValue, in folder: SafeRelativePath, index: Int,
                                   name: String) throws(SyncError) -> [SafeRelativePath: FileFingerprint] {
        guard case .object(let members) = value else {
            throw SyncError(code: .invalidChangeList,
                            message: "\(name): change #\(index) \"files\" must be an object of relative path → {\"sha256\", \"size\"}, found \(value.kindName)")
        }
        var result: [SafeRelativePath: FileFingerprint] = [:]
        for (key, facts) in members {
            let relative: SafeRelativePath
            do {
                relative = try SafeRelativePath(validating: key)
            } catch {
                throw SyncError(code: .unsafePath, message: "\(name): change #\(index) \"files\" key '\(key)': \(error); refusing the update",
                                underlying: error)
            }
            guard !relative.isRoot, let fingerprint = try fingerprint(of: facts, index: index, name: name) else {
                throw SyncError(code: .invalidChangeList,
                                message: "\(name): change #\(index) \"files\" entry '\(key)' needs a file path and a \"sha256\"/\"size\" pair")
            }
            result[folder.appending(relative)] = fingerprint
        }
        return result
    }

    /// `sha256` + `size` of the integrity extension; both or neither.
    static func fingerprint(of item: JSONValue, index: Int, name: String) throws(SyncError) -> FileFingerprint? {
        guard let hashValue = item["sha256"] else { return nil }
        guard case .string(let hash) = hashValue, hash.count == 64, hash.allSatisfy(\.isHexDigit),
              let size = item["size"]?.scalarText.flatMap({ Int64($0) }), size >= 0 else {
            throw SyncError(code: .invalidChangeList,
                            message: "\(name): change #\(index) has a malformed \"sha256\"/\"size\" pair; the publisher must write 64 hex digits and a byte count")
        }
        return FileFingerprint(size: size, sha256: hash.lowercased())
    }
}
