import FileKit

/// One entry of a change list, classified.
public struct Change: Sendable, Equatable, CustomStringConvertible {
    /// What a change does, told by which of its entry's paths and flags are set.
    public enum Kind: Sendable, Equatable {
        /// `oldPath` empty: create a folder (no extension) or download a file.
        case add(SafeRelativePath)
        /// `newPath` empty: delete a file, or a folder recursively.
        case remove(SafeRelativePath)
        /// Both paths set and different. `rename` records the flag the storage set.
        case move(from: SafeRelativePath, to: SafeRelativePath, rename: Bool)
        /// `redownload: true`: fresh copy from `to`, moved there from `from` when they differ.
        case redownload(from: SafeRelativePath, to: SafeRelativePath)
        /// `isDeepFolderRedownload: true`: refresh every file inside the folder.
        case deepRedownload(SafeRelativePath)
    }

    /// What the change does, and to which paths.
    public var kind: Kind
    /// Position in its list, from 0, for messages.
    public var index: Int
    /// Integrity extension: the size and SHA-256 of the file this change downloads, when the
    /// publisher gave them.
    public var fingerprint: FileFingerprint?
    /// Integrity extension, for a change that refreshes a folder: the size and SHA-256 of each
    /// file it downloads, by content path.
    public var folderFingerprints: [SafeRelativePath: FileFingerprint]

    /// A change of `kind` at `index` in its list, with the integrity data the publisher gave
    /// (default none).
    public init(
        kind: Kind, index: Int, fingerprint: FileFingerprint? = nil,
        folderFingerprints: [SafeRelativePath: FileFingerprint] = [:]
    ) {
        self.kind = kind
        self.index = index
        self.fingerprint = fingerprint
        self.folderFingerprints = folderFingerprints
    }

    public var description: String {
        switch kind {
        case .add(let path): return "add \(path)"
        case .remove(let path): return "remove \(path)"
        case .move(let from, let to, let rename): return "\(rename ? "rename" : "move") \(from) → \(to)"
        case .redownload(let from, let to): return from == to ? "redownload \(to)" : "redownload \(from) → \(to)"
        case .deepRedownload(let path): return "redownload folder \(path)"
        }
    }

    /// The protocol's folder rule: a last component with no extension names a folder.
    public static func namesFolder(_ path: SafeRelativePath) -> Bool {
        guard let last = path.lastComponent else { return true }
        guard let dot = last.lastIndex(of: "."), dot != last.startIndex else { return true }
        return last.index(after: dot) == last.endIndex
    }
}
