import FileKit
import Foundation

/// One classified change as the planner consumes it: a ``Change`` whose folder fingerprints are
/// read from the list's bytes when the planner asks, instead of being collected into a
/// dictionary first (a folder redownload may name a hundred thousand files).
package struct ChangeRecord {
    package var kind: Change.Kind
    /// Position in its list, from 0, for messages.
    package var index: Int
    package var fingerprint: VirtualTree.Fingerprint?
    package var folderFiles: FolderFiles

    /// The integrity extension's `"files"` of a folder refresh.
    package enum FolderFiles {
        case none
        /// A ``Change``'s ``Change/folderFingerprints``, by content path.
        case paths([SafeRelativePath: FileFingerprint])
        /// The `"files"` object in a list's text, already checked. Valid only while
        /// ``ChangeListReader/forEachChange(_:)`` runs its body.
        case encoded(JSONParser)

        var isEmpty: Bool {
            if case .none = self { return true }
            return false
        }
    }

    package init(kind: Change.Kind, index: Int, fingerprint: VirtualTree.Fingerprint?, folderFiles: FolderFiles) {
        self.kind = kind
        self.index = index
        self.fingerprint = fingerprint
        self.folderFiles = folderFiles
    }

    /// The record of a change built in code.
    package init(_ change: Change) {
        self.init(
            kind: change.kind, index: change.index, fingerprint: change.fingerprint.map(VirtualTree.Fingerprint.init),
            folderFiles: change.folderFingerprints.isEmpty ? .none : .paths(change.folderFingerprints))
    }

    /// Each entry of `"files"` that lies below `folder`: its path relative to `folder`, and its
    /// fingerprint. A later entry for the same path wins.
    package func forEachFolderFile(
        below folder: SafeRelativePath,
        _ body: (SafeRelativePath, VirtualTree.Fingerprint) -> Void
    ) {
        switch folderFiles {
        case .none:
            return
        case .paths(let paths):
            for (path, fingerprint) in paths where path.isWithin(folder) && path != folder {
                body(path.rebased(from: folder, onto: .root), VirtualTree.Fingerprint(fingerprint))
            }
        case .encoded(let start):
            // Checked when the change was read, so nothing here can fail.
            var parser = start
            _ = try? Self.readFiles(&parser, index: index, name: "") { relative, fingerprint in
                body(relative, .packed(fingerprint))
            }
        }
    }

    /// The change as the public type, with its folder fingerprints collected by content path.
    package func change(folder: SafeRelativePath?) -> Change {
        var folderFingerprints: [SafeRelativePath: FileFingerprint] = [:]
        if let folder {
            forEachFolderFile(below: folder) { relative, fingerprint in
                folderFingerprints[folder.appending(relative)] = fingerprint.fileFingerprint
            }
        }
        return Change(
            kind: kind, index: index, fingerprint: fingerprint?.fileFingerprint, folderFingerprints: folderFingerprints)
    }

    /// The folder a change with `"files"` refreshes.
    package var refreshedFolder: SafeRelativePath? {
        switch kind {
        case .deepRedownload(let path), .redownload(_, let path): return path
        default: return nil
        }
    }

    // MARK: - Reading

    /// The members of a change the protocol reads. Of duplicate keys the last wins, as in a
    /// parsed object.
    private struct Fields {
        var oldPath, newPath, redownload, rename, deep, sha256, size, files: FieldValue?
    }

    /// Reads and classifies the change at the cursor. Returns nil for an entry that changes
    /// nothing (both paths empty, or the same path without redownload).
    package static func read(
        _ parser: inout JSONParser, index: Int, name: String, document: URL,
        layout: StorageLayout
    ) throws(StorageFormatError) -> ChangeRecord? {
        let first = parser.peek()
        guard first == UInt8(ascii: "{") else {
            throw StorageFormatError(
                code: .invalidChangeList,
                message:
                    "\(name): change #\(index) must be an object, found \(FieldValue.kindName(startingWith: first ?? 0))"
            )
        }
        let fields = try ChangeListReader.json(name) { () throws(JSONParseError) -> Fields in try readFields(&parser) }
        let reader = parser
        func json<T>(_ body: () throws(JSONParseError) -> T) throws(StorageFormatError) -> T {
            try ChangeListReader.json(name, body)
        }
        func path(_ key: String, _ value: FieldValue?) throws(StorageFormatError) -> SafeRelativePath? {
            guard let value, value != .null else { return nil }
            guard case .string(let token) = value else {
                throw StorageFormatError(
                    code: .invalidChangeList,
                    message:
                        "\(name): change #\(index) \"\(key)\" must be a string (\"\" for none), found \(value.kindName)"
                )
            }
            let text = try json { () throws(JSONParseError) in try reader.decode(token) }
            if text.isEmpty { return nil }
            do {
                return try layout.contentPath(ofURL: text, in: document)
            } catch {
                throw StorageFormatError(
                    code: .unsafePath,
                    message: "\(name): change #\(index) \(key) '\(text)': \(error); refusing the update",
                    underlying: error)
            }
        }
        func flag(_ key: String, _ value: FieldValue?) throws(StorageFormatError) -> Bool {
            guard let value else { return false }
            guard let flag = try json({ () throws(JSONParseError) in try value.looseBool(reader) }) else {
                throw StorageFormatError(
                    code: .invalidChangeList,
                    message: "\(name): change #\(index) \"\(key)\" must be true or false, found \(value.kindName)")
            }
            return flag
        }
        let old = try path("oldPath", fields.oldPath)
        let new = try path("newPath", fields.newPath)
        let redownload = try flag("redownload", fields.redownload)
        let rename = try flag("rename", fields.rename)
        var deep = try flag("isDeepFolderRedownload", fields.deep)
        // A remove is written with "newPath": "". A missing (or mistyped, or null) newPath
        // beside an oldPath would otherwise read as one, and delete content without a word.
        if old != nil, !(redownload || deep), fields.newPath == nil || fields.newPath == .null {
            throw StorageFormatError(
                code: .invalidChangeList,
                message:
                    "\(name): change #\(index) has an oldPath but no \"newPath\" string; a remove writes \"newPath\": \"\" (a mistyped key is not read as one). The publisher must fix the list"
            )
        }
        for candidate in [old, new] {
            // The root only as the one folder a redownload names: a file "redownloaded" onto
            // it (or the root onto a file) was read as a redownload that deleted the file.
            let oneFolder = old == nil || new == nil || old == new
            if let candidate, candidate.isRoot, !(deep || redownload) || !oneFolder {
                throw StorageFormatError(
                    code: .unsafePath,
                    message:
                        "\(name): change #\(index) names RXCacheContent/ itself \(oneFolder ? "without redownload" : "with another path"); only a redownload of the whole content may name it, with both paths RXCacheContent/ (or one empty). Refusing the update"
                )
            }
        }
        // The root is a folder: a redownload of it refreshes every file, as a deep one does
        // (read as a file's, it fetched a file named "" and refreshed nothing).
        if redownload, old?.isRoot == true || new?.isRoot == true { deep = true }
        let kind: Change.Kind
        switch (old, new) {
        case (nil, nil):
            return nil
        case (nil, let target?):
            kind = deep ? .deepRedownload(target) : .add(target)
        case (let source?, nil):
            kind =
                deep ? .deepRedownload(source) : (redownload ? .redownload(from: source, to: source) : .remove(source))
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
                    throw StorageFormatError(
                        code: .invalidChangeList,
                        message:
                            "\(name): change #\(index) moves '\(source)' into itself ('\(target)'); the publisher must fix it"
                    )
                }
                kind = .move(from: source, to: target, rename: rename)
            }
        }
        var folderFiles = FolderFiles.none
        if let files = fields.files {
            switch kind {
            case .deepRedownload, .redownload: break
            default:
                throw StorageFormatError(
                    code: .invalidChangeList,
                    message:
                        "\(name): change #\(index) has \"files\", which only a folder redownload may carry; the publisher must drop it"
                )
            }
            guard case .object(let start) = files else {
                throw StorageFormatError(
                    code: .invalidChangeList,
                    message:
                        "\(name): change #\(index) \"files\" must be an object of relative path → {\"sha256\", \"size\"}, found \(files.kindName)"
                )
            }
            var filesParser = reader
            filesParser.index = start
            let encoded = filesParser
            try readFiles(&filesParser, index: index, name: name) { _, _ in }
            folderFiles = .encoded(encoded)
        }
        let fingerprint = try Self.fingerprint(
            sha256: fields.sha256, size: fields.size, reader, index: index, name: name)
        return ChangeRecord(
            kind: kind, index: index, fingerprint: fingerprint.map(VirtualTree.Fingerprint.packed),
            folderFiles: folderFiles)
    }

    private static func readFields(_ parser: inout JSONParser) throws(JSONParseError) -> Fields {
        var fields = Fields()
        try parser.beginObject()
        var first = true
        while let key = try parser.nextMember(&first) {
            if try parser.token(key, is: "oldPath") {
                fields.oldPath = try FieldValue.read(&parser)
            } else if try parser.token(key, is: "newPath") {
                fields.newPath = try FieldValue.read(&parser)
            } else if try parser.token(key, is: "redownload") {
                fields.redownload = try FieldValue.read(&parser)
            } else if try parser.token(key, is: "rename") {
                fields.rename = try FieldValue.read(&parser)
            } else if try parser.token(key, is: "isDeepFolderRedownload") {
                fields.deep = try FieldValue.read(&parser)
            } else if try parser.token(key, is: "sha256") {
                fields.sha256 = try FieldValue.read(&parser)
            } else if try parser.token(key, is: "size") {
                fields.size = try FieldValue.read(&parser)
            } else if try parser.token(key, is: "files") {
                fields.files = try FieldValue.read(&parser)
            } else {
                try parser.skipValue()
            }
        }
        return fields
    }

    /// `sha256` + `size` of the integrity extension; both or neither.
    private static func fingerprint(
        sha256: FieldValue?, size: FieldValue?, _ parser: JSONParser, index: Int,
        name: String
    ) throws(StorageFormatError) -> PackedFingerprint? {
        guard let sha256 else { return nil }
        let malformed = StorageFormatError(
            code: .invalidChangeList,
            message:
                "\(name): change #\(index) has a malformed \"sha256\"/\"size\" pair; the publisher must write 64 hex digits and a byte count"
        )
        guard case .string(let token) = sha256 else { throw malformed }
        let sizeText = try ChangeListReader.json(name) { () throws(JSONParseError) in try size?.scalarText(parser) }
        guard let count = sizeText.flatMap({ Int64($0) }), count >= 0 else { throw malformed }
        let packed: PackedFingerprint?
        if token.escaped {
            let text = try ChangeListReader.json(name) { () throws(JSONParseError) in try parser.decode(token) }
            packed = PackedFingerprint(size: count, hex: text.utf8)
        } else {
            packed = PackedFingerprint(size: count, hex: UnsafeRawBufferPointer(rebasing: parser.bytes[token.contents]))
        }
        guard let packed else { throw malformed }
        return packed
    }

    /// Walks a `"files"` object (`{"relative/path": {"sha256", "size"}}`), checking each entry
    /// and handing it to `body`.
    private static func readFiles(
        _ parser: inout JSONParser, index: Int, name: String,
        _ body: (SafeRelativePath, PackedFingerprint) -> Void
    ) throws(StorageFormatError) {
        func json<T>(_ step: () throws(JSONParseError) -> T) throws(StorageFormatError) -> T {
            try ChangeListReader.json(name, step)
        }
        try json { () throws(JSONParseError) in try parser.beginObject() }
        var first = true
        while let keyToken = try json({ () throws(JSONParseError) in try parser.nextMember(&first) }) {
            let key = try json { () throws(JSONParseError) in try parser.decode(keyToken) }
            let relative: SafeRelativePath
            do {
                relative = try SafeRelativePath(validating: key)
            } catch {
                throw StorageFormatError(
                    code: .unsafePath,
                    message: "\(name): change #\(index) \"files\" key '\(key)': \(error); refusing the update",
                    underlying: error)
            }
            var sha256: FieldValue?
            var size: FieldValue?
            if parser.peek() == UInt8(ascii: "{") {
                try json { () throws(JSONParseError) in
                    try parser.beginObject()
                    var firstMember = true
                    while let member = try parser.nextMember(&firstMember) {
                        if try parser.token(member, is: "sha256") {
                            sha256 = try FieldValue.read(&parser)
                        } else if try parser.token(member, is: "size") {
                            size = try FieldValue.read(&parser)
                        } else {
                            try parser.skipValue()
                        }
                    }
                }
            } else {
                try json { () throws(JSONParseError) in try parser.skipValue() }
            }
            guard !relative.isRoot,
                let fingerprint = try fingerprint(sha256: sha256, size: size, parser, index: index, name: name)
            else {
                throw StorageFormatError(
                    code: .invalidChangeList,
                    message:
                        "\(name): change #\(index) \"files\" entry '\(key)' needs a file path and a \"sha256\"/\"size\" pair"
                )
            }
            body(relative, fingerprint)
        }
    }
}
